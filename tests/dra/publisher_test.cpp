// The publisher against an API server: the slices as built, and the guard
// for servers that drop the partitionable fields (Kubernetes 1.34 and 1.35
// without the DRAPartitionableDevices and DRAConsumableCapacity gates): it
// sees the fields gone from what the server stored, says so once (a warning
// and a Node Event), and from then on publishes only whole GPUs and existing
// MIG instances, one claim each.
#include "dra/publisher.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kube/fake_apiserver.hpp"
#include "kube/helpers.hpp"

namespace tessera::dra {
namespace {

using nlohmann::json;
using sharing::dra::Counter;
using sharing::dra::CounterSet;
using sharing::dra::Device;

Device device(const std::string& name, uint32_t gpu) {
  Device d;
  d.name = name;
  d.gpu = gpu;
  return d;
}

// GPU 0: MIG can be cut (a whole-GPU device and one placement, both consuming
// its counters, the placement shareable); GPU 1: one MIG instance that exists
// (fixed), and its whole-GPU device, which that instance is in the way of.
PoolState pool() {
  PoolState p;
  p.counter_sets = {CounterSet{"gpu-0-counter-set", {Counter{"memory-slice-0", 1}, Counter{"memory-slice-1", 1}}}};
  Device whole0 = device("gpu-0", 0);
  whole0.counter_set = "gpu-0-counter-set";
  whole0.consumes = {Counter{"memory-slice-0", 1}, Counter{"memory-slice-1", 1}};
  whole0.capacity = {{"memory", 80ull << 30}};
  Device placement = device("gpu-0-mig-1g10gb-19-0", 0);
  placement.mig = PlacedInstance{19, 0};
  placement.counter_set = "gpu-0-counter-set";
  placement.consumes = {Counter{"memory-slice-0", 1}};
  placement.capacity = {{"memory", 10ull << 30}, {"multiprocessors", 16}};
  placement.allow_multiple_allocations = true;
  Device whole1 = device("gpu-1", 1);
  whole1.capacity = {{"memory", 80ull << 30}};
  Device fixed = device("gpu-1-mig-3g40gb-9-4", 1);
  fixed.mig = PlacedInstance{9, 4};
  fixed.fixed = true;
  fixed.capacity = {{"memory", 40ull << 30}};
  p.devices = {whole0, placement, whole1, fixed};
  p.version = 1;
  return p;
}

std::set<std::string> published_devices(const kube::testing::FakeApiServer& api) {
  std::set<std::string> out;
  for (const auto& [name, slice] : api.resource_slices())
    for (const auto& d : slice["spec"].value("devices", json::array())) out.insert(d.value("name", ""));
  return out;
}

PoolSpec spec() {
  PoolSpec s;
  s.node = "gpu-node-1";
  s.node_uid = "uid-node-1";
  s.memory_shares = true;
  return s;
}

TEST(DraPublisher, AServerThatKeepsThePartitionableFieldsGetsEveryPlacement) {
  kube::testing::FakeApiServer api;
  auto client = kube::testing::client_for(api, kube::testing::insecure_http());
  Publisher publisher(*client, spec());
  ASSERT_TRUE(publisher.publish(pool()));
  EXPECT_TRUE(publisher.partitionable());
  EXPECT_EQ(published_devices(api), (std::set<std::string>{"gpu-0", "gpu-0-mig-1g10gb-19-0", "gpu-1",
                                                           "gpu-1-mig-3g40gb-9-4"}));
  bool counters = false;
  for (const auto& [name, slice] : api.resource_slices()) counters = counters || slice["spec"].contains("sharedCounters");
  EXPECT_TRUE(counters);
  EXPECT_TRUE(api.events().empty());
  auto has = [&](const std::string& line) { return publisher.metrics_text().find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("tessera_dra_partitionable_devices 1")) << publisher.metrics_text();
  EXPECT_TRUE(has("tessera_dra_resourceslice_publishes_total{result=\"ok\"} 1")) << publisher.metrics_text();
  EXPECT_TRUE(has("tessera_dra_resourceslice_in_sync 1")) << publisher.metrics_text();
  EXPECT_TRUE(has("tessera_dra_resourceslice_generation " + std::to_string(publisher.generation())));
  // An API server that fails: counted, out of sync until a publication goes through.
  auto next = pool();
  next.version = 2;
  next.devices.pop_back();
  api.fail_next(1, 403);  // e.g. its role lost the right to write slices
  EXPECT_FALSE(publisher.publish(next));
  EXPECT_TRUE(has("tessera_dra_resourceslice_publishes_total{result=\"error\"} 1")) << publisher.metrics_text();
  EXPECT_TRUE(has("tessera_dra_resourceslice_in_sync 0")) << publisher.metrics_text();
  ASSERT_TRUE(publisher.publish(next));
  EXPECT_TRUE(has("tessera_dra_resourceslice_in_sync 1")) << publisher.metrics_text();
  EXPECT_TRUE(has("tessera_dra_resourceslice_publishes_total{result=\"ok\"} 2")) << publisher.metrics_text();
}

TEST(DraPublisher, AServerThatDropsThemGetsWholeGpusAndExistingInstancesOnlyAndIsToldWhy) {
  kube::testing::FakeOptions options;
  options.drop_partitionable_fields = true;
  kube::testing::FakeApiServer api(options);
  auto client = kube::testing::client_for(api, kube::testing::insecure_http());
  Publisher publisher(*client, spec());
  ASSERT_TRUE(publisher.publish(pool()));
  EXPECT_FALSE(publisher.partitionable());
  EXPECT_NE(publisher.fallback_reason().find("spec.sharedCounters"), std::string::npos) << publisher.fallback_reason();
  EXPECT_NE(publisher.fallback_reason().find("DRAPartitionableDevices"), std::string::npos);
  // No placement to cut, and not the whole GPU an existing instance is in the way of.
  EXPECT_EQ(published_devices(api), (std::set<std::string>{"gpu-0", "gpu-1-mig-3g40gb-9-4"}));
  for (const auto& [name, slice] : api.resource_slices()) {
    EXPECT_FALSE(slice["spec"].contains("sharedCounters")) << name;
    for (const auto& d : slice["spec"].value("devices", json::array())) {
      EXPECT_FALSE(d.contains("consumesCounters")) << d.dump();
      EXPECT_FALSE(d.contains("allowMultipleAllocations")) << d.dump();
    }
  }
  const auto events = api.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "DRAPartitionableDevicesOff");
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "gpu-node-1");
  // Later changes stay in that mode, without another Event.
  auto next = pool();
  next.devices.pop_back();  // the existing instance went
  next.version = 2;
  ASSERT_TRUE(publisher.publish(next));
  EXPECT_EQ(published_devices(api), (std::set<std::string>{"gpu-0", "gpu-1"}));
  EXPECT_EQ(api.events().size(), 1u);
  EXPECT_NE(publisher.metrics_text().find("\ntessera_dra_partitionable_devices 0\n"), std::string::npos)
      << publisher.metrics_text();
}

// A 1.34 server with the gates on refuses the split layout (a device's
// counter set in another slice) with 422: the node is still served, as a
// server without the gates serves it, and told why once.
TEST(DraPublisher, AServerThatRefusesTheLayoutGetsWholeGpusAndExistingInstancesOnlyAndIsToldWhy) {
  kube::testing::FakeOptions options;
  options.counter_sets_in_the_devices_slice = true;
  kube::testing::FakeApiServer api(options);
  auto client = kube::testing::client_for(api, kube::testing::insecure_http());
  Publisher publisher(*client, spec());
  ASSERT_TRUE(publisher.publish(pool()));
  EXPECT_FALSE(publisher.partitionable());
  EXPECT_NE(publisher.fallback_reason().find("refused ResourceSlice gpu-node-1-gpu-nvidia-com-devices-00"), std::string::npos)
      << publisher.fallback_reason();
  EXPECT_NE(publisher.fallback_reason().find("must reference a counter set defined in the ResourceSlice"), std::string::npos)
      << publisher.fallback_reason();
  EXPECT_EQ(published_devices(api), (std::set<std::string>{"gpu-0", "gpu-1-mig-3g40gb-9-4"}));
  for (const auto& [name, slice] : api.resource_slices()) {
    EXPECT_FALSE(slice["spec"].contains("sharedCounters")) << name << ": the counters slice made before the refusal stays";
    for (const auto& d : slice["spec"].value("devices", json::array())) EXPECT_FALSE(d.contains("consumesCounters")) << d.dump();
  }
  ASSERT_EQ(api.events().size(), 1u);
  EXPECT_EQ(api.events()[0]["reason"], "DRAPartitionableDevicesOff");
  auto next = pool();
  next.version = 2;
  next.devices.pop_back();
  ASSERT_TRUE(publisher.publish(next));
  EXPECT_EQ(published_devices(api), (std::set<std::string>{"gpu-0", "gpu-1"}));
  EXPECT_EQ(api.events().size(), 1u);
}

TEST(DraPublisher, DroppedFieldsAreNamedByTheirPaths) {
  const json sent = {{"spec",
                      {{"sharedCounters", json::array({{{"name", "s"}}})},
                       {"devices", json::array({{{"name", "a"}, {"consumesCounters", json::array({1})}},
                                                {{"name", "b"}, {"allowMultipleAllocations", true}}})}}}};
  EXPECT_TRUE(dropped_fields(sent, sent).empty());
  const json stored = {{"spec", {{"devices", json::array({{{"name", "a"}}, {{"name", "b"}}})}}}};
  EXPECT_EQ(dropped_fields(sent, stored),
            (std::vector<std::string>{"spec.sharedCounters", "devices[0].consumesCounters",
                                      "devices[1].allowMultipleAllocations"}));
  EXPECT_EQ(dropped_fields(sent, json::object()).size(), 3u) << "an answer without a spec keeps nothing";
}

}  // namespace
}  // namespace tessera::dra
