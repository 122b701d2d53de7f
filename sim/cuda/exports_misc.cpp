// Entry points that allocate nothing: synchronisation, a kernel launch, a
// copy, the export-table query, and the call-count control. They exist so
// that the quota library's tests can show it leaves them alone (design §5:
// the program's pointer for cuLaunchKernel, cuMemcpyHtoD_v2 and
// cuStreamSynchronize is the simulator's), and, for the synchronisations,
// because a pool releases memory there (exports_pool.cpp).
#include <dlfcn.h>

#include <cstring>

#include "entry.hpp"

using namespace tessera_cuda_sim;

namespace {

// [CH] a capturing stream cannot be synchronised.
CUresult stream_synchronize(CUstream s) {
  return initialized([&](Driver& d) {
    Context* c = nullptr;
    if (CUresult r = stream_context(d, s, c); r != CUDA_SUCCESS) return r;
    if (capture_of(d, s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return d.synchronize();
  });
}

// sim: there are no modules, so any non-NULL function handle launches (and
// does nothing). [CH] lists INVALID_HANDLE, INVALID_VALUE and INVALID_CONTEXT.
CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                unsigned int bz, CUstream s) {
  return initialized([&](Driver& d) {
    Context* c = nullptr;
    if (CUresult r = stream_context(d, s, c); r != CUDA_SUCCESS) return r;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  });
}

// sim: the destination must lie inside memory this process holds (a
// cuMemAlloc/managed/pool allocation or a mapped VMM range); nothing is copied.
CUresult copy_to_device(CUdeviceptr dst, const void* src, std::size_t n) {
  return initialized([&](Driver& d) {
    if (!d.current()) return CUDA_ERROR_INVALID_CONTEXT;
    if (n == 0) return CUDA_SUCCESS;
    if (!src || !d.owns_range(dst, n)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  });
}

}  // namespace

// [CH] cuCtxSynchronize: the current context; INVALID_CONTEXT without one.
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxSynchronize() {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!d.current()) return CUDA_ERROR_INVALID_CONTEXT;
    return d.synchronize();
  });
}

// [CH] cuCtxSynchronize_v2 (13000): the given context, or the current one for NULL.
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    auto* c = ctx ? reinterpret_cast<Context*>(ctx) : d.current();
    if (!c || !d.is_live(c)) return CUDA_ERROR_INVALID_CONTEXT;
    return d.synchronize();
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return stream_synchronize(hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return stream_synchronize(hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                                void** kernelParams, void** extra) {
  TESSERA_CUDA_SIM_COUNT();
  (void)sharedMemBytes;
  (void)kernelParams;
  (void)extra;
  return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                     unsigned int gridDimZ, unsigned int blockDimX,
                                                     unsigned int blockDimY, unsigned int blockDimZ,
                                                     unsigned int sharedMemBytes, CUstream hStream,
                                                     void** kernelParams, void** extra) {
  TESSERA_CUDA_SIM_COUNT();
  (void)sharedMemBytes;
  (void)kernelParams;
  (void)extra;
  return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream);
}

// The 2000 ABI: a 32-bit destination (a cuMemAlloc address) and count.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemcpyHtoD(unsigned int dstDevice, const void* srcHost, unsigned int ByteCount) {
  TESSERA_CUDA_SIM_COUNT();
  return copy_to_device(dstDevice, srcHost, ByteCount);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, std::size_t ByteCount) {
  TESSERA_CUDA_SIM_COUNT();
  return copy_to_device(dstDevice, srcHost, ByteCount);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost,
                                                      std::size_t ByteCount) {
  TESSERA_CUDA_SIM_COUNT();
  return copy_to_device(dstDevice, srcHost, ByteCount);
}

// The runtime's private tables cannot be simulated honestly: every request is
// CUDA_ERROR_NOT_SUPPORTED with *ppExportTable = NULL (sim; what CUDA 13's
// runtime asks for is recorded in the design document). Answers before cuInit.
TESSERA_CUDA_SIM_EXPORT CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  TESSERA_CUDA_SIM_COUNT();
  if (!ppExportTable || !pExportTableId) return CUDA_ERROR_INVALID_VALUE;
  *ppExportTable = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// A name counts if this library exports it as a driver function ("cu…"):
// looked up in this very object, so the version script is the only list.
TESSERA_CUDA_SIM_EXPORT CUresult tesseraCudaSimCalls(const char* exported_name, unsigned long long* count) {
  if (!exported_name || !count) return CUDA_ERROR_INVALID_VALUE;
  if (std::strncmp(exported_name, "cu", 2) != 0) return CUDA_ERROR_NOT_FOUND;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&tesseraCudaSimCalls), &self) == 0 || !self.dli_fname)
    return CUDA_ERROR_UNKNOWN;
  void* h = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return CUDA_ERROR_UNKNOWN;
  void* f = dlsym(h, exported_name);
  Dl_info where{};
  bool ours = f && dladdr(f, &where) != 0 && where.dli_fbase == self.dli_fbase;
  dlclose(h);
  if (!ours) return CUDA_ERROR_NOT_FOUND;
  *count = CallCounter::count_of(exported_name);
  return CUDA_SUCCESS;
}
