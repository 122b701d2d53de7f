// Container Device Interface (CDI) for the devices the plugin advertises:
// the qualified names a container is handed (cdi-cri, cdi-annotations), the
// device nodes each device needs (passDeviceSpecs too), and the specs that
// define them. Pure values: what the driver put on the node comes in as
// DriverFiles (found by the plugin adapter), and the specs go out as
// CdiSpec values for the adapter to write.
//
// Names follow NVIDIA's device plugin: vendor k8s.device-plugin.nvidia.com,
// class gpu for whole GPUs and MIG devices alike, a device named by its UUID
// (GPU-..., MIG-...) and by its index id ("0", or "<gpu>:<mig index>")
// (k8s-device-plugin v0.17.0 internal/cdi/cdi.go New: one class "gpu";
// container-toolkit pkg/nvcdi/namer.go: "i" and "i:j"). A shared replica is
// its own device, named by its replica id "<uuid>::<n>": NVIDIA's plugin
// hands the physical name, tessera the replica's, whose edits are its own. Name rules: CDI
// specification, "Kind" and device names (pkg/parser of
// tags.cncf.io/container-device-interface v1.1.0).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "sharing/inventory.hpp"
#include "sharing/resources.hpp"

namespace tessera::sharing {

inline constexpr const char* kDefaultCdiVendor = "k8s.device-plugin.nvidia.com";
// The oldest CDI version whose spec carries device nodes' hostPath and device
// annotations (CDI specification, "Versions": 0.5.0 hostPath, 0.6.0 annotations).
inline constexpr const char* kCdiVersion = "0.6.0";

// Every spec's own environment edit, as NVIDIA's generated specs have it
// (nvidia-ctk cdi generate, container-toolkit pkg/nvcdi): with the NVIDIA
// container runtime still the node's default, a container whose image sets
// NVIDIA_VISIBLE_DEVICES=all gets no device beyond its CDI devices ("void":
// the runtime's hook adds nothing).
inline constexpr const char* kCdiVisibleDevicesVoid = "NVIDIA_VISIBLE_DEVICES=void";

struct CdiNames {
  std::string vendor = kDefaultCdiVendor;
  std::string gpu_class = "gpu";
  // The same class as whole GPUs', as NVIDIA's: one spec holds both. A class
  // of its own gives MIG devices a spec of their own.
  std::string mig_class = "gpu";
  std::string annotation_prefix = "cdi.k8s.io/";
};

// A vendor or class: a letter first, a letter or digit last, letters,
// digits, '_', '-' and '.' between. A device name: a letter or digit first
// and last, and ':' allowed between as well. Errors say which part is wrong
// and why.
[[nodiscard]] Result<void> check_cdi_kind(const std::string& vendor, const std::string& cls);
[[nodiscard]] Result<void> check_cdi_device_name(const std::string& name);
[[nodiscard]] Result<void> check_cdi_names(const CdiNames& names);

// What the node's driver put outside NVML, as host paths for a container
// runtime to use. Found on the node by the plugin adapter (plugin/cdi_writer).
struct DriverFiles {
  std::string dev_root = "/";  // host path under which dev/ holds the device nodes
  // Control nodes every GPU container gets: "/dev/nvidiactl", "/dev/nvidia-uvm", ...
  std::vector<std::string> control_nodes;
  // The character-device majors the driver registered (the kernel's
  // /proc/devices): nvidia-frontend (195, fixed), and the dynamic nvidia-uvm
  // (only once nvidia_uvm is loaded) and nvidia-caps. With a major known,
  // a node's spec entry carries its type, major and minor, so the container
  // runtime makes the node in the container whether or not the host has it
  // (CDI specification, "Device nodes"; the driver creates only nvidia<N> and
  // nvidiactl, and nothing but nvidia-modprobe creates the others).
  std::optional<uint32_t> frontend_major, uvm_major, caps_major;
  // Driver files to mount at the same path in a container: container path
  // and host path (a library's soname path, and the file it resolves to).
  std::vector<std::pair<std::string, std::string>> files;
  // GPU index -> the minor number of its /dev/nvidia<minor>.
  std::map<uint32_t, uint32_t> gpu_minor;
  // MIG capabilities, by (GPU minor, GPU instance id) and (GPU minor, GPU
  // instance id, compute instance id): the minor of /dev/nvidia-caps/nvidia-cap<minor>.
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> gi_access;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> ci_access;
  // The host path of tessera-cdi-hook; with it, every spec refreshes the
  // container's linker cache for the driver's libraries and makes
  // libcuda.so (createContainer hooks). Empty: no hooks.
  std::string cdi_hook;
  // The installed driver's version (libcuda.so.<version>), where known: the
  // enable-cuda-compat hook compares an image's forward-compatible CUDA with it.
  std::string driver_version;
  // The host path of the driver's parameters when not the kernel's own
  // /proc/driver/nvidia/params (a simulated node's); empty: that one.
  std::string params_file;
};


// A character device's numbers.
struct DeviceNumber {
  uint32_t major = 0, minor = 0;
  friend bool operator==(const DeviceNumber&, const DeviceNumber&) = default;
};

struct DeviceNode {
  std::string path;       // in the container: /dev/nvidia0
  std::string host_path;  // on the host: <dev root>/dev/nvidia0
  // Its numbers, where the driver's majors are known: the runtime then makes
  // it as a character device without looking at the host's node.
  std::optional<DeviceNumber> number = std::nullopt;
  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

// The numbers of one of the driver's device nodes, by its container path, as
// the driver and nvidia-modprobe number them (nvidia-modprobe-utils.h:
// nvidia<N> is frontend N, nvidiactl 255, nvidia-modeset 254; nvidia-uvm 0
// and nvidia-uvm-tools 1 under the uvm major; nvidia-caps/nvidia-cap<M> is
// M under the caps major). Empty where its major is not known or the path
// is none of these.
std::optional<DeviceNumber> driver_device_number(const std::string& path, const DriverFiles& files);

// The majors a /proc/devices text lists for the driver's character devices.
struct DriverMajors {
  std::optional<uint32_t> frontend, uvm, caps;
};
DriverMajors parse_proc_devices(const std::string& text);

// The device nodes one advertised device needs: its GPU's /dev/nvidia<minor>
// and, for a MIG device (or a replica of one), its GPU instance's and compute
// instance's capability nodes. An error names what the node lacks.
[[nodiscard]] Result<std::vector<DeviceNode>> device_nodes(const Device& device, const DriverFiles& files);
// The control nodes every GPU container needs, as host paths.
std::vector<DeviceNode> control_nodes(const DriverFiles& files);

// The qualified CDI name a container is handed for an advertised device:
// "<vendor>/<class>=<name>", the name being the replica id for a shared
// replica, else the UUID or (deviceIDStrategy index) the index id.
std::string cdi_name(const Device& device, config::DeviceIdStrategy ids, const CdiNames& names);

struct CdiMount {
  std::string host_path;
  std::string container_path;
  bool read_only = true;
  friend bool operator==(const CdiMount&, const CdiMount&) = default;
};

// An OCI hook the runtime runs for the container (CDI specification,
// "containerEdits": hookName, path, args with args[0] the program, env).
struct CdiHook {
  std::string hook_name = "createContainer";
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  friend bool operator==(const CdiHook&, const CdiHook&) = default;
};

// The createContainer hooks every spec carries with `files.cdi_hook` set, as
// NVIDIA's generated specs have them (nvidia-cdi-hook): `create-symlinks`
// making libcuda.so beside libcuda.so.1, `enable-cuda-compat` with the
// driver's version where known, `update-ldcache` with the folder of every
// driver library the spec mounts, and `disable-device-node-modification`.
// None without the hook or libraries.
std::vector<CdiHook> driver_hooks(const DriverFiles& files);

struct CdiEdits {
  std::vector<std::string> env;
  std::vector<DeviceNode> device_nodes;
  std::vector<CdiMount> mounts;
  std::vector<CdiHook> hooks;
  friend bool operator==(const CdiEdits&, const CdiEdits&) = default;
};

struct CdiDevice {
  std::string name;
  std::map<std::string, std::string> annotations;
  CdiEdits edits;
  friend bool operator==(const CdiDevice&, const CdiDevice&) = default;
};

struct CdiSpec {
  std::string kind;       // "<vendor>/<class>"
  std::string file_name;  // "<vendor>-<class>.json", the file it is written to
  CdiEdits edits;         // applied once to a container that gets any of its devices
  std::vector<CdiDevice> devices;
  friend bool operator==(const CdiSpec&, const CdiSpec&) = default;
};

// For shared replicas: what the spec gives such a device beside its nodes
// (the quota library's directory and the preload list, both read-only).
struct CdiQuota {
  bool inject = false;
  std::string library_dir;   // host directory of libtessera-cuda.so
  std::string preload_file;  // host file naming it, mounted at /etc/ld.so.preload
};

// One spec per class with devices: every whole GPU under its UUID and its
// index, every MIG device under its UUID and "<gpu>:<index>", every shared
// replica under its id (nodes, the quota library and preload list, and its
// memory share as the annotation "tessera.dev/memory-limit"); the control
// nodes and driver files once per spec. Names are checked; a device whose
// nodes are missing is an error naming it.
[[nodiscard]] Result<std::vector<CdiSpec>> cdi_specs(std::span<const Resource> resources, const Inventory& inventory,
                                                     const DriverFiles& files, const CdiNames& names,
                                                     const CdiQuota& quota);

// The quota's driver backend (docs/design-memory-quotas.md §9):
// tessera-memory-hook, run by the container runtime as a createRuntime hook
// (on the host, with the container's host pid, once its cgroup exists) and
// again with --clear as a poststop hook, for a container with a memory
// quota, where a CDI device list strategy or the DRA driver hands the
// container CDI devices. Off while `path` is empty.
struct MemoryHook {
  std::string path;               // the hook's host path
  std::vector<std::string> args;  // after --limits FILE (--nvml LIBRARY, ...)
  std::vector<std::string> env;   // the hook's environment ("NAME=value")
  bool enabled() const { return !path.empty(); }
};

// The hooks for the container whose limits file is `limits_file` (a host
// path): createRuntime (sets the driver's limits), then poststop (--clear).
std::vector<CdiHook> memory_hooks(const MemoryHook& hook, const std::string& limits_file);

// A container's own spec carrying only that hook, for the device plugin
// (whose per-device specs cannot know a container's limits file): kind
// kQuotaCdiKind, written to "tessera.dev-quota_<key>.json", one device named
// by the container's ledger key; quota_cdi_name is its qualified name.
inline constexpr const char* kQuotaCdiKind = "tessera.dev/quota";
CdiSpec quota_cdi_spec(const std::string& key, const std::string& limits_file, const MemoryHook& hook);
std::string quota_cdi_file(const std::string& key);
std::string quota_cdi_name(const std::string& key);

// One device of a DRA claim: its ResourceSlice name, the physical device
// (for its nodes: the GPU, and a MIG device's instance ids) and what it gets
// beside its nodes.
struct ClaimCdiDevice {
  std::string name;
  Device device;
  CdiEdits edits;
};

// A claim's own spec (the DRA driver's; CDI's transient spec): kind
// "<vendor>/<class>", written to "<vendor>-<class>_<claim uid>.json", each
// device named "<claim uid>-<device name>" with its nodes and edits, the
// control nodes and driver files once. Names are checked; a device whose
// nodes are missing is an error naming it.
[[nodiscard]] Result<CdiSpec> claim_cdi_spec(const std::string& claim_uid, std::span<const ClaimCdiDevice> devices,
                                             const DriverFiles& files, const std::string& vendor, const std::string& cls);

}  // namespace tessera::sharing
