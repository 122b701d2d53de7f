// A CUDA program for the quota library's tests: it loads the driver exactly
// as CUDA 13's runtime does (dlopen "libcuda.so.1", dlsym
// "cuGetProcAddress_v2", then every entry point through cuGetProcAddress with
// the versions and flags the runtime asks: data/cudart-13.0-requests.txt),
// then runs the steps given as arguments, one output line per step:
//   <step> <CUresult> [values]
// Steps (sizes in bytes; <i> counts this run's allocations from 0):
//   init                 cuInit, retain device 0's primary context, make it current
//   alloc:N  alloc32:N  managed:N  pitch:W:H  async:N  pool:N   allocate
//   free:i  free32:i  freeasync:i  sync        free; cuStreamSynchronize(0)
//   create:N  map:i  unmap:i  release:i        VMM on the current device
//   array:W:H  array3d:W:H:D:FLAGS  mipmap:W:H:LEVELS[:D[:FLAGS]]  destroy:i  (float4 elements)
//   info  info32  total  total32               memory info of device 0
//   nvml                                       NVML v1 and v2 memory info of NVML device 0
//   usage                                      the simulator's own accounting (the oracle)
//   release-primary  reset-primary  ctx-create  ctx-destroy
//   await:PATH                                 wait (10 s at most) until PATH exists (sequencing)
//   loop:N:BYTES                               N x (alloc, free); prints refusals
//   pointer:NAME:VERSION:FLAGS                 which file the looked-up function lives in
//   driver                                     the path libcuda.so.1 was loaded from
//   replay:FILE                                every request of FILE (name version flags per
//                                              line, '#' comments): code, status, file, symbol
//   exit-kill                                  SIGKILL self (no destructors, no exit handlers)
//   fork ... child-exit                        fork: the child runs the steps up to child-exit and exits; the
//                                              parent waits for it, prints "fork 0 <exit status>", and goes on after
//   init:D  ctx-create:D  set-ctx:i            device D's primary context, or a new one, current; make i current
//   stream  stream-destroy:i                   a stream of the current context
//   async-on:N:s  free-on:i:s                  stream-ordered on stream s (a handle index; "n": NULL)
//   capture:s  end-capture:s                   stream capture (the graph is recorded)
//   graph  graph-alloc:g:N[:D]  graph-free:g:i  a graph, an allocation node (its address recorded), a free node
//   instantiate:g[:FLAGS]  instantiate-upload:g:s  upload:e:s  launch:e:s  exec-destroy:e
//   graph-trim[:D]  graph-mem[:D]              cuDeviceGraphMemTrim; USED and RESERVED of device D's graph memory
//   module  module-unload:i                    cuModuleLoadData of an image; unload
//   usage:D                                    as usage, for device D (a word instead of D: device 0)
//   write:PATH  replace:PATH                   open PATH for writing; rename a new file over it: errno (0: done)
//   touch:PATH                                 create PATH (another process's await ends): errno (0: done)
//   free-each:i:N:US                           cuMemFree of handles i .. i+N-1, US microseconds apart: code, freed
//   mempool  pool-alloc:N:p  pool-destroy:p    cuMemPoolCreate on device 0; an allocation from pool p; destroy it
//   pool-keep:p                                pool p's release threshold UINT64_MAX (it keeps every free byte)
//   pool-race:N                                N cuMemAllocAsync of 1 MiB while another thread switches device 0's
//                                              current pool between its default and a new pool: code, done, refused
//   create:N:fd  create:N:on:D                 cuMemCreate asking for POSIX file descriptor handles; on device D
//   retain:v  export:i  import:f               cuMemRetainAllocationHandle of mapped address v; export
//                                              handle i as a descriptor; import descriptor f (all recorded)
//   set-access:v:N                             cuMemSetAccess(v, N): device 0 read-write (expandable segments)
//   library  library-unload:i  kernel:i:NAME   cuLibraryLoadData of an image; unload; cuLibraryGetKernel
// Types are declared here from [CH] cuda.h facts (design §1); nothing is linked.
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using Handle = void*;
using u64 = unsigned long long;

struct Desc2 {
  std::size_t w, h;
  int format;
  unsigned channels;
};
struct Desc3 {
  std::size_t w, h, d;
  int format;
  unsigned channels, flags;
};
struct Location {
  int type, id;
};
struct AllocProp {
  int type, handle_types;
  Location location;
  void* win32;
  unsigned char flags[8];
};
struct AccessDesc {  // [CH] CUmemAccessDesc, 12 bytes
  Location location;
  int flags;
};
struct PoolProps {  // [CH] CUmemPoolProps, 88 bytes
  int alloc_type, handle_types;
  Location location;
  void* win32;
  std::size_t max_size;
  unsigned short usage;
  unsigned char reserved[54];
};
struct MemAllocNodeParams {  // [CH] CUDA_MEM_ALLOC_NODE_PARAMS
  PoolProps pool;
  const void* access;
  std::size_t access_count;
  std::size_t bytesize;
  CUdeviceptr dptr;
};
struct InstantiateParams {  // [CH] CUDA_GRAPH_INSTANTIATE_PARAMS
  u64 flags;
  void* upload_stream;
  void* error_node;
  int result;
};
struct NvmlMemory {
  u64 total, free, used;
};
struct NvmlMemoryV2 {
  unsigned version;
  u64 total, reserved, free, used;
};

using GetProc = CUresult (*)(const char*, void**, int, u64, int*);
GetProc g_gpa = nullptr;

// One entry point, asked for as the runtime asks (base name, version, flags).
template <class F>
F get(const char* name, int version, u64 flags = 0) {
  void* p = nullptr;
  int status = -1;
  const CUresult r = g_gpa(name, &p, version, flags, &status);
  if (r != 0 || !p) {
    std::fprintf(stderr, "cuda_client: %s (v%d, flags %llu) not found: %d status %d\n", name, version, flags, r, status);
    return nullptr;
  }
  return reinterpret_cast<F>(p);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t colon = s.find(':', start);
    out.push_back(s.substr(start, colon - start));
    if (colon == std::string::npos) return out;
    start = colon + 1;
  }
}

u64 num(const std::vector<std::string>& a, std::size_t i) { return i < a.size() ? std::strtoull(a[i].c_str(), nullptr, 0) : 0; }

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    std::fprintf(stderr, "cuda_client: %s\n", dlerror());
    return 2;
  }
  g_gpa = reinterpret_cast<GetProc>(dlsym(driver, "cuGetProcAddress_v2"));
  if (!g_gpa) return 2;
  // The runtime's first requests: an empty name at version 0, cuInit, then
  // cuGetProcAddress itself at 11030 and 12000; it keeps the 12000 answer.
  void* ignored = nullptr;
  g_gpa("", &ignored, 0, 0, nullptr);
  auto cuInit = get<CUresult (*)(unsigned)>("cuInit", 2000);
  get<void*>("cuGetProcAddress", 11030);
  g_gpa = get<GetProc>("cuGetProcAddress", 12000);
  if (!g_gpa || !cuInit) return 2;

  auto retain = get<CUresult (*)(Handle*, int)>("cuDevicePrimaryCtxRetain", 7000);
  auto release = get<CUresult (*)(int)>("cuDevicePrimaryCtxRelease", 7000);
  auto reset = get<CUresult (*)(int)>("cuDevicePrimaryCtxReset", 7000);
  auto set_current = get<CUresult (*)(Handle)>("cuCtxSetCurrent", 4000);
  auto ctx_create = get<CUresult (*)(Handle*, unsigned, int)>("cuCtxCreate", 3020);
  auto ctx_destroy = get<CUresult (*)(Handle)>("cuCtxDestroy", 4000);
  auto alloc = get<CUresult (*)(CUdeviceptr*, std::size_t)>("cuMemAlloc", 3020);
  auto alloc32 = get<CUresult (*)(unsigned*, unsigned)>("cuMemAlloc", 2000);
  auto managed = get<CUresult (*)(CUdeviceptr*, std::size_t, unsigned)>("cuMemAllocManaged", 6000);
  auto pitch = get<CUresult (*)(CUdeviceptr*, std::size_t*, std::size_t, std::size_t, unsigned)>("cuMemAllocPitch", 3020);
  auto mem_free = get<CUresult (*)(CUdeviceptr)>("cuMemFree", 3020);
  auto mem_free32 = get<CUresult (*)(unsigned)>("cuMemFree", 2000);
  auto info = get<CUresult (*)(std::size_t*, std::size_t*)>("cuMemGetInfo", 3020);
  auto info32 = get<CUresult (*)(unsigned*, unsigned*)>("cuMemGetInfo", 2000);
  auto total = get<CUresult (*)(std::size_t*, int)>("cuDeviceTotalMem", 3020);
  auto total32 = get<CUresult (*)(unsigned*, int)>("cuDeviceTotalMem", 2000);

  std::vector<u64> handles;  // pointers, VMM handles or arrays, by step order
  auto record = [&](u64 h) {
    handles.push_back(h);
    return handles.size() - 1;
  };
  auto handle = [&](std::size_t i) { return i < handles.size() ? handles[i] : 0ull; };

  for (int a = 1; a < argc; ++a) {
    const std::string step = argv[a];
    const auto args = split(step);
    const std::string& op = args[0];
    CUresult r = -1;
    auto stream_arg = [&](std::size_t i) {
      return i >= args.size() || args[i] == "n" ? Handle{nullptr} : reinterpret_cast<Handle>(handle(num(args, i)));
    };
    if (op == "init") {
      Handle ctx = nullptr;
      r = cuInit(0);
      if (r == 0) r = retain(&ctx, static_cast<int>(num(args, 1)));
      if (r == 0) r = set_current(ctx);
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "set-ctx") {
      std::printf("%s %d\n", step.c_str(), set_current(reinterpret_cast<Handle>(handle(num(args, 1)))));
    } else if (op == "stream") {
      Handle s = nullptr;
      r = get<CUresult (*)(Handle*, unsigned)>("cuStreamCreate", 2000)(&s, 0);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(s)) : SIZE_MAX);
    } else if (op == "stream-destroy") {
      r = get<CUresult (*)(Handle)>("cuStreamDestroy", 4000)(reinterpret_cast<Handle>(handle(num(args, 1))));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "async-on") {
      CUdeviceptr p = 0;
      r = get<CUresult (*)(CUdeviceptr*, std::size_t, Handle)>("cuMemAllocAsync", 11020)(&p, num(args, 1), stream_arg(2));
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(p) : SIZE_MAX);
    } else if (op == "free-on") {
      r = get<CUresult (*)(CUdeviceptr, Handle)>("cuMemFreeAsync", 11020)(handle(num(args, 1)), stream_arg(2));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "capture") {
      r = get<CUresult (*)(Handle, int)>("cuStreamBeginCapture", 10010)(stream_arg(1), 0);
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "end-capture") {
      Handle g = nullptr;
      r = get<CUresult (*)(Handle, Handle*)>("cuStreamEndCapture", 10000)(stream_arg(1), &g);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(g)) : SIZE_MAX);
    } else if (op == "graph") {
      Handle g = nullptr;
      r = get<CUresult (*)(Handle*, unsigned)>("cuGraphCreate", 10000)(&g, 0);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(g)) : SIZE_MAX);
    } else if (op == "graph-alloc") {
      MemAllocNodeParams params{};
      params.pool.alloc_type = 1;             // [CH] CU_MEM_ALLOCATION_TYPE_PINNED
      params.pool.location = {1, static_cast<int>(num(args, 3))};  // [CH] a device location
      params.bytesize = num(args, 2);
      Handle node = nullptr;
      r = get<CUresult (*)(Handle*, Handle, const Handle*, std::size_t, MemAllocNodeParams*)>("cuGraphAddMemAllocNode",
                                                                                             11040)(
          &node, reinterpret_cast<Handle>(handle(num(args, 1))), nullptr, 0, &params);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(params.dptr) : SIZE_MAX);
    } else if (op == "graph-free") {
      Handle node = nullptr;
      r = get<CUresult (*)(Handle*, Handle, const Handle*, std::size_t, CUdeviceptr)>("cuGraphAddMemFreeNode", 11040)(
          &node, reinterpret_cast<Handle>(handle(num(args, 1))), nullptr, 0, handle(num(args, 2)));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "instantiate" || op == "instantiate-upload") {
      Handle e = nullptr;
      const Handle g = reinterpret_cast<Handle>(handle(num(args, 1)));
      if (op == "instantiate") {
        r = get<CUresult (*)(Handle*, Handle, u64)>("cuGraphInstantiateWithFlags", 11040)(&e, g, num(args, 2));
      } else {
        InstantiateParams params{2, stream_arg(2), nullptr, 0};  // [CH] CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
        r = get<CUresult (*)(Handle*, Handle, InstantiateParams*)>("cuGraphInstantiateWithParams", 12000)(&e, g, &params);
      }
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(e)) : SIZE_MAX);
    } else if (op == "upload" || op == "launch") {
      r = get<CUresult (*)(Handle, Handle)>(op == "upload" ? "cuGraphUpload" : "cuGraphLaunch", op == "upload" ? 11010 : 10000)(
          reinterpret_cast<Handle>(handle(num(args, 1))), stream_arg(2));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "exec-destroy") {
      r = get<CUresult (*)(Handle)>("cuGraphExecDestroy", 10000)(reinterpret_cast<Handle>(handle(num(args, 1))));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "graph-trim") {
      std::printf("%s %d\n", step.c_str(), get<CUresult (*)(int)>("cuDeviceGraphMemTrim", 11040)(static_cast<int>(num(args, 1))));
    } else if (op == "graph-mem") {
      auto attr = get<CUresult (*)(int, int, void*)>("cuDeviceGetGraphMemAttribute", 11040);
      u64 used = 0, reserved = 0;
      r = attr(static_cast<int>(num(args, 1)), 0, &used);  // [CH] USED_MEM_CURRENT 0, RESERVED_MEM_CURRENT 2
      if (r == 0) r = attr(static_cast<int>(num(args, 1)), 2, &reserved);
      std::printf("%s %d %llu %llu\n", step.c_str(), r, used, reserved);
    } else if (op == "module") {
      Handle m = nullptr;
      static const char kImage[] = "//\n// tessera test image\n.version 8.0\n";
      r = get<CUresult (*)(Handle*, const void*)>("cuModuleLoadData", 2000)(&m, kImage);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(m)) : SIZE_MAX);
    } else if (op == "module-race") {
      // module-race:N:BYTES: N allocations of BYTES made, then freed one by one by a second
      // thread (about every 100 µs) while this one loads N modules, each kept: prints the
      // allocations made, the loads done and the loads refused. module-race:N:BYTES:reset: the
      // allocations in the current (primary) context, the modules loaded in a context created
      // for them, and the second thread resets the primary context 2 ms into the loads instead.
      // module-race:N:BYTES:unmap: each allocation a VMM one (cuMemCreate, mapped, its handle
      // released), which the second thread unmaps (the last unmap frees it).
      // module-race:N:0:trim: no allocations; the second thread calls cuDeviceGraphMemTrim on
      // device 0 2 ms into the loads (the graph memory earlier steps left reserved is given back).
      static const char kImage[] = "//\n// tessera test image\n.version 8.0\n";
      const auto load = get<CUresult (*)(Handle*, const void*)>("cuModuleLoadData", 2000);
      const auto get_current = get<CUresult (*)(Handle*)>("cuCtxGetCurrent", 4000);
      Handle ctx = nullptr;
      r = get_current(&ctx);
      std::vector<CUdeviceptr> chunks;
      const bool by_unmap = args.size() > 3 && args[3] == "unmap";
      const bool by_trim = args.size() > 3 && args[3] == "trim";
      const auto unmap = get<CUresult (*)(CUdeviceptr, std::size_t)>("cuMemUnmap", 10020);
      for (u64 i = 0; r == 0 && !by_trim && i < num(args, 1); ++i) {
        CUdeviceptr p = 0;
        if (!by_unmap) {
          if (alloc(&p, num(args, 2)) == 0) chunks.push_back(p);
          continue;
        }
        AllocProp prop{};
        prop.type = 1;             // [CH] CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location = {1, 0};    // [CH] CU_MEM_LOCATION_TYPE_DEVICE, device 0
        u64 h = 0;
        if (get<CUresult (*)(u64*, std::size_t, const AllocProp*, u64)>("cuMemCreate", 10020)(&h, num(args, 2), &prop, 0) != 0)
          continue;
        const bool mapped =
            get<CUresult (*)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr, u64)>("cuMemAddressReserve", 10020)(
                &p, num(args, 2), 0, 0, 0) == 0 &&
            get<CUresult (*)(CUdeviceptr, std::size_t, std::size_t, u64, u64)>("cuMemMap", 10020)(p, num(args, 2), 0, h, 0) == 0;
        get<CUresult (*)(u64)>("cuMemRelease", 10020)(h);
        if (mapped) chunks.push_back(p);
      }
      const bool by_reset = args.size() > 3 && args[3] == "reset";
      Handle loads_in = nullptr;
      if (by_reset && r == 0) r = ctx_create(&loads_in, 0, 0);
      std::thread freer([&] {
        set_current(ctx);
        if (by_reset || by_trim) {
          usleep(2000);
          if (by_trim) get<CUresult (*)(int)>("cuDeviceGraphMemTrim", 11040)(0);
          else if (reset) reset(0);
          return;
        }
        for (CUdeviceptr p : chunks) {
          if (by_unmap) unmap(p, num(args, 2));
          else mem_free(p);
          usleep(100);
        }
      });
      u64 done = 0, refused = 0;
      for (u64 i = 0; r == 0 && i < num(args, 1); ++i) {
        Handle m = nullptr;
        (load(&m, kImage) == 0 ? done : refused) += 1;
      }
      freer.join();
      std::printf("%s %d %zu %llu %llu\n", step.c_str(), r, chunks.size(), done, refused);
    } else if (op == "module-unload") {
      r = get<CUresult (*)(Handle)>("cuModuleUnload", 2000)(reinterpret_cast<Handle>(handle(num(args, 1))));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "write") {
      const std::string path = step.substr(6);
      const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
      int err = fd < 0 ? errno : 0;
      if (fd >= 0) {
        if (::write(fd, "0 GPU-0 1\n", 10) != 10) err = errno;
        ::close(fd);
      }
      std::printf("%s %d\n", step.c_str(), err);
    } else if (op == "replace") {
      const std::string path = step.substr(8);
      const std::string aside = path + ".tenant";
      const int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      int err = fd < 0 ? errno : 0;
      if (fd >= 0) ::close(fd);
      if (err == 0 && ::rename(aside.c_str(), path.c_str()) != 0) err = errno;
      ::unlink(aside.c_str());
      std::printf("%s %d\n", step.c_str(), err);
    } else if (op == "alloc" || op == "managed") {
      CUdeviceptr p = 0;
      r = op == "alloc" ? alloc(&p, num(args, 1)) : managed(&p, num(args, 1), 1);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(p) : SIZE_MAX);
    } else if (op == "alloc32") {
      unsigned p = 0;
      r = alloc32(&p, static_cast<unsigned>(num(args, 1)));
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(p) : SIZE_MAX);
    } else if (op == "pitch") {
      CUdeviceptr p = 0;
      std::size_t pitch_bytes = 0;
      r = pitch(&p, &pitch_bytes, num(args, 1), num(args, 2), 4);
      std::printf("%s %d %zu %zu\n", step.c_str(), r, r == 0 ? record(p) : SIZE_MAX, pitch_bytes);
    } else if (op == "async" || op == "pool") {
      CUdeviceptr p = 0;
      if (op == "async") {
        r = get<CUresult (*)(CUdeviceptr*, std::size_t, Handle)>("cuMemAllocAsync", 11020)(&p, num(args, 1), nullptr);
      } else {
        Handle pool = nullptr;
        r = get<CUresult (*)(Handle*, int)>("cuDeviceGetDefaultMemPool", 11020)(&pool, 0);
        if (r == 0)
          r = get<CUresult (*)(CUdeviceptr*, std::size_t, Handle, Handle)>("cuMemAllocFromPoolAsync", 11020)(
              &p, num(args, 1), pool, nullptr);
      }
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(p) : SIZE_MAX);
    } else if (op == "free") {
      std::printf("%s %d\n", step.c_str(), mem_free(handle(num(args, 1))));
    } else if (op == "free-each") {
      u64 freed = 0;
      r = 0;
      for (u64 i = num(args, 1); r == 0 && i < num(args, 1) + num(args, 2); ++i) {
        r = mem_free(handle(i));
        freed += r == 0;
        usleep(static_cast<useconds_t>(num(args, 3)));
      }
      std::printf("%s %d %llu\n", step.c_str(), r, freed);
    } else if (op == "touch") {
      const std::string path = step.substr(6);
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      const int err = fd < 0 ? errno : 0;
      if (fd >= 0) ::close(fd);
      std::printf("%s %d\n", step.c_str(), err);
    } else if (op == "free32") {
      std::printf("%s %d\n", step.c_str(), mem_free32(static_cast<unsigned>(handle(num(args, 1)))));
    } else if (op == "freeasync") {
      r = get<CUresult (*)(CUdeviceptr, Handle)>("cuMemFreeAsync", 11020)(handle(num(args, 1)), nullptr);
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "sync") {
      std::printf("%s %d\n", step.c_str(), get<CUresult (*)(Handle)>("cuStreamSynchronize", 2000)(nullptr));
    } else if (op == "mempool") {
      PoolProps props{};
      props.alloc_type = 1;      // [CH] CU_MEM_ALLOCATION_TYPE_PINNED
      props.location = {1, 0};  // [CH] CU_MEM_LOCATION_TYPE_DEVICE, device 0
      Handle pool = nullptr;
      r = get<CUresult (*)(Handle*, const PoolProps*)>("cuMemPoolCreate", 11020)(&pool, &props);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(pool)) : SIZE_MAX);
    } else if (op == "pool-alloc") {
      CUdeviceptr p = 0;
      r = get<CUresult (*)(CUdeviceptr*, std::size_t, Handle, Handle)>("cuMemAllocFromPoolAsync", 11020)(
          &p, num(args, 1), reinterpret_cast<Handle>(handle(num(args, 2))), nullptr);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(p) : SIZE_MAX);
    } else if (op == "pool-race" || op == "pool-race-location") {
      PoolProps props{};
      props.alloc_type = 1;      // [CH] CU_MEM_ALLOCATION_TYPE_PINNED
      props.location = {1, 0};  // [CH] CU_MEM_LOCATION_TYPE_DEVICE, device 0
      Handle fallback = nullptr, other = nullptr;
      r = get<CUresult (*)(Handle*, int)>("cuDeviceGetDefaultMemPool", 11020)(&fallback, 0);
      if (r == 0) r = get<CUresult (*)(Handle*, const PoolProps*)>("cuMemPoolCreate", 11020)(&other, &props);
      // pool-race-location: CUDA 13's cuMemSetMemPool, the same switch by location and type.
      const auto set_device = get<CUresult (*)(int, Handle)>("cuDeviceSetMemPool", 11020);
      struct Location {
        int type, id;
      };
      const auto set_location = get<CUresult (*)(Location*, int, Handle)>("cuMemSetMemPool", 13000);
      const auto set = [&](int device, Handle pool) {
        Location where{1, device};  // [CH] CU_MEM_LOCATION_TYPE_DEVICE; CU_MEM_ALLOCATION_TYPE_PINNED is 1
        return op == "pool-race" ? set_device(device, pool) : set_location(&where, 1, pool);
      };
      const auto alloc = get<CUresult (*)(CUdeviceptr*, std::size_t, Handle)>("cuMemAllocAsync", 11020);
      std::atomic<bool> stop{false};
      std::thread switcher([&] {
        while (r == 0 && !stop.load()) {
          set(0, other);
          set(0, fallback);
        }
      });
      std::size_t done = 0, refused = 0;
      for (std::size_t i = 0; r == 0 && i < num(args, 1); ++i) {
        CUdeviceptr p = 0;
        (alloc(&p, 1 << 20, nullptr) == 0 ? done : refused) += 1;
      }
      stop.store(true);
      switcher.join();
      std::printf("%s %d %zu %zu\n", step.c_str(), r, done, refused);
    } else if (op == "pool-keep") {
      u64 keep = ~0ULL;  // [CH] CU_MEMPOOL_ATTR_RELEASE_THRESHOLD is 4
      r = get<CUresult (*)(Handle, int, void*)>("cuMemPoolSetAttribute", 11020)(
          reinterpret_cast<Handle>(handle(num(args, 1))), 4, &keep);
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "pool-destroy") {
      r = get<CUresult (*)(Handle)>("cuMemPoolDestroy", 11020)(reinterpret_cast<Handle>(handle(num(args, 1))));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "retain") {
      u64 h = 0;
      r = get<CUresult (*)(u64*, void*)>("cuMemRetainAllocationHandle", 11000)(
          &h, reinterpret_cast<void*>(handle(num(args, 1))));
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(h) : SIZE_MAX);
    } else if (op == "export") {
      int fd = -1;
      r = get<CUresult (*)(void*, u64, int, u64)>("cuMemExportToShareableHandle", 10020)(&fd, handle(num(args, 1)), 1, 0);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(static_cast<u64>(fd)) : SIZE_MAX);
    } else if (op == "import") {
      u64 h = 0;
      const auto fd = static_cast<std::intptr_t>(handle(num(args, 1)));
      r = get<CUresult (*)(u64*, void*, int)>("cuMemImportFromShareableHandle", 10020)(
          &h, reinterpret_cast<void*>(fd), 1);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(h) : SIZE_MAX);
    } else if (op == "set-access") {
      const AccessDesc desc{{1, 0}, 3};  // [CH] device 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE
      r = get<CUresult (*)(CUdeviceptr, std::size_t, const AccessDesc*, std::size_t)>("cuMemSetAccess", 10020)(
          handle(num(args, 1)), num(args, 2), &desc, 1);
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "library") {
      Handle lib = nullptr;
      static const char kImage[] = "//\n// tessera test library\n.version 8.0\n";
      r = get<CUresult (*)(Handle*, const void*, void*, void**, unsigned, void*, void**, unsigned)>("cuLibraryLoadData",
                                                                                                 12000)(
          &lib, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(lib)) : SIZE_MAX);
    } else if (op == "library-unload") {
      r = get<CUresult (*)(Handle)>("cuLibraryUnload", 12000)(reinterpret_cast<Handle>(handle(num(args, 1))));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "kernel") {
      Handle kernel = nullptr;
      r = get<CUresult (*)(Handle*, Handle, const char*)>("cuLibraryGetKernel", 12000)(
          &kernel, reinterpret_cast<Handle>(handle(num(args, 1))), args.size() > 2 ? args[2].c_str() : "");
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "create") {
      AllocProp prop{};
      prop.type = 1;  // [CH] CU_MEM_ALLOCATION_TYPE_PINNED
      prop.handle_types = args.size() > 2 && args[2] == "fd" ? 1 : 0;  // [CH] CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
      prop.location = {args.size() > 2 && args[2] == "host" ? 2 : 1, 0};  // [CH] DEVICE 1, HOST 2
      if (args.size() > 3 && args[2] == "on") prop.location.id = static_cast<int>(num(args, 3));  // device D
      u64 h = 0;
      r = get<CUresult (*)(u64*, std::size_t, const AllocProp*, u64)>("cuMemCreate", 10020)(&h, num(args, 1), &prop, 0);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(h) : SIZE_MAX);
    } else if (op == "map") {
      // Reserve an address range the handle's size and map it there.
      const u64 h = handle(num(args, 1));
      const std::size_t size = num(args, 2);
      CUdeviceptr va = 0;
      r = get<CUresult (*)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr, u64)>("cuMemAddressReserve", 10020)(
          &va, size, 0, 0, 0);
      if (r == 0) r = get<CUresult (*)(CUdeviceptr, std::size_t, std::size_t, u64, u64)>("cuMemMap", 10020)(va, size, 0, h, 0);
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(va) : SIZE_MAX);
    } else if (op == "unmap") {
      r = get<CUresult (*)(CUdeviceptr, std::size_t)>("cuMemUnmap", 10020)(handle(num(args, 1)), num(args, 2));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "release") {
      r = get<CUresult (*)(u64)>("cuMemRelease", 10020)(handle(num(args, 1)));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "array" || op == "array3d" || op == "mipmap") {
      Handle arr = nullptr;
      constexpr int kFloat = 0x20;  // [CH] CU_AD_FORMAT_FLOAT, 4 bytes; 4 channels
      if (op == "array") {
        const Desc2 d{num(args, 1), num(args, 2), kFloat, 4};
        r = get<CUresult (*)(Handle*, const Desc2*)>("cuArrayCreate", 3020)(&arr, &d);
      } else if (op == "array3d") {
        const Desc3 d{num(args, 1), num(args, 2), num(args, 3), kFloat, 4, static_cast<unsigned>(num(args, 4))};
        r = get<CUresult (*)(Handle*, const Desc3*)>("cuArray3DCreate", 3020)(&arr, &d);
      } else {
        const Desc3 d{num(args, 1), num(args, 2), num(args, 4), kFloat, 4, static_cast<unsigned>(num(args, 5))};
        r = get<CUresult (*)(Handle*, const Desc3*, unsigned)>("cuMipmappedArrayCreate", 5000)(
            &arr, &d, static_cast<unsigned>(num(args, 3)));
      }
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(arr)) : SIZE_MAX);
    } else if (op == "destroy" || op == "destroy-mipmap") {
      const char* name = op == "destroy" ? "cuArrayDestroy" : "cuMipmappedArrayDestroy";
      r = get<CUresult (*)(Handle)>(name, op == "destroy" ? 2000 : 5000)(reinterpret_cast<Handle>(handle(num(args, 1))));
      std::printf("%s %d\n", step.c_str(), r);
    } else if (op == "info") {
      std::size_t f = 0, t = 0;
      r = info(&f, &t);
      std::printf("%s %d %zu %zu\n", step.c_str(), r, f, t);
    } else if (op == "info-null") {
      std::size_t t = 0;
      r = info(nullptr, &t);
      std::printf("%s %d %zu\n", step.c_str(), r, t);
    } else if (op == "info32") {
      unsigned f = 0, t = 0;
      r = info32(&f, &t);
      std::printf("%s %d %u %u\n", step.c_str(), r, f, t);
    } else if (op == "total") {
      std::size_t t = 0;
      r = total(&t, static_cast<int>(num(args, 1)));
      std::printf("%s %d %zu\n", step.c_str(), r, t);
    } else if (op == "total32") {
      unsigned t = 0;
      r = total32(&t, 0);
      std::printf("%s %d %u\n", step.c_str(), r, t);
    } else if (op == "nvml") {
      void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!nvml) {
        std::printf("%s -1 %s\n", step.c_str(), dlerror());
        continue;
      }
      auto nvml_init = reinterpret_cast<int (*)()>(dlsym(nvml, "nvmlInit_v2"));
      auto by_index = reinterpret_cast<int (*)(unsigned, Handle*)>(dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2"));
      auto v1 = reinterpret_cast<int (*)(Handle, NvmlMemory*)>(dlsym(nvml, "nvmlDeviceGetMemoryInfo"));
      auto v2 = reinterpret_cast<int (*)(Handle, NvmlMemoryV2*)>(dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2"));
      Handle dev = nullptr;
      NvmlMemory m1{};
      NvmlMemoryV2 m2{};
      m2.version = 0x02000028;  // [N] nvmlMemory_v2
      int rr = nvml_init ? nvml_init() : -1;
      if (rr == 0) rr = by_index(0, &dev);
      const int r1 = rr == 0 ? v1(dev, &m1) : rr;
      const int r2 = rr == 0 ? v2(dev, &m2) : rr;
      std::printf("%s %d %llu %llu %llu %d %llu %llu %llu %llu %#x\n", step.c_str(), r1, m1.total, m1.free, m1.used, r2,
                  m2.total, m2.free, m2.used, m2.reserved, m2.version);
    } else if (op == "usage") {
      auto sim = reinterpret_cast<CUresult (*)(int, u64*, u64*, u64*)>(dlsym(driver, "tesseraCudaSimUsage"));
      u64 process = 0, device = 0, peak = 0;
      r = sim ? sim(static_cast<int>(num(args, 1)), &process, &device, &peak) : -1;
      std::printf("%s %d %llu %llu %llu\n", step.c_str(), r, process, device, peak);
    } else if (op == "release-primary") {
      std::printf("%s %d\n", step.c_str(), release(0));
    } else if (op == "reset-primary") {
      std::printf("%s %d\n", step.c_str(), reset ? reset(0) : -1);
    } else if (op == "ctx-create") {
      Handle ctx = nullptr;
      r = ctx_create(&ctx, 0, static_cast<int>(num(args, 1)));
      std::printf("%s %d %zu\n", step.c_str(), r, r == 0 ? record(reinterpret_cast<u64>(ctx)) : SIZE_MAX);
    } else if (op == "ctx-destroy") {
      std::printf("%s %d\n", step.c_str(), ctx_destroy(reinterpret_cast<Handle>(handle(num(args, 1)))));
    } else if (op == "await") {
      const std::string path = step.substr(6);
      int waited = 0;
      while (access(path.c_str(), F_OK) != 0 && waited < 10000) {
        usleep(1000);
        ++waited;
      }
      std::printf("%s %d\n", step.c_str(), waited < 10000 ? 0 : -1);
    } else if (op == "loop") {
      const u64 n = num(args, 1), bytes = num(args, 2);
      u64 refused = 0, other = 0;
      for (u64 i = 0; i < n; ++i) {
        CUdeviceptr p = 0;
        r = alloc(&p, bytes);
        if (r == 2) ++refused;
        else if (r != 0) ++other;
        else mem_free(p);
      }
      std::printf("%s 0 %llu %llu\n", step.c_str(), refused, other);
    } else if (op == "driver") {
      link_map* map = nullptr;
      const bool known = dlinfo(driver, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name;
      std::printf("%s %d %s\n", step.c_str(), known ? 0 : 1, known ? map->l_name : "-");
    } else if (op == "pointer") {
      void* p = nullptr;
      r = g_gpa(args.size() > 1 ? args[1].c_str() : "", &p, static_cast<int>(num(args, 2)), num(args, 3), nullptr);
      Dl_info where{};
      const char* file = p && dladdr(p, &where) && where.dli_fname ? where.dli_fname : "-";
      const char* slash = std::strrchr(file, '/');
      std::printf("%s %d %s %s\n", step.c_str(), r, slash ? slash + 1 : file,
                  p && where.dli_sname ? where.dli_sname : "-");
    } else if (op == "replay") {
      std::FILE* f = std::fopen(step.substr(7).c_str(), "r");
      if (!f) return 2;
      char text[256];
      while (std::fgets(text, sizeof text, f)) {
        if (text[0] == '#' || text[0] == '\n') continue;
        char name[128] = {};
        int version = 0;
        unsigned long long flags = 0;
        if (std::sscanf(text, "%127s %d %llu", name, &version, &flags) != 3) return 2;
        const std::string base = std::strcmp(name, "\"\"") == 0 ? "" : name;
        void* p = nullptr;
        int status = -1;
        r = g_gpa(base.c_str(), &p, version, flags, &status);
        Dl_info where{};
        const char* file = p && dladdr(p, &where) && where.dli_fname ? where.dli_fname : "-";
        const char* slash = std::strrchr(file, '/');
        std::printf("replay %s/%d/%llu %d %d %s %s\n", name, version, flags, r, status, slash ? slash + 1 : file,
                    p && where.dli_sname ? where.dli_sname : "-");
      }
      std::fclose(f);
    } else if (op == "exit-kill") {
      raise(SIGKILL);
    } else if (op == "fork") {
      std::fflush(stdout);
      const pid_t child = fork();
      if (child == 0) continue;  // the child runs the next steps
      int status = -1;
      if (child > 0) waitpid(child, &status, 0);
      while (a + 1 < argc && std::string(argv[a + 1]) != "child-exit") ++a;
      ++a;  // past child-exit
      std::printf("%s %d %d\n", step.c_str(), child > 0 ? 0 : -1, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else if (op == "child-exit") {
      std::fflush(stdout);
      _exit(0);
    } else {
      std::fprintf(stderr, "cuda_client: unknown step %s\n", step.c_str());
      return 2;
    }
  }
  return 0;
}
