# tessera_grpc_library(TARGET DIR NAME...): a static library of the C++ protobuf
# and gRPC code generated from src/DIR/proto/NAME.proto, included as
# "DIR/proto/NAME.pb.h" and "DIR/proto/NAME.grpc.pb.h".
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)

function(tessera_grpc_library target dir)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/gen)
  file(MAKE_DIRECTORY ${gen}/${dir}/proto)
  set(gen_srcs)
  foreach(name ${ARGN})
    set(proto ${PROJECT_SOURCE_DIR}/src/${dir}/proto/${name}.proto)
    set(out ${gen}/${dir}/proto/${name})
    add_custom_command(
      OUTPUT ${out}.pb.cc ${out}.grpc.pb.cc ${out}.pb.h ${out}.grpc.pb.h
      COMMAND protobuf::protoc
        --proto_path=${PROJECT_SOURCE_DIR}/src
        --cpp_out=${gen}
        --grpc_out=${gen}
        --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>
        ${proto}
      DEPENDS ${proto}
      COMMENT "protoc: ${name}")
    list(APPEND gen_srcs ${out}.pb.cc ${out}.grpc.pb.cc)
  endforeach()
  add_library(${target} STATIC ${gen_srcs})
  target_include_directories(${target} SYSTEM PUBLIC ${gen})
  target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
  # Generated code: not ours to keep warning-free.
  target_compile_options(${target} PRIVATE -w)
endfunction()
