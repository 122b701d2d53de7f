#include "plugin/registration.hpp"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include "plugin/proto/deviceplugin_v1beta1.grpc.pb.h"

namespace tessera::plugin {

Result<void> register_resource(const std::string& kubelet_socket, const std::string& endpoint,
                               const std::string& resource, std::chrono::milliseconds timeout) {
  struct stat st {};
  if (stat(kubelet_socket.c_str(), &st) != 0)
    return fail(Errc::not_found, "kubelet socket " + kubelet_socket + " does not exist (is the kubelet running?)");
  if (!S_ISSOCK(st.st_mode)) return fail(Errc::invalid_argument, kubelet_socket + " is not a socket");
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a fresh connection per registration
  // The socket can appear a moment before its server listens: retry fast, not after gRPC's 1 s backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  auto channel = grpc::CreateCustomChannel("unix://" + kubelet_socket, grpc::InsecureChannelCredentials(), args);
  auto stub = ::v1beta1::Registration::NewStub(channel);
  ::v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(endpoint);
  request.set_resource_name(resource);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  ::v1beta1::Empty reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  ctx.set_wait_for_ready(true);
  auto status = stub->Register(&ctx, request, &reply);
  if (!status.ok())
    return fail(Errc::io, "kubelet at " + kubelet_socket + " refused " + resource + ": " + status.error_message());
  return {};
}

}  // namespace tessera::plugin
