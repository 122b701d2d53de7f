// Every NVML entry point tessera binds, once: the loader makes its table of
// function pointers from this list, the simulator declares its exports from
// it (so a wrong signature fails to compile), and the ABI test walks it.
//
// TESSERA_NVML_FUNCTIONS(REQUIRED, OPTIONAL) calls REQUIRED or OPTIONAL with
// (return type, exported symbol, parameter list). Symbols are the suffixed
// names, since dlsym of a bare name returns the old ABI (facts 1.1, 1.5 #1).
// REQUIRED ones exist in every driver tessera supports (R470 and newer: the
// placements query is the newest of them, facts 1.2); OPTIONAL ones are
// newer and may be absent: the wrapper then falls back to an older call or
// fails with NVML_ERROR_FUNCTION_NOT_FOUND.
#pragma once

#include "nvml/abi.hpp"

// clang-format off
#define TESSERA_NVML_FUNCTIONS(REQUIRED, OPTIONAL)                                                              \
  REQUIRED(nvmlReturn_t, nvmlInit_v2, (void))                                                                   \
  REQUIRED(nvmlReturn_t, nvmlShutdown, (void))                                                                  \
  REQUIRED(const char*, nvmlErrorString, (nvmlReturn_t result))                                                 \
  REQUIRED(nvmlReturn_t, nvmlSystemGetDriverVersion, (char* version, unsigned int length))                      \
  REQUIRED(nvmlReturn_t, nvmlSystemGetCudaDriverVersion_v2, (int* cudaDriverVersion))                           \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned int* deviceCount))                                    \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t* device))             \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char* uuid, nvmlDevice_t* device))                   \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetName, (nvmlDevice_t device, char* name, unsigned int length))             \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t device, char* uuid, unsigned int length))             \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetMinorNumber, (nvmlDevice_t device, unsigned int* minorNumber))            \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetPciInfo_v3, (nvmlDevice_t device, nvmlPciInfo_t* pci))                    \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t* memory))                  \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t* memory))            \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetUtilizationRates, (nvmlDevice_t device, nvmlUtilization_t* utilization))  \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetTemperature,                                                              \
           (nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int* temp))                      \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetPowerUsage, (nvmlDevice_t device, unsigned int* power))                   \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetClockInfo, (nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock)) \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetTotalEccErrors,                                                           \
           (nvmlDevice_t device, nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType,              \
            unsigned long long* eccCounts))                                                                     \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetArchitecture, (nvmlDevice_t device, nvmlDeviceArchitecture_t* arch))      \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetCudaComputeCapability, (nvmlDevice_t device, int* major, int* minor))     \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetBrand, (nvmlDevice_t device, nvmlBrandType_t* type))                      \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetMigMode,                                                                  \
           (nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode))                         \
  REQUIRED(nvmlReturn_t, nvmlDeviceSetMigMode,                                                                  \
           (nvmlDevice_t device, unsigned int mode, nvmlReturn_t* activationStatus))                            \
  REQUIRED(nvmlReturn_t, nvmlDeviceIsMigDeviceHandle, (nvmlDevice_t device, unsigned int* isMigDevice))         \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t device, unsigned int* count))            \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex,                                                   \
           (nvmlDevice_t device, unsigned int index, nvmlDevice_t* migDevice))                                  \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,                                          \
           (nvmlDevice_t migDevice, nvmlDevice_t* device))                                                      \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetGpuInstanceId, (nvmlDevice_t device, unsigned int* id))                   \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetComputeInstanceId, (nvmlDevice_t device, unsigned int* id))               \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetGpuInstanceProfileInfo,                                                   \
           (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info))                     \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetGpuInstanceProfileInfoV,                                                  \
           (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t* info))                  \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetGpuInstancePossiblePlacements_v2,                                         \
           (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t* placements,                \
            unsigned int* count))                                                                               \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetGpuInstanceRemainingCapacity,                                             \
           (nvmlDevice_t device, unsigned int profileId, unsigned int* count))                                  \
  REQUIRED(nvmlReturn_t, nvmlDeviceCreateGpuInstance,                                                           \
           (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t* gpuInstance))                       \
  REQUIRED(nvmlReturn_t, nvmlDeviceCreateGpuInstanceWithPlacement,                                              \
           (nvmlDevice_t device, unsigned int profileId, const nvmlGpuInstancePlacement_t* placement,           \
            nvmlGpuInstance_t* gpuInstance))                                                                    \
  REQUIRED(nvmlReturn_t, nvmlGpuInstanceDestroy, (nvmlGpuInstance_t gpuInstance))                               \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetGpuInstances,                                                             \
           (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t* gpuInstances, unsigned int* count)) \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetGpuInstanceById,                                                          \
           (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t* gpuInstance))                              \
  REQUIRED(nvmlReturn_t, nvmlGpuInstanceGetInfo, (nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t* info))  \
  REQUIRED(nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceProfileInfo,                                          \
           (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,                       \
            nvmlComputeInstanceProfileInfo_t* info))                                                            \
  REQUIRED(nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceRemainingCapacity,                                    \
           (nvmlGpuInstance_t gpuInstance, unsigned int profileId, unsigned int* count))                        \
  REQUIRED(nvmlReturn_t, nvmlGpuInstanceCreateComputeInstance,                                                  \
           (nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstance_t* computeInstance))     \
  REQUIRED(nvmlReturn_t, nvmlComputeInstanceDestroy, (nvmlComputeInstance_t computeInstance))                   \
  REQUIRED(nvmlReturn_t, nvmlGpuInstanceGetComputeInstances,                                                    \
           (nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstance_t* computeInstances,     \
            unsigned int* count))                                                                               \
  REQUIRED(nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceById,                                                 \
           (nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t* computeInstance))            \
  REQUIRED(nvmlReturn_t, nvmlComputeInstanceGetInfo_v2,                                                         \
           (nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t* info))                            \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,                                               \
           (nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos))                            \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v2,                                               \
           (nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos))                            \
  OPTIONAL(nvmlReturn_t, nvmlDeviceSetMemoryLimits_v1,                                                          \
           (nvmlDevice_t device, nvmlSetMemoryLimits_v1_t* limits))                                             \
  OPTIONAL(nvmlReturn_t, nvmlDeviceGetMemoryLimits_v1,                                                          \
           (nvmlDevice_t device, nvmlGetMemoryLimits_v1_t* limits))                                             \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetTopologyCommonAncestor,                                                   \
           (nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t* pathInfo))                      \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetNvLinkState,                                                              \
           (nvmlDevice_t device, unsigned int link, nvmlEnableState_t* isActive))                               \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetNvLinkRemotePciInfo_v2,                                                   \
           (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci))                                        \
  REQUIRED(nvmlReturn_t, nvmlEventSetCreate, (nvmlEventSet_t* set))                                             \
  REQUIRED(nvmlReturn_t, nvmlDeviceRegisterEvents,                                                              \
           (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set))                            \
  REQUIRED(nvmlReturn_t, nvmlDeviceGetSupportedEventTypes, (nvmlDevice_t device, unsigned long long* eventTypes)) \
  REQUIRED(nvmlReturn_t, nvmlEventSetWait_v2, (nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms)) \
  REQUIRED(nvmlReturn_t, nvmlEventSetFree, (nvmlEventSet_t set))                                                \
  OPTIONAL(nvmlReturn_t, nvmlGpmQueryDeviceSupport, (nvmlDevice_t device, nvmlGpmSupport_t* gpmSupport))        \
  OPTIONAL(nvmlReturn_t, nvmlGpmSampleAlloc, (nvmlGpmSample_t* gpmSample))                                      \
  OPTIONAL(nvmlReturn_t, nvmlGpmSampleFree, (nvmlGpmSample_t gpmSample))                                        \
  OPTIONAL(nvmlReturn_t, nvmlGpmSampleGet, (nvmlDevice_t device, nvmlGpmSample_t gpmSample))                    \
  OPTIONAL(nvmlReturn_t, nvmlGpmMigSampleGet,                                                                   \
           (nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample))                        \
  OPTIONAL(nvmlReturn_t, nvmlGpmMetricsGet, (nvmlGpmMetricsGet_t* metricsGet))
// clang-format on
