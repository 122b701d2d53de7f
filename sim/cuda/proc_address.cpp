// cuGetProcAddress, cuGetProcAddress_v2 and the error strings, by the rules of
// docs/design-memory-quotas.md §1 ([CH], "Driver Entry Point Access"):
// - the answer for a base name is its newest variant introduced at or before
//   cudaVersion; a cudaVersion above the driver's is CUDA_ERROR_INVALID_VALUE;
// - an unknown name, or a known one with no variant at or before cudaVersion,
//   is CUDA_SUCCESS with *pfn = NULL and status SYMBOL_NOT_FOUND or
//   VERSION_NOT_SUFFICIENT ([CH]: "will return CUDA_SUCCESS and set the
//   returned pfn to NULL"); symbolStatus may be NULL;
// - flags: DEFAULT and LEGACY_STREAM never give a per-thread (_ptsz/_ptds)
//   variant; PER_THREAD_DEFAULT_STREAM gives it where the variant has one and
//   cudaVersion is at or after the per-thread variant's own introduction
//   ([CH] PFN_<name>_v<N>_ptsz: 7000 for the older calls, with the call itself
//   for the stream-ordered allocator), else the legacy function.
// Every variant of each base name is implemented, from the bare (2000-era)
// ABI a real libcuda.so.1 still exports on, so a request never gets another
// ABI than the one its version names; below a name's first variant the answer
// is VERSION_NOT_SUFFICIENT.
// These calls work before cuInit (the runtime fetches cuInit through them).
#include <cstring>

#include "entry.hpp"

namespace {

struct Variant {
  const char* base;
  int version;  // the CUDA version that introduced this ABI ([CH] PFN_<name>_v<N>)
  void* legacy;
  void* ptsz;  // the per-thread default-stream variant, where one exists
  int ptsz_version;  // the CUDA version that introduced it ([CH] PFN_<name>_v<N>_ptsz / _ptds)
};

template <class F>
void* fn(F* f) {
  return reinterpret_cast<void*>(f);
}

const Variant kVariants[] = {
    {"cuInit", 2000, fn(cuInit), nullptr, 0},
    {"cuDriverGetVersion", 2020, fn(cuDriverGetVersion), nullptr, 0},
    {"cuDeviceGetCount", 2000, fn(cuDeviceGetCount), nullptr, 0},
    {"cuDeviceGet", 2000, fn(cuDeviceGet), nullptr, 0},
    {"cuDeviceGetName", 2000, fn(cuDeviceGetName), nullptr, 0},
    {"cuDeviceGetAttribute", 2000, fn(cuDeviceGetAttribute), nullptr, 0},
    {"cuDeviceGetUuid", 9020, fn(cuDeviceGetUuid), nullptr, 0},
    {"cuDeviceGetUuid", 11040, fn(cuDeviceGetUuid_v2), nullptr, 0},
    {"cuDeviceTotalMem", 2000, fn(cuDeviceTotalMem), nullptr, 0},
    {"cuDeviceTotalMem", 3020, fn(cuDeviceTotalMem_v2), nullptr, 0},
    {"cuCtxCreate", 2000, fn(cuCtxCreate), nullptr, 0},
    {"cuCtxCreate", 3020, fn(cuCtxCreate_v2), nullptr, 0},
    {"cuCtxCreate", 11040, fn(cuCtxCreate_v3), nullptr, 0},
    {"cuCtxCreate", 12050, fn(cuCtxCreate_v4), nullptr, 0},
    {"cuCtxDestroy", 2000, fn(cuCtxDestroy), nullptr, 0},
    {"cuCtxDestroy", 4000, fn(cuCtxDestroy_v2), nullptr, 0},
    {"cuCtxSetCurrent", 4000, fn(cuCtxSetCurrent), nullptr, 0},
    {"cuCtxGetCurrent", 4000, fn(cuCtxGetCurrent), nullptr, 0},
    {"cuCtxGetDevice", 2000, fn(cuCtxGetDevice), nullptr, 0},
    {"cuCtxGetDevice", 13000, fn(cuCtxGetDevice_v2), nullptr, 0},
    {"cuDevicePrimaryCtxRetain", 7000, fn(cuDevicePrimaryCtxRetain), nullptr, 0},
    {"cuDevicePrimaryCtxRelease", 7000, fn(cuDevicePrimaryCtxRelease), nullptr, 0},
    {"cuDevicePrimaryCtxRelease", 11000, fn(cuDevicePrimaryCtxRelease_v2), nullptr, 0},
    {"cuDevicePrimaryCtxGetState", 7000, fn(cuDevicePrimaryCtxGetState), nullptr, 0},
    {"cuDevicePrimaryCtxReset", 7000, fn(cuDevicePrimaryCtxReset), nullptr, 0},
    {"cuDevicePrimaryCtxReset", 11000, fn(cuDevicePrimaryCtxReset_v2), nullptr, 0},
    {"cuCtxSynchronize", 2000, fn(cuCtxSynchronize), nullptr, 0},
    {"cuCtxSynchronize", 13000, fn(cuCtxSynchronize_v2), nullptr, 0},
    {"cuStreamSynchronize", 2000, fn(cuStreamSynchronize), fn(cuStreamSynchronize_ptsz), 7000},
    {"cuLaunchKernel", 4000, fn(cuLaunchKernel), fn(cuLaunchKernel_ptsz), 7000},
    {"cuMemcpyHtoD", 2000, fn(cuMemcpyHtoD), nullptr, 0},  // no per-thread twin of the 2000 ABI
    {"cuMemcpyHtoD", 3020, fn(cuMemcpyHtoD_v2), fn(cuMemcpyHtoD_v2_ptds), 7000},
    {"cuGetExportTable", 3000, fn(cuGetExportTable), nullptr, 0},
    {"cuMemGetInfo", 2000, fn(cuMemGetInfo), nullptr, 0},
    {"cuMemGetInfo", 3020, fn(cuMemGetInfo_v2), nullptr, 0},
    {"cuMemAlloc", 2000, fn(cuMemAlloc), nullptr, 0},
    {"cuMemAlloc", 3020, fn(cuMemAlloc_v2), nullptr, 0},
    {"cuMemFree", 2000, fn(cuMemFree), nullptr, 0},
    {"cuMemFree", 3020, fn(cuMemFree_v2), nullptr, 0},
    {"cuMemAllocPitch", 2000, fn(cuMemAllocPitch), nullptr, 0},
    {"cuMemAllocPitch", 3020, fn(cuMemAllocPitch_v2), nullptr, 0},
    {"cuMemAllocManaged", 6000, fn(cuMemAllocManaged), nullptr, 0},
    {"cuArrayCreate", 2000, fn(cuArrayCreate), nullptr, 0},
    {"cuArrayCreate", 3020, fn(cuArrayCreate_v2), nullptr, 0},
    {"cuArray3DCreate", 2000, fn(cuArray3DCreate), nullptr, 0},
    {"cuArray3DCreate", 3020, fn(cuArray3DCreate_v2), nullptr, 0},
    {"cuArrayDestroy", 2000, fn(cuArrayDestroy), nullptr, 0},
    {"cuMipmappedArrayCreate", 5000, fn(cuMipmappedArrayCreate), nullptr, 0},
    {"cuMipmappedArrayDestroy", 5000, fn(cuMipmappedArrayDestroy), nullptr, 0},
    {"cuMemGetAllocationGranularity", 10020, fn(cuMemGetAllocationGranularity), nullptr, 0},
    {"cuMemCreate", 10020, fn(cuMemCreate), nullptr, 0},
    {"cuMemRelease", 10020, fn(cuMemRelease), nullptr, 0},
    {"cuMemAddressReserve", 10020, fn(cuMemAddressReserve), nullptr, 0},
    {"cuMemAddressFree", 10020, fn(cuMemAddressFree), nullptr, 0},
    {"cuMemMap", 10020, fn(cuMemMap), nullptr, 0},
    {"cuMemUnmap", 10020, fn(cuMemUnmap), nullptr, 0},
    {"cuMemSetAccess", 10020, fn(cuMemSetAccess), nullptr, 0},
    {"cuMemRetainAllocationHandle", 11000, fn(cuMemRetainAllocationHandle), nullptr, 0},
    {"cuMemExportToShareableHandle", 10020, fn(cuMemExportToShareableHandle), nullptr, 0},
    {"cuMemImportFromShareableHandle", 10020, fn(cuMemImportFromShareableHandle), nullptr, 0},
    {"cuDeviceGetDefaultMemPool", 11020, fn(cuDeviceGetDefaultMemPool), nullptr, 0},
    {"cuDeviceGetMemPool", 11020, fn(cuDeviceGetMemPool), nullptr, 0},
    {"cuDeviceSetMemPool", 11020, fn(cuDeviceSetMemPool), nullptr, 0},
    {"cuMemGetDefaultMemPool", 13000, fn(cuMemGetDefaultMemPool), nullptr, 0},
    {"cuMemGetMemPool", 13000, fn(cuMemGetMemPool), nullptr, 0},
    {"cuMemSetMemPool", 13000, fn(cuMemSetMemPool), nullptr, 0},
    {"cuMemPoolCreate", 11020, fn(cuMemPoolCreate), nullptr, 0},
    {"cuMemPoolDestroy", 11020, fn(cuMemPoolDestroy), nullptr, 0},
    {"cuMemPoolTrimTo", 11020, fn(cuMemPoolTrimTo), nullptr, 0},
    {"cuMemPoolSetAttribute", 11020, fn(cuMemPoolSetAttribute), nullptr, 0},
    {"cuMemPoolGetAttribute", 11020, fn(cuMemPoolGetAttribute), nullptr, 0},
    {"cuMemAllocAsync", 11020, fn(cuMemAllocAsync), fn(cuMemAllocAsync_ptsz), 11020},
    {"cuMemAllocFromPoolAsync", 11020, fn(cuMemAllocFromPoolAsync), fn(cuMemAllocFromPoolAsync_ptsz), 11020},
    {"cuMemFreeAsync", 11020, fn(cuMemFreeAsync), fn(cuMemFreeAsync_ptsz), 11020},
    {"cuCtxPushCurrent", 2000, fn(cuCtxPushCurrent), nullptr, 0},
    {"cuCtxPushCurrent", 4000, fn(cuCtxPushCurrent_v2), nullptr, 0},
    {"cuCtxPopCurrent", 2000, fn(cuCtxPopCurrent), nullptr, 0},
    {"cuCtxPopCurrent", 4000, fn(cuCtxPopCurrent_v2), nullptr, 0},
    {"cuModuleLoad", 2000, fn(cuModuleLoad), nullptr, 0},
    {"cuModuleLoadData", 2000, fn(cuModuleLoadData), nullptr, 0},
    {"cuModuleLoadDataEx", 2010, fn(cuModuleLoadDataEx), nullptr, 0},
    {"cuModuleLoadFatBinary", 2000, fn(cuModuleLoadFatBinary), nullptr, 0},
    {"cuModuleUnload", 2000, fn(cuModuleUnload), nullptr, 0},
    {"cuLibraryLoadData", 12000, fn(cuLibraryLoadData), nullptr, 0},
    {"cuLibraryLoadFromFile", 12000, fn(cuLibraryLoadFromFile), nullptr, 0},
    {"cuLibraryUnload", 12000, fn(cuLibraryUnload), nullptr, 0},
    {"cuLibraryGetKernel", 12000, fn(cuLibraryGetKernel), nullptr, 0},
    {"cuStreamCreate", 2000, fn(cuStreamCreate), nullptr, 0},
    {"cuStreamDestroy", 2000, fn(cuStreamDestroy), nullptr, 0},
    {"cuStreamDestroy", 4000, fn(cuStreamDestroy_v2), nullptr, 0},
    {"cuStreamGetCtx", 9020, fn(cuStreamGetCtx), nullptr, 0},
    {"cuStreamGetDevice", 12080, fn(cuStreamGetDevice), nullptr, 0},
    {"cuStreamBeginCapture", 10000, fn(cuStreamBeginCapture), nullptr, 0},
    {"cuStreamBeginCapture", 10010, fn(cuStreamBeginCapture_v2), nullptr, 0},
    {"cuStreamEndCapture", 10000, fn(cuStreamEndCapture), nullptr, 0},
    {"cuStreamIsCapturing", 10000, fn(cuStreamIsCapturing), nullptr, 0},
    {"cuGraphCreate", 10000, fn(cuGraphCreate), nullptr, 0},
    {"cuGraphDestroy", 10000, fn(cuGraphDestroy), nullptr, 0},
    {"cuGraphAddMemAllocNode", 11040, fn(cuGraphAddMemAllocNode), nullptr, 0},
    {"cuGraphAddMemFreeNode", 11040, fn(cuGraphAddMemFreeNode), nullptr, 0},
    {"cuGraphGetNodes", 10000, fn(cuGraphGetNodes), nullptr, 0},
    {"cuGraphNodeGetType", 10000, fn(cuGraphNodeGetType), nullptr, 0},
    {"cuGraphMemAllocNodeGetParams", 11040, fn(cuGraphMemAllocNodeGetParams), nullptr, 0},
    {"cuGraphInstantiate", 10000, fn(cuGraphInstantiate), nullptr, 0},
    {"cuGraphInstantiate", 11000, fn(cuGraphInstantiate_v2), nullptr, 0},
    {"cuGraphInstantiateWithFlags", 11040, fn(cuGraphInstantiateWithFlags), nullptr, 0},
    {"cuGraphInstantiateWithParams", 12000, fn(cuGraphInstantiateWithParams), fn(cuGraphInstantiateWithParams_ptsz),
     12000},
    {"cuGraphUpload", 11010, fn(cuGraphUpload), fn(cuGraphUpload_ptsz), 11010},
    {"cuGraphLaunch", 10000, fn(cuGraphLaunch), fn(cuGraphLaunch_ptsz), 10000},
    {"cuGraphExecDestroy", 10000, fn(cuGraphExecDestroy), nullptr, 0},
    {"cuDeviceGetGraphMemAttribute", 11040, fn(cuDeviceGetGraphMemAttribute), nullptr, 0},
    {"cuDeviceGraphMemTrim", 11040, fn(cuDeviceGraphMemTrim), nullptr, 0},
    {"cuGetErrorName", 6000, fn(cuGetErrorName), nullptr, 0},
    {"cuGetErrorString", 6000, fn(cuGetErrorString), nullptr, 0},
    {"cuGetProcAddress", 11030, fn(cuGetProcAddress), nullptr, 0},
    {"cuGetProcAddress", 12000, fn(cuGetProcAddress_v2), nullptr, 0},
};

CUresult lookup(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                CUdriverProcAddressQueryResult* symbolStatus) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (cudaVersion > kSimDriverVersion) return CUDA_ERROR_INVALID_VALUE;  // [CH]
  if (flags != CU_GET_PROC_ADDRESS_DEFAULT && flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
      flags != CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
    return CUDA_ERROR_INVALID_VALUE;  // sim: only the three documented flag values
  const Variant* best = nullptr;
  bool known = false;
  for (const auto& v : kVariants) {
    if (std::strcmp(v.base, symbol) != 0) continue;
    known = true;
    if (v.version <= cudaVersion && (!best || v.version > best->version)) best = &v;
  }
  *pfn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  if (!known) status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  else if (!best) status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  else if (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && best->ptsz && cudaVersion >= best->ptsz_version)
    *pfn = best->ptsz;
  else *pfn = best->legacy;
  if (symbolStatus) *symbolStatus = status;
  return CUDA_SUCCESS;
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;  // sim's own wording
};

const ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted in this state"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

// [CH] an unrecognised code is CUDA_ERROR_INVALID_VALUE with *pStr = NULL.
CUresult error_text(CUresult error, const char** pStr, bool name) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& e : kErrors)
    if (e.code == error) {
      *pStr = name ? e.name : e.text;
      return CUDA_SUCCESS;
    }
  *pStr = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

TESSERA_CUDA_SIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                  cuuint64_t flags) {
  TESSERA_CUDA_SIM_COUNT();
  return lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                     cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus) {
  TESSERA_CUDA_SIM_COUNT();
  return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** pStr) {
  TESSERA_CUDA_SIM_COUNT();
  return error_text(error, pStr, true);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** pStr) {
  TESSERA_CUDA_SIM_COUNT();
  return error_text(error, pStr, false);
}
