#include "dra/publisher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

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

Result<void> Publisher::publish(const PoolState& pool) {
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
  auto desired = build_slices(next, pool.counter_sets, pool.devices);
  if (synced_) {
    // Unchanged but for the generation: nothing to send.
    PoolSpec same = spec_;
    if (build_slices(same, pool.counter_sets, pool.devices) == last_desired_) return {};
  }
  spec_.generation = next.generation;
  synced_ = false;  // until every change below went through
  std::vector<json> now;
  for (const auto& change : diff_slices(existing, desired)) {
    switch (change.kind) {
      case SliceChange::Kind::create: {
        auto r = client_.request("POST", kSlices, change.object.dump());
        if (!r) return unexpected(api_error("cannot create ResourceSlice " + change.name, r.error()));
        now.push_back(*r);
        break;
      }
      case SliceChange::Kind::update: {
        auto r = client_.request("PUT", std::string(kSlices) + "/" + kube::escape_path_segment(change.name), change.object.dump());
        if (!r) return unexpected(api_error("cannot update ResourceSlice " + change.name, r.error()));
        now.push_back(*r);
        break;
      }
      case SliceChange::Kind::remove: {
        auto r = client_.request("DELETE", std::string(kSlices) + "/" + kube::escape_path_segment(change.name));
        if (!r && r.error().status != 404) return unexpected(api_error("cannot delete ResourceSlice " + change.name, r.error()));
        break;
      }
    }
  }
  last_ = std::move(now);
  PoolSpec same = spec_;
  last_desired_ = build_slices(same, pool.counter_sets, pool.devices);
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
