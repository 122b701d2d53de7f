// Answers to the kubelet's Allocate and GetPreferredAllocation, from memory:
// no process spawned, no NVML call. Pure functions of the advertised
// resource, the request and the settings.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/device_plugin.hpp"
#include "core/error.hpp"
#include "sharing/cdi.hpp"
#include "sharing/inventory.hpp"
#include "sharing/resources.hpp"

namespace tessera::sharing {

struct Mount {
  std::string host_path;
  std::string container_path;
  bool read_only = false;
};

// One device of a container's quota: what its limits file and ledger hold.
struct QuotaDevice {
  std::string uuid;     // the GPU or MIG UUID
  uint64_t quota = 0;   // bytes
  uint64_t memory = 0;  // the device's memory (its replicas' shares together), bytes
  uint64_t context = 0; // a first context's charge where it cannot be measured (QuotaLibrarySettings)
};

// NVIDIA's per-container memory limit, for its container toolkit (1.20.1 and newer): a
// createRuntime hook, `nvidia-ctk hook apply-cuda-memory-limits`, reads NVIDIA_GPU_MEMORY_LIMIT
// (whole MiB) from the container's environment and has the driver cap the container's cgroup on
// each of its GPUs. The value for a container holding `devices`: their quota in whole MiB, floored
// as tessera-memory-hook floors it, so that where both hooks run they set one limit; nullopt where
// one value cannot say it (a MIG device, which the driver does not cap; quotas that differ; one
// under 1 MiB). NVIDIA_GPU_MEMORY_REQUEST (its soft limit, which the driver reserves in every
// ancestor cgroup) is never set.
inline constexpr const char* kNvidiaMemoryLimitEnv = "NVIDIA_GPU_MEMORY_LIMIT";
std::optional<uint64_t> nvidia_memory_limit_mib(std::span<const QuotaDevice> devices);

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::map<std::string, std::string> annotations;
  // The host directory of the container's quota files, <ledger root>/<key>:
  // the limits file (mounted read-only at TESSERA_CONTAINER_LIMITS_FILE) and
  // the ledger (mounted read-write at TESSERA_CONTAINER_LEDGER_FILE), each as
  // a single file; the directory itself is never mounted. The caller writes
  // both before answering, from `ledger_key` and `quota_devices` (allocate
  // itself touches no file). Empty when the container gets no ledger.
  std::string ledger_dir;
  std::string ledger_key;
  std::vector<QuotaDevice> quota_devices;
  // The host file mounted at /etc/ld.so.preload, naming the library; the
  // caller writes it before answering. Empty when not used.
  std::string preload_file;
  // cdi-cri: one qualified CDI name per device asked for (and the quota's).
  std::vector<std::string> cdi_devices;
  // The container's own spec with the memory hook (quota_cdi_spec), named in
  // cdi_devices or the CDI annotation; the caller writes it before answering.
  std::optional<CdiSpec> quota_spec;
  // passDeviceSpecs: the device nodes the container needs, for the kubelet
  // to hand the runtime itself.
  std::vector<DeviceNode> devices;
};

inline constexpr const char* kDefaultQuotaLibraryDir = "/var/lib/tessera/lib";
inline constexpr const char* kDefaultLedgerRoot = "/var/lib/tessera/ledgers";

// How a container with a memory quota gets the library that enforces it
// (libtessera-cuda.so; the contract is src/cuda_quota/env.h).
// How ld.so is told to load the library: LD_PRELOAD in the environment, the
// container's /etc/ld.so.preload (a pod's own LD_PRELOAD replaces Allocate's,
// as kubelet 1.20 with docker does; the file also reaches processes that drop
// the environment, but replaces an image's own /etc/ld.so.preload), or both.
enum class Preload { env, file, both };

struct QuotaLibrarySettings {
  // Off: such a container gets only its TESSERA_DEVICE_MEMORY_LIMIT_<k>.
  bool inject = true;
  Preload preload = Preload::both;
  // Host directory holding libtessera-cuda.so, mounted read-only at
  // TESSERA_CONTAINER_LIBRARY_DIR.
  std::string library_dir = kDefaultQuotaLibraryDir;
  // Host directory holding one directory per container, <root>/<key>, with
  // its limits file and ledger, each mounted into the container as one file.
  std::string ledger_root = kDefaultLedgerRoot;
  // What a process's first context on a device is charged when there is no
  // context to measure it with (the limits file's `context=`); 0: nothing.
  uint64_t context_bytes = 0;
  // The driver backend: with a CDI device list strategy, a container with a
  // quota also gets its own CDI device whose hook has the driver hold it.
  MemoryHook memory_hook;
};

struct AllocateSettings {
  config::DeviceIdStrategy id_strategy = config::DeviceIdStrategy::uuid;
  std::vector<config::DeviceListStrategy> list_strategy{config::DeviceListStrategy::envvar};
  std::string mps_root = "/run/nvidia/mps";
  CdiNames cdi;
  bool pass_device_specs = false;
  QuotaLibrarySettings quota;
};

AllocateSettings settings_from(const config::DevicePluginConfig& config);

// The key of a container's quota ledger: its resource name made safe for a
// file name ([A-Za-z0-9._-] kept, anything else '_', at most 48 characters),
// '-', and 16 lowercase hex digits of FNV-1a 64 over the resource name
// followed by "\n<id>" for each requested id in ascending byte order. The
// kubelet never hands one replica id to two live containers, so the key is
// unique among a node's live allocations and the same each time the same
// replicas are allocated again (a restarted container finds its ledger).
std::string ledger_key(const std::string& resource, std::span<const std::string> ids);

// A shared replica gets a memory quota per visible device
// (TESSERA_DEVICE_MEMORY_LIMIT_<k>) and, unless settings.quota.inject is off,
// what loads and feeds the quota library: the limits file and the ledger
// (ledger_dir, ledger_key, quota_devices: the caller writes them) mounted as
// single files, the library's directory, TESSERA_LIMITS_FILE announcing the
// limits file, and, for the library's fallback, TESSERA_DEVICE_UUID_<k>,
// TESSERA_LEDGER_DIR, TESSERA_LEDGER_KEY and LD_PRELOAD.
// Errors (the kubelet shows them as the pod's admission error): an id the
// resource does not advertise, a device asked twice, more than one replica
// when the resource fails requests greater than one.
// Device lists, by each strategy asked for: envvar NVIDIA_VISIBLE_DEVICES;
// volume-mounts; cdi-annotations one annotation "<prefix>nvidia-device-plugin_
// <resource>" naming every device's CDI name, comma-joined as the CDI
// specification joins names in an annotation; cdi-cri one CDI name per device
// (cdi_devices). passDeviceSpecs adds the device nodes, from `driver` (the
// node's driver files; an error without them).
[[nodiscard]] Result<ContainerAllocation> allocate(const Resource& resource, std::span<const std::string> ids,
                                                   const AllocateSettings& settings,
                                                   const DriverFiles* driver = nullptr);

// One MPS control daemon per GPU or MIG device with MPS shares
// (docs/design-mps.md): where it lives on the host and what it hands each
// client. Pure: the MPS supervisor and Allocate both use it.
struct MpsDaemon {
  std::string resource;
  std::string uuid;        // the GPU or MIG device: the daemon's CUDA_VISIBLE_DEVICES
  std::string pipe_dir;    // <mpsRoot>/<uuid>/pipe
  std::string log_dir;     // <mpsRoot>/<uuid>/log
  uint32_t replicas = 1;
  uint64_t client_bytes = 0;  // one share of the device's memory
  uint32_t active_thread_percentage = 100;
};

MpsDaemon mps_daemon(const std::string& mps_root, const Resource& resource, const Device& device);
// Every daemon the MPS resources need, one per physical device.
std::vector<MpsDaemon> mps_daemons(const std::string& mps_root, std::span<const Resource> resources);

enum class SharedPolicy { distributed, packed };

// Which `size` devices to hand out among `available`, always including
// `must_include`. Whole GPUs: the set with the most NVLink connections among
// them (exhaustive for small sets, greedy beyond). Replicas: spread across
// (distributed) or packed onto (packed) physical devices, counting what is
// already allocated (advertised but not available).
[[nodiscard]] Result<std::vector<std::string>> preferred_allocation(const Resource& resource, const Inventory& inventory,
                                                                    std::span<const std::string> available,
                                                                    std::span<const std::string> must_include,
                                                                    size_t size, SharedPolicy policy);

}  // namespace tessera::sharing
