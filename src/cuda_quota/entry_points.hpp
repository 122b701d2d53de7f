// The entry points the quota library wraps: docs/design-memory-quotas.md §1's
// table, one row per exported variant ([CH] for the versions, [CS] for the
// exported names). A row is (exported name, base name, the CUDA version that
// introduced this ABI, whether it is the per-thread default-stream twin).
// NVML rows have version 0: they are reached by dlsym only.
#pragma once

#include <atomic>

#include "cuda_quota/cuda_abi.hpp"

#define TESSERA_QUOTA_ENTRY_POINTS(X)                              \
  X(cuMemAlloc, "cuMemAlloc", 2000, false)                         \
  X(cuMemAlloc_v2, "cuMemAlloc", 3020, false)                      \
  X(cuMemAllocPitch, "cuMemAllocPitch", 2000, false)               \
  X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, false)            \
  X(cuMemAllocManaged, "cuMemAllocManaged", 6000, false)           \
  X(cuMemFree, "cuMemFree", 2000, false)                           \
  X(cuMemFree_v2, "cuMemFree", 3020, false)                        \
  X(cuMemGetInfo, "cuMemGetInfo", 2000, false)                     \
  X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, false)                  \
  X(cuDeviceTotalMem, "cuDeviceTotalMem", 2000, false)             \
  X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, false)          \
  X(cuCtxDestroy, "cuCtxDestroy", 2000, false)                     \
  X(cuCtxDestroy_v2, "cuCtxDestroy", 4000, false)                  \
  X(cuCtxCreate, "cuCtxCreate", 2000, false)                       \
  X(cuCtxCreate_v2, "cuCtxCreate", 3020, false)                    \
  X(cuCtxCreate_v3, "cuCtxCreate", 11040, false)                   \
  X(cuCtxCreate_v4, "cuCtxCreate", 12050, false)                   \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, false) \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 7000, false) \
  X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, false) \
  X(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 7000, false) \
  X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, false) \
  X(cuMemCreate, "cuMemCreate", 10020, false)                      \
  X(cuMemRelease, "cuMemRelease", 10020, false)                    \
  X(cuMemMap, "cuMemMap", 10020, false)                            \
  X(cuMemUnmap, "cuMemUnmap", 10020, false)                        \
  X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", 11000, false) \
  X(cuMemExportToShareableHandle, "cuMemExportToShareableHandle", 10020, false) \
  X(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020, false) \
  X(cuArrayCreate, "cuArrayCreate", 2000, false)                   \
  X(cuArrayCreate_v2, "cuArrayCreate", 3020, false)                \
  X(cuArray3DCreate, "cuArray3DCreate", 2000, false)               \
  X(cuArray3DCreate_v2, "cuArray3DCreate", 3020, false)            \
  X(cuArrayDestroy, "cuArrayDestroy", 2000, false)                 \
  X(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, false) \
  X(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", 5000, false) \
  X(cuMemAllocAsync, "cuMemAllocAsync", 11020, false)              \
  X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, true)          \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, false) \
  X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, true) \
  X(cuMemFreeAsync, "cuMemFreeAsync", 11020, false)                \
  X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, true)            \
  X(cuMemPoolCreate, "cuMemPoolCreate", 11020, false)              \
  X(cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, false)              \
  X(cuDeviceSetMemPool, "cuDeviceSetMemPool", 11020, false)        \
  X(cuMemSetMemPool, "cuMemSetMemPool", 13000, false)              \
  X(cuMemPoolDestroy, "cuMemPoolDestroy", 11020, false)            \
  X(cuModuleLoad, "cuModuleLoad", 2000, false)                     \
  X(cuModuleLoadData, "cuModuleLoadData", 2000, false)             \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", 2010, false)         \
  X(cuModuleLoadFatBinary, "cuModuleLoadFatBinary", 2000, false)   \
  X(cuModuleUnload, "cuModuleUnload", 2000, false)                 \
  X(cuLibraryLoadData, "cuLibraryLoadData", 12000, false)          \
  X(cuLibraryLoadFromFile, "cuLibraryLoadFromFile", 12000, false)  \
  X(cuLibraryUnload, "cuLibraryUnload", 12000, false)              \
  X(cuGraphInstantiate, "cuGraphInstantiate", 10000, false)        \
  X(cuGraphInstantiate_v2, "cuGraphInstantiate", 11000, false)     \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, false) \
  X(cuGraphInstantiateWithParams, "cuGraphInstantiateWithParams", 12000, false) \
  X(cuGraphInstantiateWithParams_ptsz, "cuGraphInstantiateWithParams", 12000, true) \
  X(cuGraphUpload, "cuGraphUpload", 11010, false)                  \
  X(cuGraphUpload_ptsz, "cuGraphUpload", 11010, true)              \
  X(cuGraphLaunch, "cuGraphLaunch", 10000, false)                  \
  X(cuGraphLaunch_ptsz, "cuGraphLaunch", 10000, true)              \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", 10000, false)        \
  X(cuDeviceGraphMemTrim, "cuDeviceGraphMemTrim", 11040, false)    \
  X(cuGetProcAddress, "cuGetProcAddress", 11030, false)            \
  X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, false)         \
  X(nvmlDeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", 0, false)  \
  X(nvmlDeviceGetMemoryInfo_v2, "nvmlDeviceGetMemoryInfo", 0, false)

namespace tessera::quota {

enum class Fn : int {
#define TESSERA_QUOTA_ENUM(name, base, version, ptsz) name,
  TESSERA_QUOTA_ENTRY_POINTS(TESSERA_QUOTA_ENUM)
#undef TESSERA_QUOTA_ENUM
      count
};

struct Row {
  const char* exported;
  const char* base;
  int version;
  bool ptsz;
  void* wrapper;
};

extern const Row kRows[static_cast<int>(Fn::count)];

// The driver's (or NVML's) own function for a row: the pointer the driver
// handed out when the row's wrapper replaced it, else its exported symbol.
void* real(Fn f);

// The wrapper for (base name, cudaVersion, flags) by §1's rules; Fn::count when
// no row applies.
Fn select(const char* base, int cuda_version, cuuint64_t flags);

}  // namespace tessera::quota

// `REAL(cuMemAlloc_v2)` is the driver's cuMemAlloc_v2, typed as ours.
#define REAL(name) (reinterpret_cast<decltype(&::name)>(::tessera::quota::real(::tessera::quota::Fn::name)))
