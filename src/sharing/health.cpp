#include "sharing/health.hpp"

namespace tessera::sharing {

bool HealthTracker::critical(const HealthEvent& event) const {
  switch (event.kind) {
    case HealthEvent::Kind::xid: return !policy_.ignored_xids.contains(event.xid);
    case HealthEvent::Kind::double_bit_ecc: return true;
    case HealthEvent::Kind::single_bit_ecc: return false;  // corrected by the hardware
    case HealthEvent::Kind::driver_error: return true;
  }
  return false;
}

bool HealthTracker::record(const HealthEvent& event) {
  if (!critical(event)) return false;
  Key key{event.gpu_uuid, event.gi_id.value_or(kAll), event.gi_id ? event.ci_id.value_or(kAll) : kAll};
  auto& last = last_failure_[key];
  last = std::max(last, event.at);
  return true;
}

bool HealthTracker::recover(Clock::time_point now, const GpuProbe& probe) {
  // Each GPU with a quiet failure is probed at most once per call.
  std::map<std::string, bool> answered;
  for (const auto& [key, at] : last_failure_) {
    const auto& gpu = std::get<0>(key);
    if (now - at < policy_.recovery || answered.contains(gpu)) continue;
    if (auto wait = next_probe_.find(gpu); wait != next_probe_.end() && now < wait->second) {
      answered[gpu] = false;
      continue;
    }
    bool ok = probe(gpu);
    answered[gpu] = ok;
    if (ok)
      next_probe_.erase(gpu);
    else
      next_probe_[gpu] = now + policy_.probe_interval;
  }
  return std::erase_if(last_failure_, [&](const auto& kv) {
           auto it = answered.find(std::get<0>(kv.first));
           return it != answered.end() && it->second && now - kv.second >= policy_.recovery;
         }) > 0;
}

bool HealthTracker::healthy(const Device& d) const {
  if (withdrawn_.contains(d.physical_uuid) || withdrawn_.contains(d.gpu_uuid)) return false;
  if (last_failure_.contains(Key{d.gpu_uuid, kAll, kAll})) return false;
  if (!d.is_mig) {
    // A whole GPU is unhealthy when any part of it failed.
    auto it = last_failure_.lower_bound(Key{d.gpu_uuid, 0, 0});
    return it == last_failure_.end() || std::get<0>(it->first) != d.gpu_uuid;
  }
  return !last_failure_.contains(Key{d.gpu_uuid, d.gi_id, kAll}) &&
         !last_failure_.contains(Key{d.gpu_uuid, d.gi_id, d.ci_id});
}

bool HealthTracker::set_withdrawn(std::set<std::string> uuids) {
  if (uuids == withdrawn_) return false;
  withdrawn_ = std::move(uuids);
  return true;
}

bool HealthTracker::set_services_up(std::set<std::string> uuids) {
  if (uuids == services_up_) return false;
  services_up_ = std::move(uuids);
  return true;
}

}  // namespace tessera::sharing
