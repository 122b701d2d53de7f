#include "dra/slices.hpp"

#include <cstdio>
#include <map>
#include <set>

namespace tessera::dra {
namespace {

using nlohmann::json;
using sharing::dra::Attribute;
using sharing::dra::Version;

// FNV-1a 64, for names cut to fit.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

json attribute_json(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) return {{"string", v}};
        else if constexpr (std::is_same_v<T, int64_t>) return {{"int", v}};
        else if constexpr (std::is_same_v<T, bool>) return {{"bool", v}};
        else return {{"version", v.value}};
      },
      a);
}

json counters_json(const std::vector<sharing::dra::Counter>& counters) {
  json out = json::object();
  for (const auto& c : counters) out[c.name] = {{"value", std::to_string(c.value)}};
  return out;
}

json slice_skeleton(const PoolSpec& pool, const std::string& name, size_t count) {
  json s = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", name}, {"labels", {{"app.kubernetes.io/managed-by", "tessera"}}}}},
            {"spec",
             {{"driver", pool.driver},
              {"nodeName", pool.node},
              {"pool", {{"name", pool.node}, {"generation", pool.generation}, {"resourceSliceCount", count}}}}}};
  if (!pool.node_uid.empty())
    s["metadata"]["ownerReferences"] = json::array(
        {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", pool.node}, {"uid", pool.node_uid}, {"controller", true}}});
  return s;
}

}  // namespace

std::string quantity(uint64_t value) {
  if (value != 0 && value % (1ull << 20) == 0) return std::to_string(value >> 20) + "Mi";
  return std::to_string(value);
}

std::string slice_name(const PoolSpec& pool, const std::string& kind, size_t index) {
  char idx[16];
  std::snprintf(idx, sizeof idx, "%02zu", index);
  std::string driver;
  for (char c : pool.driver) driver += (c == '.' ? '-' : c);
  std::string name = pool.node + "-" + driver + "-" + kind + "-" + idx;
  if (name.size() <= 253) return name;
  char hash[20];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(pool.node)));
  std::string tail = "-" + std::string(hash) + "-" + driver + "-" + kind + "-" + idx;
  std::string head = pool.node.substr(0, 253 - std::min<size_t>(tail.size(), 253));
  while (!head.empty() && (head.back() == '-' || head.back() == '.')) head.pop_back();
  return head + tail;
}

json device_json(const sharing::dra::Device& d, const PoolSpec& pool) {
  json dev = {{"name", d.name}};
  json attrs = json::object();
  for (const auto& [k, v] : d.attributes) attrs[k] = attribute_json(v);
  dev["attributes"] = attrs;
  json cap = json::object();
  for (const auto& [k, v] : d.capacity) {
    if (k == "memory" && d.allow_multiple_allocations) {
      // Consumable capacity: claims ask for a share in steps of `step`. By
      // default the whole device (NVIDIA's "memory" shares), or nothing
      // ("unlimited" and counted shares, where a claim may also ask for 0).
      using Kind = sharing::dra::SharesMode::Kind;
      const uint64_t step = pool.share_step_bytes ? pool.share_step_bytes : 1;
      const uint64_t max = v / step * step;
      const bool whole = pool.shares.kind == Kind::memory;
      cap[k] = {{"value", quantity(max)},
                {"requestPolicy",
                 {{"default", quantity(whole ? max : 0)},
                  {"validRange", {{"min", quantity(whole ? step : 0)}, {"max", quantity(max)}, {"step", quantity(step)}}}}}};
      if (pool.shares.kind == Kind::count) {
        const uint64_t n = pool.shares.count;
        cap["shares"] = {{"value", quantity(n)},
                         {"requestPolicy",
                          {{"default", "1"}, {"validRange", {{"min", "1"}, {"max", quantity(n)}, {"step", "1"}}}}}};
      }
    } else if (d.allow_multiple_allocations) {
      // Every other capacity of a shareable device (a MIG device's
      // multiprocessors and engines): the allocator charges a capacity
      // without a request policy in full, so the first claim would take the
      // instance (KEP-5075; resource.k8s.io/v1 CapacityRequestPolicy). A
      // share takes none of it: its claims share the instance's SMs and
      // engines by time slicing or MPS, and tessera cannot reserve a part of
      // them, so the only valid amount is 0. Selectors still read the value.
      cap[k] = {{"value", quantity(v)}, {"requestPolicy", {{"default", "0"}, {"validValues", json::array({"0"})}}}};
    } else {
      cap[k] = {{"value", quantity(v)}};
    }
  }
  if (!cap.empty()) dev["capacity"] = cap;
  if (!d.counter_set.empty() && !d.consumes.empty())
    dev["consumesCounters"] = json::array({{{"counterSet", d.counter_set}, {"counters", counters_json(d.consumes)}}});
  if (d.allow_multiple_allocations) dev["allowMultipleAllocations"] = true;
  if (!d.taints.empty()) {
    json taints = json::array();
    for (const auto& t : d.taints) {
      json tj = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) tj["value"] = t.value;
      taints.push_back(tj);
    }
    dev["taints"] = taints;
  }
  return dev;
}

std::vector<json> build_slices(const PoolSpec& pool, const std::vector<sharing::dra::CounterSet>& counter_sets,
                               const std::vector<sharing::dra::Device>& devices) {
  const size_t counter_slices = (counter_sets.size() + kMaxCounterSetsPerSlice - 1) / kMaxCounterSetsPerSlice;
  size_t device_slices = (devices.size() + kMaxDevicesPerSliceWithCounters - 1) / kMaxDevicesPerSliceWithCounters;
  // A node without devices still publishes one empty slice: the pool exists
  // and says so (the scheduler then knows there is nothing here).
  if (device_slices == 0 && counter_slices == 0) device_slices = 1;
  const size_t count = counter_slices + device_slices;
  std::vector<json> out;
  for (size_t i = 0; i < counter_slices; ++i) {
    json s = slice_skeleton(pool, slice_name(pool, "counters", i), count);
    json sets = json::array();
    for (size_t k = i * kMaxCounterSetsPerSlice; k < std::min(counter_sets.size(), (i + 1) * kMaxCounterSetsPerSlice); ++k)
      sets.push_back({{"name", counter_sets[k].name}, {"counters", counters_json(counter_sets[k].counters)}});
    s["spec"]["sharedCounters"] = sets;
    out.push_back(std::move(s));
  }
  for (size_t i = 0; i < device_slices; ++i) {
    json s = slice_skeleton(pool, slice_name(pool, "devices", i), count);
    json devs = json::array();
    for (size_t k = i * kMaxDevicesPerSliceWithCounters;
         k < std::min(devices.size(), (i + 1) * kMaxDevicesPerSliceWithCounters); ++k)
      devs.push_back(device_json(devices[k], pool));
    s["spec"]["devices"] = devs;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<SliceChange> diff_slices(const std::vector<json>& existing, const std::vector<json>& desired) {
  std::map<std::string, const json*> have;
  for (const auto& e : existing) {
    if (!e.contains("metadata") || !e["metadata"].contains("name")) continue;
    have[e["metadata"]["name"].get<std::string>()] = &e;
  }
  std::vector<SliceChange> out;
  std::set<std::string> wanted;
  for (const auto& d : desired) {
    const std::string name = d["metadata"]["name"];
    wanted.insert(name);
    auto it = have.find(name);
    if (it == have.end()) {
      out.push_back({SliceChange::Kind::create, name, d});
      continue;
    }
    const json& e = *it->second;
    json obj = d;
    if (e["metadata"].contains("resourceVersion")) obj["metadata"]["resourceVersion"] = e["metadata"]["resourceVersion"];
    out.push_back({SliceChange::Kind::update, name, std::move(obj)});
  }
  for (const auto& [name, e] : have)
    if (!wanted.count(name)) out.push_back({SliceChange::Kind::remove, name, *e});
  return out;
}

}  // namespace tessera::dra
