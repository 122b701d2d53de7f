// Device health from NVML events. Critical XIDs and double-bit ECC errors
// make a GPU (or one MIG device, when the event names its instance)
// Unhealthy; so does an NVML event watch that fails (the driver does not say
// which GPU, so every GPU it watched). Recovery is earned: a device comes
// back Healthy only when no new critical event arrived for `recovery` AND its
// GPU answers again (the probe reads it). An XID 79 ("fallen off the bus")
// followed by silence stays Unhealthy until the GPU responds. NVIDIA's
// plugin keeps devices Unhealthy until it restarts (k8s-device-plugin issues
// #234, #1014): a complaint of its users.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "sharing/resources.hpp"

namespace tessera::sharing {

using Clock = std::chrono::steady_clock;

struct HealthEvent {
  // driver_error: the NVML event watch itself failed (GPU_IS_LOST, UNKNOWN, ...).
  enum class Kind { xid, double_bit_ecc, single_bit_ecc, driver_error };
  Kind kind = Kind::xid;
  uint64_t xid = 0;
  std::string gpu_uuid;
  std::optional<uint32_t> gi_id;  // set when the event belongs to one MIG device
  std::optional<uint32_t> ci_id;
  Clock::time_point at{};
};

struct HealthPolicy {
  // XIDs NVIDIA's plugin treats as application errors (internal/rm/health.go).
  std::set<uint64_t> ignored_xids{13, 31, 43, 45, 68, 109};
  std::chrono::milliseconds recovery{std::chrono::seconds(60)};
  // How often a quiet but failed GPU is asked whether it answers again.
  std::chrono::milliseconds probe_interval{std::chrono::seconds(1)};
};

// Whether a GPU answers (e.g. its UUID and memory can be read).
using GpuProbe = std::function<bool(const std::string& gpu_uuid)>;

class HealthTracker {
 public:
  explicit HealthTracker(HealthPolicy policy = {}) : policy_(std::move(policy)) {}

  // Returns true when the event made a device Unhealthy (or extended it).
  bool record(const HealthEvent& event);
  // Failures quiet for the recovery period whose GPU answers `probe` are
  // cleared; true when any was. A GPU that does not answer is asked again
  // after probe_interval, not on every call.
  bool recover(Clock::time_point now, const GpuProbe& probe);
  bool healthy(const Device& device) const;
  bool critical(const HealthEvent& event) const;
  // GPU or MIG devices whose sharing service is up: an MPS share is Healthy
  // only while its device's control daemon answers, so until it is named
  // here. True when the set changed.
  bool set_services_up(std::set<std::string> uuids);
  bool service_up(const std::string& uuid) const { return services_up_.contains(uuid); }
  // GPU or MIG devices taken out of service on purpose (a MIG change is about
  // to destroy them): every device on them is Unhealthy, so the kubelet
  // places nothing new there. True when the set changed.
  bool set_withdrawn(std::set<std::string> uuids);
  const std::set<std::string>& withdrawn() const { return withdrawn_; }
  const HealthPolicy& policy() const { return policy_; }

 private:
  // (gpu uuid, gi, ci); gi = ci = ~0u for the whole GPU.
  using Key = std::tuple<std::string, uint32_t, uint32_t>;
  static constexpr uint32_t kAll = ~0u;
  HealthPolicy policy_;
  std::map<Key, Clock::time_point> last_failure_;
  std::map<std::string, Clock::time_point> next_probe_;  // GPUs that did not answer
  std::set<std::string> services_up_;
  std::set<std::string> withdrawn_;
};

}  // namespace tessera::sharing
