// The CUDA driver and NVML ABI the quota library wraps, declared here from the
// facts in docs/design-memory-quotas.md §1 ([CH]: NVIDIA's cuda.h of CUDA 13.0)
// and docs/nvml-abi.md ([N]); no NVIDIA header is included or copied. The
// library's exported wrappers are defined against these prototypes, so a
// signature that drifts fails to compile. Independent of sim/cuda on purpose:
// the simulator checks this code, it does not share it.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,  // [CH]; the runtime's cudaErrorMemoryAllocation is 2 too
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_PERMITTED = 800,  // [CH] "the attempted operation is not permitted"
};

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUarray_st* CUarray;
typedef struct CUmipmappedArray_st* CUmipmappedArray;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUmod_st* CUmodule;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUexecAffinityParam_st CUexecAffinityParam;  // cuCtxCreate_v3's parameters (never read)
typedef struct CUctxCreateParams_st CUctxCreateParams;      // cuCtxCreate_v4's parameters (never read)
typedef int CUjit_option;
typedef struct CUlib_st* CUlibrary;
typedef int CUlibraryOption;  // [CH] an enum; the options are passed through, never read
typedef int CUmemAllocationHandleType;
inline constexpr CUmemAllocationHandleType CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1;  // [CH]
typedef std::uint64_t cuuint64_t;
struct CUuuid {
  unsigned char bytes[16];
};

enum : cuuint64_t {  // cuGetProcAddress flags [CH]
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
};
typedef int CUdriverProcAddressQueryResult;  // SUCCESS 0, SYMBOL_NOT_FOUND 1, VERSION_NOT_SUFFICIENT 2 [CH]

// [CH] CUmemLocation {CUmemLocationType type; int id;}; CU_MEM_LOCATION_TYPE_DEVICE = 1.
inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
struct CUmemLocation {
  int type;
  int id;
};
// [CH] CUmemAllocationProp: type, requestedHandleTypes, location, then fields
// the library never reads (win32 metadata pointer, allocFlags).
struct CUmemAllocationProp {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  unsigned char allocFlags[8];
};
// [CH] CUmemPoolProps: allocType, handleTypes, location, then fields never
// read (88 bytes in all).
struct CUmemPoolProps {
  int allocType;
  int handleTypes;
  CUmemLocation location;
  unsigned char unread[72];
};
// [CH] CUmemPool_attribute: RELEASE_THRESHOLD 4, RESERVED_MEM_CURRENT 5, USED_MEM_CURRENT 7.
inline constexpr int CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5;
inline constexpr int CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7;

// [CH] CUDA_MEM_ALLOC_NODE_PARAMS (v1): the pool's properties (its location is
// the device), access descriptors, the size, and the address CUDA chose.
struct CUDA_MEM_ALLOC_NODE_PARAMS {
  CUmemPoolProps poolProps;
  const void* accessDescs;
  std::size_t accessDescCount;
  std::size_t bytesize;
  CUdeviceptr dptr;
};
// [CH] CUgraphNodeType: MEM_ALLOC 10; CUgraphMem_attribute: USED_MEM_CURRENT 0, RESERVED_MEM_CURRENT 2.
inline constexpr int CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10;
inline constexpr int CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0;
inline constexpr int CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2;
// [CH] CUDA_GRAPH_INSTANTIATE_PARAMS and its UPLOAD flag (2): the graph's
// memory is mapped on hUploadStream at instantiation.
struct CUDA_GRAPH_INSTANTIATE_PARAMS {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  int result_out;
};
inline constexpr cuuint64_t CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2;

// [CH] array descriptors; the bare (2000) ABIs use 32-bit sizes.
struct CUDA_ARRAY_DESCRIPTOR {
  std::size_t Width, Height;
  int Format;
  unsigned int NumChannels;
};
struct CUDA_ARRAY_DESCRIPTOR_v1 {
  unsigned int Width, Height;
  int Format;
  unsigned int NumChannels;
};
struct CUDA_ARRAY3D_DESCRIPTOR {
  std::size_t Width, Height, Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
};
struct CUDA_ARRAY3D_DESCRIPTOR_v1 {
  unsigned int Width, Height, Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
};
inline constexpr unsigned int CUDA_ARRAY3D_LAYERED = 0x01;           // [CH]
inline constexpr unsigned int CUDA_ARRAY3D_CUBEMAP = 0x04;           // [CH]
inline constexpr unsigned int CUDA_ARRAY3D_SPARSE = 0x40;            // [CH]
inline constexpr unsigned int CUDA_ARRAY3D_DEFERRED_MAPPING = 0x80;  // [CH]

// [N] NVML memory information.
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlReturn_t;  // NVML_SUCCESS 0
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total, reserved, free, used;
};

// The wrapped entry points, exported under the driver's names (a program
// linked against libcuda binds them through LD_PRELOAD) and handed out by the
// dlsym and cuGetProcAddress wrappers.
CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytesize);
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, std::size_t bytesize);
CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pPitch, unsigned int WidthInBytes, unsigned int Height,
                         unsigned int ElementSizeBytes);
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, std::size_t* pPitch, std::size_t WidthInBytes, std::size_t Height,
                            unsigned int ElementSizeBytes);
CUresult cuMemAllocManaged(CUdeviceptr* dptr, std::size_t bytesize, unsigned int flags);
CUresult cuMemFree(unsigned int dptr);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo(unsigned int* free, unsigned int* total);
CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total);
CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev);
CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags,
                        CUdevice dev);
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, std::size_t size);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr);
CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType);
CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* pAllocateArray);
CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray);
CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* pAllocateArray);
CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray);
CUresult cuArrayDestroy(CUarray hArray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                unsigned int numMipmapLevels);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray);
CUresult cuMemAllocAsync(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, std::size_t minBytesToKeep);
CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);
CUresult cuMemSetMemPool(CUmemLocation* location, int type, CUmemoryPool pool);  // [CH] 13.0; type: CUmemAllocationType
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuModuleLoad(CUmodule* module, const char* fname);
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                            void** optionValues);
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions, void** jitOptionsValues,
                           unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,
                           unsigned int numLibraryOptions);
CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                               void** libraryOptionValues, unsigned int numLibraryOptions);
CUresult cuLibraryUnload(CUlibrary library);
CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                            std::size_t bufferSize);
CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                               std::size_t bufferSize);
CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags);
CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams);
CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);
CUresult cuDeviceGraphMemTrim(CUdevice device);
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);
}

static_assert(sizeof(CUmemPoolProps) == 88 && sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120);
