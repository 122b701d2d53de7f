#include "dra/publisher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "core/text.hpp"
#include "sharing/dra.hpp"

namespace tessera::dra {
namespace {

using nlohmann::json;

constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices";

Error api_error(const std::string& what, const kube::ApiError& e) {
  return Error{Errc::io, what + ": " + e.message};
}

}  // namespace

Result<std::vector<json>> Publisher::list() {
  const std::string selector = "spec.nodeName=" + spec_.node + ",spec.driver=" + spec_.driver;
  auto r = client_.request("GET", std::string(kSlices) + "?fieldSelector=" + kube::escape_path_segment(selector));
  if (!r) return unexpected(api_error("cannot list the ResourceSlices of node " + spec_.node, r.error()));
  std::vector<json> out;
  for (const auto& item : r->value("items", json::array())) out.push_back(item);
  return out;
}

std::vector<std::string> dropped_fields(const json& sent, const json& stored) {
  std::vector<std::string> out;
  const json& s = sent.contains("spec") ? sent["spec"] : json::object();
  const json& t = stored.contains("spec") && stored["spec"].is_object() ? stored["spec"] : json::object();
  if (s.contains("sharedCounters") && !s["sharedCounters"].empty() &&
      (!t.contains("sharedCounters") || t["sharedCounters"].empty()))
    out.push_back("spec.sharedCounters");
  const json none = json::array();
  const json& sd = s.contains("devices") ? s["devices"] : none;
  const json& td = t.contains("devices") && t["devices"].is_array() ? t["devices"] : none;
  for (size_t i = 0; i < sd.size(); ++i) {
    const json& kept = i < td.size() ? td[i] : json::object();
    for (const char* field : {"consumesCounters", "allowMultipleAllocations"})
      if (sd[i].contains(field) && !kept.contains(field)) out.push_back("devices[" + std::to_string(i) + "]." + field);
  }
  return out;
}

void Publisher::fall_back(const std::string& why) {
  partitionable_ = false;
  fallback_reason_ = why;
  spdlog::warn("{}", why);
  if (auto r = client_.create_node_event(spec_.node, spec_.node_uid, "Warning", "DRAPartitionableDevicesOff", why); !r)
    spdlog::warn("cannot record an Event on Node {}: {}", spec_.node, r.error().message);
}

namespace {
bool carries_partitions(const json& slice) {
  if (!slice.contains("spec")) return false;
  const json& s = slice["spec"];
  if (s.contains("sharedCounters")) return true;
  for (const auto& d : s.value("devices", json::array()))
    if (d.contains("consumesCounters") || d.contains("allowMultipleAllocations")) return true;
  return false;
}
}  // namespace

// A server that refuses the partitionable layout outright (422 Invalid): a
// 1.34 server with the gates on wants a device's counter set in the device's
// own slice, where 1.35 and later want it in a slice of its own. Rather than
// no slices at all, the node is served as a server without the gates serves it.
bool Publisher::refused_partitions(const SliceChange& change, const kube::ApiError& error) {
  if (!partitionable_ || error.status != 422 || !carries_partitions(change.object)) return false;
  fall_back("the API server refused ResourceSlice " + change.name + " (" + excerpt(error.message, 400) +
            "): it does not take tessera's partitionable layout (counter sets in slices of their own, as Kubernetes "
            "1.35 and later have them; 1.34 wants them in the devices' slice). Publishing only whole GPUs and existing "
            "MIG instances, one claim each, from now on; MIG instances are not cut per claim and memory shares are off "
            "(docs/design-dra.md, \"Kubernetes versions\")");
  synced_ = false;
  return true;
}

Result<void> Publisher::publish(const PoolState& pool) {
  auto r = publish_pool(pool);
  std::lock_guard lock(stats_mutex_);
  ++(r ? stats_.ok : stats_.failed);
  stats_.generation = spec_.generation;
  stats_.partitionable = partitionable_;
  stats_.in_sync = bool(r);
  return r;
}

std::string Publisher::metrics_text() const {
  std::lock_guard lock(stats_mutex_);
  std::ostringstream out;
  out << "# HELP tessera_dra_resourceslice_publishes_total Publications of this node's ResourceSlices, by result (an "
         "unchanged pool counts as ok).\n# TYPE tessera_dra_resourceslice_publishes_total counter\n"
      << "tessera_dra_resourceslice_publishes_total{result=\"ok\"} " << stats_.ok << "\n"
      << "tessera_dra_resourceslice_publishes_total{result=\"error\"} " << stats_.failed << "\n"
      << "# HELP tessera_dra_resourceslice_in_sync 1 when the API server holds the node's pool as the driver sees it, 0 "
         "while a publication is being retried.\n# TYPE tessera_dra_resourceslice_in_sync gauge\n"
      << "tessera_dra_resourceslice_in_sync " << (stats_.in_sync ? 1 : 0) << "\n"
      << "# HELP tessera_dra_resourceslice_generation The pool generation last published.\n"
         "# TYPE tessera_dra_resourceslice_generation gauge\n"
      << "tessera_dra_resourceslice_generation " << stats_.generation << "\n"
      << "# HELP tessera_dra_partitionable_devices 1 while the slices offer MIG placements and memory shares, 0 once the "
         "API server dropped or refused them (whole GPUs and existing instances only; a Node Event says why).\n"
         "# TYPE tessera_dra_partitionable_devices gauge\n"
      << "tessera_dra_partitionable_devices " << (stats_.partitionable ? 1 : 0) << "\n";
  return out.str();
}

Result<void> Publisher::publish_pool(const PoolState& pool) {
  if (!partitionable_) return publish_devices({}, sharing::dra::without_partitions(pool.devices));
  auto r = publish_devices(pool.counter_sets, pool.devices);
  if (!r || partitionable_) return r;
  // The server dropped the partitionable fields: what it stored must not stay.
  return publish_devices({}, sharing::dra::without_partitions(pool.devices));
}

Result<void> Publisher::publish_devices(const std::vector<sharing::dra::CounterSet>& counter_sets,
                                        const std::vector<sharing::dra::Device>& devices) {
  std::vector<json> existing;
  if (!synced_) {
    auto have = list();
    if (!have) return unexpected(have.error());
    existing = std::move(*have);
    for (const auto& s : existing)
      spec_.generation = std::max<int64_t>(spec_.generation, s["spec"]["pool"].value("generation", int64_t{0}));
  } else {
    existing = last_;
  }
  PoolSpec next = spec_;
  next.generation = spec_.generation + 1;
  auto desired = build_slices(next, counter_sets, devices);
  if (synced_) {
    // Unchanged but for the generation: nothing to send.
    PoolSpec same = spec_;
    if (build_slices(same, counter_sets, devices) == last_desired_) return {};
  }
  spec_.generation = next.generation;
  synced_ = false;  // until every change below went through
  std::vector<json> now;
  for (const auto& change : diff_slices(existing, desired)) {
    std::vector<std::string> dropped;
    switch (change.kind) {
      case SliceChange::Kind::create: {
        auto r = client_.request("POST", kSlices, change.object.dump());
        if (!r && refused_partitions(change, r.error())) return {};
        if (!r) return unexpected(api_error("cannot create ResourceSlice " + change.name, r.error()));
        dropped = dropped_fields(change.object, *r);
        now.push_back(*r);
        break;
      }
      case SliceChange::Kind::update: {
        auto r = client_.request("PUT", std::string(kSlices) + "/" + kube::escape_path_segment(change.name), change.object.dump());
        if (!r && refused_partitions(change, r.error())) return {};
        if (!r) return unexpected(api_error("cannot update ResourceSlice " + change.name, r.error()));
        dropped = dropped_fields(change.object, *r);
        now.push_back(*r);
        break;
      }
      case SliceChange::Kind::remove: {
        auto r = client_.request("DELETE", std::string(kSlices) + "/" + kube::escape_path_segment(change.name));
        if (!r && r.error().status != 404) return unexpected(api_error("cannot delete ResourceSlice " + change.name, r.error()));
        break;
      }
    }
    if (!dropped.empty() && partitionable_) {
      fall_back("the API server dropped " + join(dropped, ", ") + " from ResourceSlice " + change.name +
                ": it does not serve partitionable devices (Kubernetes 1.34 and 1.35 need the DRAPartitionableDevices "
                "and DRAConsumableCapacity feature gates; 1.36 has them on), so every MIG placement would look "
                "independent and the scheduler could hand out overlapping ones. Publishing only whole GPUs and "
                "existing MIG instances, one claim each, from now on; MIG instances are not cut per claim and memory "
                "shares are off (docs/design-dra.md, \"Kubernetes versions\")");
      synced_ = false;
      return {};
    }
  }
  last_ = std::move(now);
  PoolSpec same = spec_;
  last_desired_ = build_slices(same, counter_sets, devices);
  synced_ = true;
  spdlog::debug("published {} ResourceSlices for node {} (generation {})", last_.size(), spec_.node, spec_.generation);
  return {};
}

Result<void> Publisher::remove_all() {
  auto have = list();
  if (!have) return unexpected(have.error());
  for (const auto& s : *have) {
    const std::string name = s["metadata"].value("name", "");
    auto r = client_.request("DELETE", std::string(kSlices) + "/" + kube::escape_path_segment(name));
    if (!r && r.error().status != 404) return unexpected(api_error("cannot delete ResourceSlice " + name, r.error()));
  }
  synced_ = false;
  last_.clear();
  return {};
}

Result<json> ApiClaimSource::get_claim(const std::string& claim_namespace, const std::string& name) {
  auto r = client_.request("GET", "/apis/resource.k8s.io/v1/namespaces/" + kube::escape_path_segment(claim_namespace) +
                                      "/resourceclaims/" + kube::escape_path_segment(name));
  if (!r) return unexpected(Error{r.error().status == 404 ? Errc::not_found : Errc::io, r.error().message});
  return *r;
}

}  // namespace tessera::dra
