// The CUDA driver ABI this simulator implements, declared here from the facts
// in docs/design-memory-quotas.md §1 (which cites NVIDIA's cuda.h and
// cudaTypedefs.h of CUDA 13.0, tag [CH]); no NVIDIA header is included or
// copied. Every definition in exports.cpp must match its prototype here, so a
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
  CUDA_ERROR_NOT_FOUND = 500,
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
CUresult cuGetErrorName(CUresult error, const char** pStr);             // 6000
CUresult cuGetErrorString(CUresult error, const char** pStr);           // 6000
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);  // 11030
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus);  // 12000

// The simulator's one control call: this process's bytes on device `ordinal`,
// every process's bytes (those sharing TESSERA_SIM_CUDA_DIR, live ones only)
// and the high-water mark of the latter. Any output may be NULL.
CUresult tesseraCudaSimUsage(int ordinal, unsigned long long* process_bytes, unsigned long long* device_bytes,
                             unsigned long long* device_peak);
}

// The driver version cuDriverGetVersion reports (design §5: default 13000).
inline constexpr int kSimDriverVersion = 13000;
