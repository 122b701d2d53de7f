#include "sharing/health.hpp"

namespace tessera::sharing {

bool HealthTracker::critical(const HealthEvent& event) const {
  switch (event.kind) {
    case HealthEvent::Kind::xid: return !policy_.ignored_xids.contains(event.xid);
    case HealthEvent::Kind::double_bit_ecc: return true;
    case HealthEvent::Kind::single_bit_ecc: return false;  // corrected by the hardware
  }
  return false;
}

bool HealthTracker::record(const HealthEvent& event) {
  if (!critical(event)) return false;
  Key key{event.gpu_uuid, event.gi_id.value_or(kAll), event.gi_id ? event.ci_id.value_or(kAll) : kAll};
  last_failure_[key] = event.at;
  return true;
}

bool HealthTracker::recover(Clock::time_point now) {
  return std::erase_if(last_failure_, [&](const auto& kv) { return now - kv.second >= policy_.recovery; }) > 0;
}

bool HealthTracker::healthy(const Device& d) const {
  if (last_failure_.contains(Key{d.gpu_uuid, kAll, kAll})) return false;
  if (!d.is_mig) {
    // A whole GPU is unhealthy when any part of it failed.
    auto it = last_failure_.lower_bound(Key{d.gpu_uuid, 0, 0});
    return it == last_failure_.end() || std::get<0>(it->first) != d.gpu_uuid;
  }
  return !last_failure_.contains(Key{d.gpu_uuid, d.gi_id, kAll}) &&
         !last_failure_.contains(Key{d.gpu_uuid, d.gi_id, d.ci_id});
}

}  // namespace tessera::sharing
