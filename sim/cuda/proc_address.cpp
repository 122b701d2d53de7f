// cuGetProcAddress, cuGetProcAddress_v2 and the error strings, by the rules of
// docs/design-memory-quotas.md §1 ([CH], "Driver Entry Point Access"):
// - the answer for a base name is its newest variant introduced at or before
//   cudaVersion; a cudaVersion above the driver's is CUDA_ERROR_INVALID_VALUE;
// - an unknown name, or a known one with no variant at or before cudaVersion,
//   is CUDA_SUCCESS with *pfn = NULL and status SYMBOL_NOT_FOUND or
//   VERSION_NOT_SUFFICIENT ([CH]: "will return CUDA_SUCCESS and set the
//   returned pfn to NULL"); symbolStatus may be NULL;
// - flags: DEFAULT and LEGACY_STREAM never give a per-thread (_ptsz) variant;
//   PER_THREAD_DEFAULT_STREAM gives it where the variant has one, else the
//   legacy function. No base name in this simulator has a _ptsz variant yet.
// Every variant of each base name is implemented from the oldest one listed
// on, so a newer request never gets an older ABI; cuCtxCreate's bare 2000 ABI
// is not, so cuCtxCreate below 3020 is VERSION_NOT_SUFFICIENT here.
// These calls work before cuInit (the runtime fetches cuInit through them).
#include <cstring>

#include "driver.hpp"

namespace {

struct Variant {
  const char* base;
  int version;  // the CUDA version that introduced this ABI ([CH] PFN_<name>_v<N>)
  void* legacy;
  void* ptsz;  // the per-thread default-stream variant, where one exists
};

template <class F>
void* fn(F* f) {
  return reinterpret_cast<void*>(f);
}

const Variant kVariants[] = {
    {"cuInit", 2000, fn(cuInit), nullptr},
    {"cuDriverGetVersion", 2020, fn(cuDriverGetVersion), nullptr},
    {"cuDeviceGetCount", 2000, fn(cuDeviceGetCount), nullptr},
    {"cuDeviceGet", 2000, fn(cuDeviceGet), nullptr},
    {"cuDeviceGetName", 2000, fn(cuDeviceGetName), nullptr},
    {"cuDeviceGetUuid", 9020, fn(cuDeviceGetUuid), nullptr},
    {"cuDeviceGetUuid", 11040, fn(cuDeviceGetUuid_v2), nullptr},
    {"cuDeviceTotalMem", 2000, fn(cuDeviceTotalMem), nullptr},
    {"cuDeviceTotalMem", 3020, fn(cuDeviceTotalMem_v2), nullptr},
    {"cuCtxCreate", 3020, fn(cuCtxCreate_v2), nullptr},
    {"cuCtxCreate", 11040, fn(cuCtxCreate_v3), nullptr},
    {"cuCtxCreate", 12050, fn(cuCtxCreate_v4), nullptr},
    {"cuCtxDestroy", 2000, fn(cuCtxDestroy), nullptr},
    {"cuCtxDestroy", 4000, fn(cuCtxDestroy_v2), nullptr},
    {"cuCtxSetCurrent", 4000, fn(cuCtxSetCurrent), nullptr},
    {"cuCtxGetCurrent", 4000, fn(cuCtxGetCurrent), nullptr},
    {"cuCtxGetDevice", 2000, fn(cuCtxGetDevice), nullptr},
    {"cuDevicePrimaryCtxRetain", 7000, fn(cuDevicePrimaryCtxRetain), nullptr},
    {"cuDevicePrimaryCtxRelease", 7000, fn(cuDevicePrimaryCtxRelease), nullptr},
    {"cuDevicePrimaryCtxRelease", 11000, fn(cuDevicePrimaryCtxRelease_v2), nullptr},
    {"cuMemGetInfo", 2000, fn(cuMemGetInfo), nullptr},
    {"cuMemGetInfo", 3020, fn(cuMemGetInfo_v2), nullptr},
    {"cuMemAlloc", 2000, fn(cuMemAlloc), nullptr},
    {"cuMemAlloc", 3020, fn(cuMemAlloc_v2), nullptr},
    {"cuMemFree", 2000, fn(cuMemFree), nullptr},
    {"cuMemFree", 3020, fn(cuMemFree_v2), nullptr},
    {"cuMemAllocPitch", 2000, fn(cuMemAllocPitch), nullptr},
    {"cuMemAllocPitch", 3020, fn(cuMemAllocPitch_v2), nullptr},
    {"cuGetErrorName", 6000, fn(cuGetErrorName), nullptr},
    {"cuGetErrorString", 6000, fn(cuGetErrorString), nullptr},
    {"cuGetProcAddress", 11030, fn(cuGetProcAddress), nullptr},
    {"cuGetProcAddress", 12000, fn(cuGetProcAddress_v2), nullptr},
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
  else *pfn = (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && best->ptsz) ? best->ptsz : best->legacy;
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
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
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
  return lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                     cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus) {
  return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** pStr) {
  return error_text(error, pStr, true);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** pStr) {
  return error_text(error, pStr, false);
}
