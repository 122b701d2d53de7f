// The NVML ABI subset tessera uses: our own declarations of NVML's types,
// constants and struct layouts (x86-64 Linux, plain C calling convention).
// Facts: docs/nvml-abi.md, sections 1.1-1.4, which were read from NVIDIA's
// header as shipped in go-nvml (gen/nvml/nvml.h) and checked with a compiled
// layout probe. Here and across the tree, "(facts N)" in a comment means
// section N of docs/nvml-abi.md and "(facts 1.5 #k)" its pitfall k. The
// names follow NVML's so a reader can match them to NVIDIA's documentation;
// they live in a namespace so they never collide with a real nvml.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::nvml::abi {

// nvmlReturn_t is a C enum: 4 bytes, int (facts 1.1; values facts 1.4).
enum nvmlReturn_t : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999,
};

// Opaque handles: each a pointer to an incomplete struct (facts 1.1).
struct nvmlDevice_st;
struct nvmlGpuInstance_st;
struct nvmlComputeInstance_st;
struct nvmlEventSet_st;
struct nvmlGpmSample_st;
using nvmlDevice_t = nvmlDevice_st*;
using nvmlGpuInstance_t = nvmlGpuInstance_st*;
using nvmlComputeInstance_t = nvmlComputeInstance_st*;
using nvmlEventSet_t = nvmlEventSet_st*;
using nvmlGpmSample_t = nvmlGpmSample_st*;

using nvmlDeviceArchitecture_t = unsigned int;
using nvmlBrandType_t = unsigned int;  // a C enum (nvml.h nvmlBrandType_enum)
enum nvmlEnableState_t : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
enum nvmlGpuTopologyLevel_t : int {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};

// Sensors, clocks and ECC counters (nvml.h; values unchanged since R256).
enum nvmlTemperatureSensors_t : int { NVML_TEMPERATURE_GPU = 0 };
enum nvmlClockType_t : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
enum nvmlMemoryErrorType_t : int { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum nvmlEccCounterType_t : int { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };

// NVML_STRUCT_VERSION(data, ver): sizeof in the low 24 bits, the version in
// the top byte; never the plain integer (facts 1.1, nvidia-settings #78).
constexpr unsigned int struct_version(std::size_t size, unsigned int version) {
  return static_cast<unsigned int>(size) | (version << 24U);
}

// Buffer sizes (facts 1.4).
constexpr unsigned int NVML_DEVICE_UUID_BUFFER_SIZE = 80;
constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_DEVICE_NAME_BUFFER_SIZE = 64;
constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;

constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = static_cast<unsigned long long>(-1);
// GI/CI ids in a process entry of a GPU that is not in MIG mode.
constexpr unsigned int NVML_INSTANCE_ID_NONE = 0xFFFFFFFFU;

// MIG (facts 1.4). Profile *indices* (what ...GetGpuInstanceProfileInfo takes);
// the profile *id* it returns is what every other call takes (facts 1.5 #6).
constexpr unsigned int NVML_DEVICE_MIG_DISABLE = 0x0;
constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 0x1;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX = 0x11;
// Our COUNT: the 13.2 header's 0x12. Loop up to it and skip NOT_SUPPORTED and
// INVALID_ARGUMENT, since older drivers know fewer indices (facts 1.4).
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12;
constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0;
constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x9;
constexpr unsigned int NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0;

// Event type bits (facts 1.4).
constexpr unsigned long long nvmlEventTypeSingleBitEccError = 0x1ULL;
constexpr unsigned long long nvmlEventTypeDoubleBitEccError = 0x2ULL;
constexpr unsigned long long nvmlEventTypePState = 0x4ULL;
constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;
constexpr unsigned long long nvmlEventTypeClock = 0x10ULL;
constexpr unsigned long long nvmlEventMigConfigChange = 0x100ULL;

// Architectures (facts 1.4).
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_AMPERE = 7;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_ADA = 8;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_HOPPER = 9;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_BLACKWELL = 10;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_UNKNOWN = 0xffffffffU;

// Brands (nvml.h nvmlBrandType_enum: NVML_BRAND_UNKNOWN 0 .. NVML_BRAND_TITAN_RTX 16).
constexpr nvmlBrandType_t NVML_BRAND_NVIDIA = 14;

// GPM (facts 1.3): version fields here are the plain integer 1.
constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;
// The library reads only numMetrics entries; 98 is the smallest MAX any
// header had (11.8-12.8), so a request of up to 98 works on every driver.
constexpr unsigned int kGpmMetricSlots = 98;
constexpr unsigned int NVML_GPM_METRIC_GRAPHICS_UTIL = 1;
constexpr unsigned int NVML_GPM_METRIC_SM_UTIL = 2;
constexpr unsigned int NVML_GPM_METRIC_SM_OCCUPANCY = 3;
constexpr unsigned int NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5;
constexpr unsigned int NVML_GPM_METRIC_DRAM_BW_UTIL = 10;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;  // includes reserved (facts 1.5 #7)
};
constexpr unsigned int nvmlMemory_v2 = struct_version(sizeof(nvmlMemory_v2_t), 2);

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

// The entry of the _v2/_v3 process queries: no version field, 24 bytes on
// most drivers but 32 on 535.43-535.86 (facts 1.5 #4).
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// Driver-enforced memory limits of a cgroup partition (R615 / CUDA 13.4 and
// newer, non-MIG devices only; facts 1.3): no version field; the cgroup is
// named by the full path of its directory (/sys/fs/cgroup/...). No limit is
// softLimit 0 with hardLimit NVML_DEVICE_MEMORY_LIMIT_MAX.
struct nvmlSetMemoryLimits_v1_t {
  const char* nameSpace;
  unsigned long long softLimit;
  unsigned long long hardLimit;
};
struct nvmlGetMemoryLimits_v1_t {
  const char* nameSpace;  // in
  unsigned long long softLimit;
  unsigned long long hardLimit;
  unsigned long long currentUsed;
};
constexpr unsigned long long NVML_DEVICE_MEMORY_LIMIT_MAX = ~0ULL;

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid for XidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct nvmlGpuInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};

struct nvmlGpuInstanceProfileInfo_v2_t {
  unsigned int version;
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
};
constexpr unsigned int nvmlGpuInstanceProfileInfo_v2 = struct_version(sizeof(nvmlGpuInstanceProfileInfo_v2_t), 2);

// v3 dropped isP2pSupported, so every later field moved: not an extension of
// v2 (facts 1.5 #3).
struct nvmlGpuInstanceProfileInfo_v3_t {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  unsigned int capabilities;
};
constexpr unsigned int nvmlGpuInstanceProfileInfo_v3 = struct_version(sizeof(nvmlGpuInstanceProfileInfo_v3_t), 3);

struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};

struct nvmlComputeInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

struct nvmlComputeInstanceProfileInfo_v2_t {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
};
constexpr unsigned int nvmlComputeInstanceProfileInfo_v2 =
    struct_version(sizeof(nvmlComputeInstanceProfileInfo_v2_t), 2);

struct nvmlComputeInstanceProfileInfo_v3_t {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  unsigned int capabilities;
};
constexpr unsigned int nvmlComputeInstanceProfileInfo_v3 =
    struct_version(sizeof(nvmlComputeInstanceProfileInfo_v3_t), 3);

// The 11.2+ layout with `placement` (what _v2 of GetInfo writes).
struct nvmlComputeInstanceInfo_t {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
};

struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};

struct nvmlGpmMetricsGet_t {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[kGpmMetricSlots];
};

struct nvmlGpmSupport_t {
  unsigned int version;
  unsigned int isSupportedDevice;
};

}  // namespace tessera::nvml::abi
