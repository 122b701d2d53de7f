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
  CUDA_ERROR_FILE_NOT_FOUND = 301,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
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
typedef struct CUmod_st* CUmodule;                     // opaque
typedef struct CUgraph_st* CUgraph;                    // opaque
typedef struct CUgraphNode_st* CUgraphNode;            // opaque
typedef struct CUgraphExec_st* CUgraphExec;            // opaque
typedef struct CUlib_st* CUlibrary;                    // opaque
typedef struct CUkern_st* CUkernel;                    // opaque
typedef int CUlibraryOption;                           // [CH] CUlibraryOption (an enum); not modelled
typedef int CUjit_option;                              // [CH] CUjit_option (an enum); options are not modelled

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
// [CH] CUmemAccess_flags and CUmemAccessDesc (cuMemSetAccess).
enum CUmemAccess_flags : int {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
};
struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
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

// [CH] graphs: node types (memory nodes are the only ones modelled), the
// device's graph memory attributes, stream capture modes and statuses, and
// the instantiation parameters and flags.
enum CUgraphNodeType : int {
  CU_GRAPH_NODE_TYPE_KERNEL = 0,
  CU_GRAPH_NODE_TYPE_EMPTY = 5,
  CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
};
enum CUgraphMem_attribute : int {
  CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
  CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3,
};
enum CUstreamCaptureMode : int {
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};
enum CUstreamCaptureStatus : int {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};
enum : unsigned int {
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1,
};
enum : unsigned long long {
  CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
  CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2,
  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH = 4,
  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8,
};
struct CUDA_MEM_ALLOC_NODE_PARAMS {  // [CH] CUDA_MEM_ALLOC_NODE_PARAMS_v1
  CUmemPoolProps poolProps;
  const void* accessDescs;  // const CUmemAccessDesc*: peer access is not modelled
  std::size_t accessDescCount;
  std::size_t bytesize;
  CUdeviceptr dptr;  // out
};
enum CUgraphInstantiateResult : int { CUDA_GRAPH_INSTANTIATE_SUCCESS = 0, CUDA_GRAPH_INSTANTIATE_ERROR = 1 };
struct CUDA_GRAPH_INSTANTIATE_PARAMS {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  CUgraphInstantiateResult result_out;
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

// [CH] CUdevice_attribute_enum, every value of CUDA 13.0's cuda.h (1-135 as
// CUDA 12.6's cuda.h has them, 136-147 added by 13.0; MAX = 148); the
// deprecated aliases (SHARED_MEMORY_PER_BLOCK = 8, REGISTERS_PER_BLOCK = 12,
// MAXIMUM_TEXTURE2D_ARRAY_* = 27-29, VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED =
// 102) are left out: same numbers.
enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT = 14,
  CU_DEVICE_ATTRIBUTE_GPU_OVERLAP = 15,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT = 17,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH = 21,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH = 22,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT = 23,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH = 24,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT = 25,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH = 26,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH = 27,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT = 28,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS = 29,
  CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT = 30,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_TCC_DRIVER = 35,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH = 42,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS = 43,
  CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER = 44,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH = 45,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT = 46,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE = 47,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE = 48,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE = 49,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT = 51,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH = 52,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH = 53,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS = 54,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH = 55,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH = 56,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT = 57,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH = 58,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT = 59,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH = 60,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH = 61,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS = 62,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH = 63,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT = 64,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS = 65,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH = 66,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH = 67,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS = 68,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH = 69,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH = 70,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT = 71,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH = 72,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH = 73,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT = 74,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH = 77,
  CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED = 78,
  CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED = 79,
  CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED = 80,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD = 84,
  CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID = 85,
  CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = 86,
  CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO = 87,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED = 90,
  CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 92,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 93,
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1 = 94,
  CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
  CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH = 96,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES = 98,
  CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 99,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES = 100,
  CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST = 101,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED = 104,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED = 105,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
  CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED = 107,
  CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108,
  CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
  CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK = 111,
  CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED = 112,
  CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED = 113,
  CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED = 114,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING = 118,
  CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES = 119,
  CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120,
  CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED = 121,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
  CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR = 123,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
  CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = 125,
  CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT = 126,
  CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED = 127,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 128,
  CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS = 129,
  CU_DEVICE_ATTRIBUTE_NUMA_CONFIG = 130,
  CU_DEVICE_ATTRIBUTE_NUMA_ID = 131,
  CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 132,
  CU_DEVICE_ATTRIBUTE_MPS_ENABLED = 133,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134,
  CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED = 135,
  CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK = 136,
  CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_MAXIMUM_LENGTH = 137,
  CU_DEVICE_ATTRIBUTE_VULKAN_CIG_SUPPORTED = 138,
  CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID = 139,
  CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID = 140,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 141,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED = 142,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED = 143,
  CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED = 144,
  CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 145,
  CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED = 146,
  CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED = 147,
  CU_DEVICE_ATTRIBUTE_MAX = 148,
};

// [CH] CUcomputemode.
enum CUcomputemode : int {
  CU_COMPUTEMODE_DEFAULT = 0,
  CU_COMPUTEMODE_PROHIBITED = 2,
  CU_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

// The entry points, with the CUDA version that introduced each ABI ([CH]
// PFN_<name>_v<N>). Bare 2000-era names of memory calls take 32-bit sizes.
CUresult cuInit(unsigned int flags);                                    // 2000
CUresult cuDriverGetVersion(int* driverVersion);                        // 2020
CUresult cuDeviceGetCount(int* count);                                  // 2000
CUresult cuDeviceGet(CUdevice* device, int ordinal);                    // 2000
CUresult cuDeviceGetName(char* name, int len, CUdevice dev);            // 2000
CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev);  // 2000
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);                   // 9020
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev);                // 11040
CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev);           // 2000
CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev);         // 3020
CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev);     // 2000
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
CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx);            // 13000
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
CUresult cuMemcpyHtoD(unsigned int dstDevice, const void* srcHost, unsigned int ByteCount);    // 2000
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
CUresult cuMemSetAccess(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count);  // 10020
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr);  // 11000
CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags);  // 10020
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType);  // 10020

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev);         // 11020
CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev);                    // 11020
CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);                     // 11020
CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location, CUmemAllocationType type);  // 13000
CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type);  // 13000
CUresult cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool);   // 13000
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
CUresult cuCtxPushCurrent(CUcontext ctx);                                  // 2000
CUresult cuCtxPushCurrent_v2(CUcontext ctx);                               // 4000
CUresult cuCtxPopCurrent(CUcontext* pctx);                                 // 2000
CUresult cuCtxPopCurrent_v2(CUcontext* pctx);                              // 4000
CUresult cuModuleLoad(CUmodule* module, const char* fname);                // 2000
CUresult cuModuleLoadData(CUmodule* module, const void* image);            // 2000
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                            void** optionValues);                          // 2010
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin);    // 2000
CUresult cuModuleUnload(CUmodule hmod);                                    // 2000
CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions, void** jitOptionsValues,
                           unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,
                           unsigned int numLibraryOptions);  // 12000
CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                               void** libraryOptionValues, unsigned int numLibraryOptions);  // 12000
CUresult cuLibraryUnload(CUlibrary library);  // 12000
CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name);  // 12000
CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags);           // 2000
CUresult cuStreamDestroy(CUstream hStream);                                // 2000
CUresult cuStreamDestroy_v2(CUstream hStream);                             // 4000
CUresult cuStreamGetCtx(CUstream hStream, CUcontext* pctx);                // 9020
CUresult cuStreamGetDevice(CUstream hStream, CUdevice* device);            // 12080
CUresult cuStreamBeginCapture(CUstream hStream);                           // 10000
CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode);  // 10010
CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph);           // 10000
CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus);  // 10000
CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags);              // 10000
CUresult cuGraphDestroy(CUgraph hGraph);                                   // 10000
CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                                std::size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams);  // 11040
CUresult cuGraphAddMemFreeNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                               std::size_t numDependencies, CUdeviceptr dptr);  // 11040
CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, std::size_t* numNodes);  // 10000
CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type);     // 10000
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS* params_out);  // 11040
CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                            std::size_t bufferSize);                       // 10000
CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                               std::size_t bufferSize);                    // 11000
CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags);  // 11040
CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams);  // 12000
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams);  // 12000
CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream);          // 11010
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream);     // 11010
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);          // 10000
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);     // 10000
CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);                       // 10000
CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value);  // 11040
CUresult cuDeviceGraphMemTrim(CUdevice device);                            // 11040
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
static_assert(sizeof(CUmemAllocationProp) == 32 && sizeof(CUmemPoolProps) == 88 && sizeof(CUmemAccessDesc) == 12);
static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120 && sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == 32);
