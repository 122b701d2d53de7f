// The CUDA driver ABI this simulator implements, declared here from the facts
// in docs/design-memory-quotas.md §1 and from NVIDIA's cuda.h and
// cudaTypedefs.h of CUDA 13.0 (tag [CH]: prototypes, enum values and struct
// layouts, each written out here); no NVIDIA header is included or copied. Every definition in exports.cpp must match its prototype here, so a
// signature that drifts fails to compile.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Result codes ([CH] `cudaError_enum`): only those the simulator returns or names.
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,  // design §1: 2, as the runtime's cudaErrorMemoryAllocation
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

typedef int CUdevice;                   // a device ordinal
typedef unsigned long long CUdeviceptr;  // design §1: CUdeviceptr is unsigned long long
typedef struct CUctx_st* CUcontext;      // opaque
typedef struct CUexecAffinityParam_st CUexecAffinityParam;  // cuCtxCreate_v3's parameters (opaque here)
typedef struct CUctxCreateParams_st CUctxCreateParams;      // cuCtxCreate_v4's parameters (opaque here)
struct CUuuid {
  char bytes[16];
};
typedef std::uint64_t cuuint64_t;
typedef struct CUstream_st* CUstream;                  // opaque
typedef struct CUfunc_st* CUfunction;                  // opaque
typedef struct CUarray_st* CUarray;                    // opaque
typedef struct CUmipmappedArray_st* CUmipmappedArray;  // opaque
typedef struct CUmemPoolHandle_st* CUmemoryPool;       // opaque
typedef unsigned long long CUmemGenericAllocationHandle;  // [CH] CUmemGenericAllocationHandle_v1

// [CH] the two special stream handles besides NULL (0).
#define TESSERA_CU_STREAM_LEGACY (reinterpret_cast<CUstream>(0x1))
#define TESSERA_CU_STREAM_PER_THREAD (reinterpret_cast<CUstream>(0x2))

// [CH] CUmemAttach_flags: cuMemAllocManaged takes GLOBAL or HOST.
enum : unsigned int {
  CU_MEM_ATTACH_GLOBAL = 0x1,
  CU_MEM_ATTACH_HOST = 0x2,
  CU_MEM_ATTACH_SINGLE = 0x4,
};

// [CH] CUarray_format: the eight plain formats (the only ones whose element
// size the simulator models; see arrays in exports_array.cpp).
enum CUarray_format : int {
  CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  CU_AD_FORMAT_SIGNED_INT8 = 0x08,
  CU_AD_FORMAT_SIGNED_INT16 = 0x09,
  CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
  CU_AD_FORMAT_HALF = 0x10,
  CU_AD_FORMAT_FLOAT = 0x20,
  CU_AD_FORMAT_NV12 = 0xb0,  // named so that tests can show an unmodelled format
};

// [CH] CUDA_ARRAY3D_* flags.
enum : unsigned int {
  CUDA_ARRAY3D_LAYERED = 0x01,
  CUDA_ARRAY3D_SURFACE_LDST = 0x02,
  CUDA_ARRAY3D_CUBEMAP = 0x04,
  CUDA_ARRAY3D_TEXTURE_GATHER = 0x08,
  CUDA_ARRAY3D_SPARSE = 0x40,
  CUDA_ARRAY3D_DEFERRED_MAPPING = 0x80,
};

// [CH] array descriptors: the current (_v2, size_t) layouts and the 2000-era
// ones with unsigned int sizes that the bare cuArrayCreate/cuArray3DCreate take.
struct CUDA_ARRAY_DESCRIPTOR {
  std::size_t Width;
  std::size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
};
struct CUDA_ARRAY_DESCRIPTOR_v1 {
  unsigned int Width;
  unsigned int Height;
  CUarray_format Format;
  unsigned int NumChannels;
};
struct CUDA_ARRAY3D_DESCRIPTOR {
  std::size_t Width;
  std::size_t Height;
  std::size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
};
struct CUDA_ARRAY3D_DESCRIPTOR_v1 {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

// [CH] virtual memory management and pool types.
enum CUmemLocationType : int {
  CU_MEM_LOCATION_TYPE_INVALID = 0x0,
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
  CU_MEM_LOCATION_TYPE_HOST = 0x2,
  CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3,
  CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4,
};
enum CUmemAllocationType : int {
  CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
  CU_MEM_ALLOCATION_TYPE_MANAGED = 0x2,
};
enum CUmemAllocationHandleType : int {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
};
enum CUmemAllocationGranularity_flags : int {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
};
struct CUmemLocation {
  CUmemLocationType type;
  int id;
};
struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemPoolProps {
  CUmemAllocationType allocType;
  CUmemAllocationHandleType handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  std::size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};
enum CUmemPool_attribute : int {
  CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};

// cuGetProcAddress's flags and symbolStatus values (design §1, [CH]).
enum : cuuint64_t {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
};
enum CUdriverProcAddressQueryResult : int {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

// The entry points, with the CUDA version that introduced each ABI ([CH]
// PFN_<name>_v<N>). Bare 2000-era names of memory calls take 32-bit sizes.
CUresult cuInit(unsigned int flags);                                    // 2000
CUresult cuDriverGetVersion(int* driverVersion);                        // 2020
CUresult cuDeviceGetCount(int* count);                                  // 2000
CUresult cuDeviceGet(CUdevice* device, int ordinal);                    // 2000
CUresult cuDeviceGetName(char* name, int len, CUdevice dev);            // 2000
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);                   // 9020
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev);                // 11040
CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev);           // 2000
CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev);         // 3020
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev);  // 3020
CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags,
                        CUdevice dev);  // 11040
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags,
                        CUdevice dev);                                  // 12050
CUresult cuCtxDestroy(CUcontext ctx);                                   // 2000
CUresult cuCtxDestroy_v2(CUcontext ctx);                                // 4000
CUresult cuCtxSetCurrent(CUcontext ctx);                                // 4000
CUresult cuCtxGetCurrent(CUcontext* pctx);                              // 4000
CUresult cuCtxGetDevice(CUdevice* device);                              // 2000
CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev);       // 7000
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);                       // 7000
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);                    // 11000
CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active);  // 7000
CUresult cuDevicePrimaryCtxReset(CUdevice dev);                         // 7000
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);                      // 11000
CUresult cuCtxSynchronize();                                            // 2000
CUresult cuCtxSynchronize_v2(CUcontext ctx);                            // 13000
CUresult cuStreamSynchronize(CUstream hStream);                         // 2000
CUresult cuStreamSynchronize_ptsz(CUstream hStream);                    // 7000
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra);  // 4000
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                             unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                             unsigned int sharedMemBytes, CUstream hStream, void** kernelParams,
                             void** extra);  // 7000
CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, std::size_t ByteCount);       // 3020
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost, std::size_t ByteCount);  // 7000
CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId);              // 3000
CUresult cuMemGetInfo(unsigned int* free, unsigned int* total);         // 2000
CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total);        // 3020
CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytesize);         // 2000
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, std::size_t bytesize);        // 3020
CUresult cuMemFree(unsigned int dptr);                                  // 2000
CUresult cuMemFree_v2(CUdeviceptr dptr);                                // 3020
CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pPitch, unsigned int WidthInBytes, unsigned int Height,
                         unsigned int ElementSizeBytes);  // 2000
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, std::size_t* pPitch, std::size_t WidthInBytes, std::size_t Height,
                            unsigned int ElementSizeBytes);             // 3020
CUresult cuMemAllocManaged(CUdeviceptr* dptr, std::size_t bytesize, unsigned int flags);  // 6000

CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* pAllocateArray);        // 2000
CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray);        // 3020
CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* pAllocateArray);    // 2000
CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray);    // 3020
CUresult cuArrayDestroy(CUarray hArray);                                                         // 2000
CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                unsigned int numMipmapLevels);                                   // 5000
CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray);                              // 5000

CUresult cuMemGetAllocationGranularity(std::size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option);  // 10020
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags);                                   // 10020
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);                       // 10020
CUresult cuMemAddressReserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr addr,
                             unsigned long long flags);                           // 10020
CUresult cuMemAddressFree(CUdeviceptr ptr, std::size_t size);                     // 10020
CUresult cuMemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags);                                      // 10020
CUresult cuMemUnmap(CUdeviceptr ptr, std::size_t size);                           // 10020

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev);         // 11020
CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev);                    // 11020
CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);                     // 11020
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps);    // 11020
CUresult cuMemPoolDestroy(CUmemoryPool pool);                                     // 11020
CUresult cuMemPoolTrimTo(CUmemoryPool pool, std::size_t minBytesToKeep);          // 11020
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value);  // 11020
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value);  // 11020
CUresult cuMemAllocAsync(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream);       // 11020
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream);  // 11020
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream);  // 11020
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream);                   // 11020
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);               // 11020
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);          // 11020
CUresult cuGetErrorName(CUresult error, const char** pStr);             // 6000
CUresult cuGetErrorString(CUresult error, const char** pStr);           // 6000
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);  // 11030
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus);  // 12000

// The simulator's control calls (not driver entry points; never counted).
// tesseraCudaSimUsage: this process's bytes on device `ordinal`, every
// process's bytes (those sharing TESSERA_SIM_CUDA_DIR, live ones only) and the
// high-water mark of the latter. Any output may be NULL. Needs cuInit.
CUresult tesseraCudaSimUsage(int ordinal, unsigned long long* process_bytes, unsigned long long* device_bytes,
                             unsigned long long* device_peak);
// tesseraCudaSimCalls: how many times this process called the exported
// driver function named exactly `exported_name` ("cuMemAlloc_v2",
// "cuMemAllocAsync_ptsz"), failed calls and calls before cuInit included.
// CUDA_ERROR_INVALID_VALUE for a NULL argument, CUDA_ERROR_NOT_FOUND for a
// name the simulator does not export as a driver function. Works before cuInit.
CUresult tesseraCudaSimCalls(const char* exported_name, unsigned long long* count);
}

// The driver version cuDriverGetVersion reports (design §5: default 13000).
inline constexpr int kSimDriverVersion = 13000;

// The layouts above, as [CH] gives them on LP64 Linux.
static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == 24 && sizeof(CUDA_ARRAY_DESCRIPTOR_v1) == 16);
static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40 && sizeof(CUDA_ARRAY3D_DESCRIPTOR_v1) == 24);
static_assert(sizeof(CUmemAllocationProp) == 32 && sizeof(CUmemPoolProps) == 88);
