// The ResourceSlices of a node's pool: within the API's limits, counters and
// devices apart, the model's order kept across slices (the scheduler reads a
// pool's slices by name), every slice of one generation, and the changes
// that bring the API's slices to them.
#include "dra/slices.hpp"

#include <gtest/gtest.h>

#include <set>

#include "core/catalog.hpp"

namespace tessera::dra {
namespace {

using nlohmann::json;
namespace sd = sharing::dra;

std::vector<sd::Gpu> gpus(const char* model, uint32_t n) {
  std::vector<sd::Gpu> out;
  for (uint32_t i = 0; i < n; ++i) {
    sd::Gpu g;
    g.index = g.minor = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.model = Catalog::builtin().find(model);
    g.product_name = g.model->nvml_name;
    g.memory_bytes = g.model->memory_mib << 20;
    g.mig_enabled = true;
    out.push_back(g);
  }
  return out;
}

TEST(DraSlices, EightGpusFitTheApisLimitsAndKeepTheModelsOrder) {
  auto g = gpus("A100-SXM4-80GB", 9);  // 9 counter sets: two counter slices
  std::vector<sd::CounterSet> sets;
  for (const auto& x : g) sets.push_back(*sd::counter_set(x));
  auto devices = sd::devices(g, std::vector<sd::Taken>(g.size()), {});
  PoolSpec pool{"gpu.nvidia.com", "node-a", "uid-1", 7, false, 1 << 20, {}};
  auto slices = build_slices(pool, sets, devices);
  size_t counter_slices = 0, device_total = 0;
  std::vector<std::string> names, order;
  for (const auto& s : slices) {
    const auto& spec = s["spec"];
    EXPECT_EQ(spec["pool"]["generation"], 7);
    EXPECT_EQ(spec["pool"]["resourceSliceCount"], slices.size());
    EXPECT_EQ(spec["nodeName"], "node-a");
    EXPECT_EQ(s["metadata"]["ownerReferences"][0]["uid"], "uid-1");
    EXPECT_NE(spec.contains("devices"), spec.contains("sharedCounters")) << "a slice holds devices or counters, never both";
    if (spec.contains("sharedCounters")) {
      ++counter_slices;
      EXPECT_LE(spec["sharedCounters"].size(), kMaxCounterSetsPerSlice);
      continue;
    }
    names.push_back(s["metadata"]["name"]);
    EXPECT_LE(spec["devices"].size(), kMaxDevicesPerSliceWithCounters);
    device_total += spec["devices"].size();
    for (const auto& d : spec["devices"]) {
      order.push_back(d["name"]);
      EXPECT_LE(d["attributes"].size() + d.value("capacity", json::object()).size(), 32u);  // per-device limit
      for (const auto& [k, v] : d["attributes"].items()) {
        (void)v;
        const auto id = k.substr(k.find('/') == std::string::npos ? 0 : k.find('/') + 1);
        EXPECT_LE(id.size(), 32u) << k;  // a qualified name's identifier
      }
    }
  }
  EXPECT_EQ(counter_slices, 2u);
  EXPECT_EQ(device_total, devices.size());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << "slice names must sort in the model's order";
  for (size_t i = 0; i < devices.size(); ++i) ASSERT_EQ(order[i], devices[i].name) << i;
  std::set<std::string> unique(order.begin(), order.end());
  EXPECT_EQ(unique.size(), order.size());
}

TEST(DraSlices, ADeviceAsTheApiWritesIt) {
  auto g = gpus("A100-SXM4-80GB", 1);
  sd::PoolOptions shares;
  shares.memory_shares = true;
  auto devices = sd::devices(g, {{}}, shares);
  const sd::Device* one = nullptr;
  for (const auto& d : devices)
    if (d.name == "gpu-0-mig-1g10gb-19-6") one = &d;
  ASSERT_TRUE(one);
  PoolSpec pool;
  pool.node = "n";
  auto j = device_json(*one, pool);
  EXPECT_EQ(j["attributes"]["type"], json({{"string", "mig"}}));
  EXPECT_EQ(j["attributes"]["cudaComputeCapability"], json({{"version", "8.0.0"}}));
  EXPECT_FALSE(j["attributes"].contains("driverVersion"));  // not known: not published
  EXPECT_EQ(j["attributes"]["minor"], json({{"int", 0}}));
  EXPECT_EQ(j["consumesCounters"][0]["counterSet"], "gpu-0-counter-set");
  EXPECT_EQ(j["consumesCounters"][0]["counters"]["memory-slice-6"]["value"], "1");
  EXPECT_TRUE(j["allowMultipleAllocations"].get<bool>());
  const auto& mem = j["capacity"]["memory"];
  EXPECT_EQ(mem["value"], "9728Mi");
  EXPECT_EQ(mem["requestPolicy"]["validRange"]["step"], "1Mi");
  EXPECT_EQ(mem["requestPolicy"]["default"], "9728Mi");
  // Every other capacity of a shareable device has a policy that takes none
  // of it: without one the allocator charges all of it, and a second claim
  // would never fit.
  for (const char* k : {"multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"}) {
    ASSERT_TRUE(j["capacity"].contains(k)) << k;
    EXPECT_EQ(j["capacity"][k]["requestPolicy"], json({{"default", "0"}, {"validValues", {"0"}}})) << k;
  }
  EXPECT_EQ(j["capacity"]["multiprocessors"]["value"], "14");
  // Without shares: plain capacities, no policy.
  const auto whole = sd::devices(g, {{}}, {});
  for (const auto& d : whole)
    if (d.name == "gpu-0-mig-1g10gb-19-6") {
      auto plain = device_json(d, pool);
      EXPECT_FALSE(plain.contains("allowMultipleAllocations"));
      for (const auto& [k, v] : plain["capacity"].items()) EXPECT_FALSE(v.contains("requestPolicy")) << k;
    }
}

// NVIDIA's consumable-shares modes, as its driver writes them: unlimited and
// counted shares take no memory unless asked (default and minimum 0); counted
// shares add a `shares` capacity, one per claim by default. Bad modes name
// what is accepted.
TEST(DraSlices, NvidiasConsumableSharesModes) {
  auto g = gpus("A100-SXM4-80GB", 1);
  sd::PoolOptions shareable;
  shareable.memory_shares = true;
  const auto devices = sd::devices(g, {{}}, shareable);
  const sd::Device* whole = nullptr;  // a MIG device, shareable
  for (const auto& d : devices)
    if (d.name == "gpu-0-mig-1g10gb-19-6") whole = &d;
  ASSERT_TRUE(whole);
  PoolSpec pool;
  pool.node = "n";
  pool.shares = *sd::parse_shares_mode("unlimited");
  auto j = device_json(*whole, pool);
  EXPECT_EQ(j["capacity"]["memory"]["requestPolicy"]["default"], "0");
  EXPECT_EQ(j["capacity"]["memory"]["requestPolicy"]["validRange"]["min"], "0");
  EXPECT_FALSE(j["capacity"].contains("shares"));
  pool.shares = *sd::parse_shares_mode("4");
  j = device_json(*whole, pool);
  EXPECT_EQ(j["capacity"]["memory"]["requestPolicy"]["default"], "0");
  EXPECT_EQ(j["capacity"]["shares"],
            json({{"value", "4"}, {"requestPolicy", {{"default", "1"}, {"validRange", {{"min", "1"}, {"max", "4"}, {"step", "1"}}}}}}));
  EXPECT_EQ(*sd::parse_shares_mode("memory"), sd::SharesMode{});
  for (const char* bad : {"", "0", "-1", "70000", "4.5", "Memory", "unlimited "}) {
    auto m = sd::parse_shares_mode(bad);
    ASSERT_FALSE(m) << bad;
    EXPECT_NE(m.error().message.find("memory, unlimited, or a number of shares per device from 1 to 65535"),
              std::string::npos);
  }
}

TEST(DraSlices, TheChangesReplaceWhatExistsCreateWhatIsNewAndDeleteTheRestLast) {
  PoolSpec pool;
  pool.node = "n";
  json a = {{"metadata", {{"name", "n-gpu-nvidia-com-devices-00"}, {"resourceVersion", "41"}}}, {"spec", json::object()}};
  json stale = {{"metadata", {{"name", "n-gpu-nvidia-com-devices-05"}}}, {"spec", json::object()}};
  auto desired = build_slices(pool, {}, {});
  ASSERT_EQ(desired.size(), 1u);  // a pool with nothing still says so
  EXPECT_EQ(desired[0]["spec"]["devices"], json::array());
  desired.push_back({{"metadata", {{"name", "n-gpu-nvidia-com-devices-01"}}}, {"spec", json::object()}});
  auto changes = diff_slices({a, stale}, desired);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].kind, SliceChange::Kind::update);
  EXPECT_EQ(changes[0].object["metadata"]["resourceVersion"], "41");
  EXPECT_EQ(changes[1].kind, SliceChange::Kind::create);
  EXPECT_EQ(changes[2].kind, SliceChange::Kind::remove);
  EXPECT_EQ(changes[2].name, "n-gpu-nvidia-com-devices-05");
}

TEST(DraSlices, ALongNodeNameStillMakesValidUniqueNames) {
  PoolSpec a, b;
  a.node = std::string(240, 'a') + "-1";
  b.node = std::string(240, 'a') + "-2";
  const auto na = slice_name(a, "devices", 0), nb = slice_name(b, "devices", 0);
  EXPECT_LE(na.size(), 253u);
  EXPECT_NE(na, nb);
  EXPECT_NE(na.back(), '-');
}

}  // namespace
}  // namespace tessera::dra
