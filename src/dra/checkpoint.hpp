// The DRA driver's node-local record of what it prepared and what it cut:
// claims (with their devices and CDI names) and the MIG instances it created
// for them. Written before every change and after it, atomically (a
// temporary file renamed over the old one), so after a crash it never
// claims more than what may exist: an instance is "creating" from before
// the driver asks NVML for it until its ids are known, and "destroying"
// from before it is destroyed until it is gone. At start the driver reads
// it, adopts the instances it names and reports everything else it finds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace tessera::dra {

struct CheckpointInstance {
  std::string gpu_uuid;
  std::string profile;  // "1g.10gb"
  uint32_t start = 0;
  enum class State { creating, ready, destroying } state = State::creating;
  uint32_t gi_id = 0;   // known once ready
  uint32_t ci_id = 0;
  std::string uuid;     // the MIG device's
  std::vector<std::string> users;       // claim UIDs
  friend bool operator==(const CheckpointInstance&, const CheckpointInstance&) = default;
};

struct CheckpointDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;  // the ResourceSlice device name
  std::string gpu_uuid;
  std::string uuid;    // the GPU's or MIG device's
  std::optional<std::string> share_id;
  std::optional<uint64_t> memory_bytes;  // a memory share
  bool mps = false;
  bool admin = false;  // admin access: no user of the device, nothing cut or set for it
  // MPS limits its daemon holds for the claim's clients (NVIDIA's MpsConfig,
  // or a memory share's size): pinned device memory, active thread percentage.
  std::optional<uint64_t> mps_pinned_bytes;
  std::optional<uint32_t> mps_thread_percentage;
  bool mps_multi_user = false;  // MpsConfig.multiUser: its daemon runs with -M
  std::optional<uint32_t> timeslice;  // the time-slice level its config asks of the GPU (claim.hpp)
  std::vector<std::string> cdi_ids;
  friend bool operator==(const CheckpointDevice&, const CheckpointDevice&) = default;
};

struct CheckpointClaim {
  std::string claim_namespace;
  std::string name;
  enum class State { preparing, prepared, unpreparing } state = State::preparing;
  std::vector<CheckpointDevice> devices;
  friend bool operator==(const CheckpointClaim&, const CheckpointClaim&) = default;
};

struct Checkpoint {
  std::string driver;
  std::string node;
  // The kernel's boot id when it was written (/proc/sys/kernel/random/boot_id):
  // what it records as prepared does not outlive a reboot (the MIG instances,
  // CDI specs on a tmpfs, MPS daemons and time-slice settings are gone), so a
  // checkpoint of another boot is started over. Empty: not known.
  std::string boot_id;
  std::map<std::string, CheckpointClaim> claims;         // by claim UID
  std::map<std::string, CheckpointInstance> instances;   // by ResourceSlice device name
  // By GPU UUID: the time-slice level this driver set there (and must put
  // back to 0, the default, when no claim asks for it any more).
  std::map<std::string, uint32_t> timeslices;
  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};

class CheckpointFile {
 public:
  explicit CheckpointFile(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // No file yet: an empty checkpoint. A file that cannot be read or parsed
  // is an error naming it and why (the driver refuses to start rather than
  // forget what it cut).
  [[nodiscard]] Result<Checkpoint> load() const;
  [[nodiscard]] Result<void> save(const Checkpoint& checkpoint) const;

 private:
  std::string path_;
};

// The default state directory: tessera's own, <plugin_dir>/tessera. The
// plugin's directory's checkpoint.json is NVIDIA's DRA driver's where that
// ran on the node (k8s-dra-driver-gpu keeps its checkpoint there): never read
// as tessera's, left alone, said at info. tessera's own checkpoint from
// before it had a directory of its own (that path, tessera's format,
// `driver`'s) moves there once. Where it cannot be moved, the plugin's
// directory, so that what tessera cut is not forgotten.
[[nodiscard]] std::string default_state_dir(const std::string& plugin_dir, const std::string& driver);

}  // namespace tessera::dra
