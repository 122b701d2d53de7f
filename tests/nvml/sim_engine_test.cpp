// The simulator's own parts, without the C ABI: the node store shared by
// processes (here: separate stores, each with its own lock descriptor, which
// flock treats like separate processes) and the MIG rules on a Node.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <thread>

#include "mig_engine.hpp"
#include "node_store.hpp"
#include "support/run.hpp"

namespace tessera::sim {
namespace {

using namespace nvml::abi;

Node a100(uint32_t count = 1, bool mig = true) {
  auto node = make_node(NodeSpec{"A100-80GB", count, false, mig, 1});
  EXPECT_TRUE(node) << node.error().message;
  return *node;
}

TEST(SimNodeStore, WritesAreSeenByOtherStoresAndNeverLost) {
  testing::TempDir tmp;
  std::string dir = tmp.path() + "/node";
  ASSERT_TRUE(NodeStore::create(dir, a100()));
  // Four writers, each with its own store (and lock descriptor), bump a
  // counter 50 times: with a lost update the total would fall short.
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&] {
      auto store = NodeStore::open(dir);
      ASSERT_TRUE(store);
      for (int i = 0; i < 50; ++i) {
        auto r = (*store)->update([](Node& n) {
          ++n.next_uid;
          return true;
        });
        ASSERT_TRUE(r && *r);
      }
    });
  for (auto& t : writers) t.join();
  auto reader = NodeStore::open(dir);
  ASSERT_TRUE(reader);
  auto node = (*reader)->read();
  ASSERT_TRUE(node);
  EXPECT_EQ((*node)->next_uid, 1u + 200u);
  // A change made through another store is seen by a store that read before.
  auto other = NodeStore::open(dir);
  ASSERT_TRUE(other);
  ASSERT_TRUE((*other)->update([](Node& n) {
    n.driver_version = "999.1";
    return true;
  }));
  EXPECT_EQ((*(*reader)->read())->driver_version, "999.1");
  // An update that declines writes nothing.
  auto declined = (*other)->update([](Node& n) {
    n.driver_version = "0";
    return false;
  });
  ASSERT_TRUE(declined);
  EXPECT_FALSE(*declined);
  EXPECT_EQ((*(*reader)->read())->driver_version, "999.1");
}

TEST(SimNodeStore, RefusesToOverwriteAndNamesABrokenFile) {
  testing::TempDir tmp;
  std::string dir = tmp.path() + "/node";
  ASSERT_TRUE(NodeStore::create(dir, a100()));
  auto again = NodeStore::create(dir, a100());
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::conflict);
  std::ofstream(dir + "/node.json") << "{ not json";
  auto store = NodeStore::open(dir);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find(dir + "/node.json"), std::string::npos) << store.error().message;
  auto missing = NodeStore::open(tmp.path() + "/nowhere");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::not_found);
}

TEST(SimNodeSpec, MakesNodesFromTheCatalog) {
  auto node = make_node(NodeSpec{"H200", 8, true, false, 3});
  ASSERT_TRUE(node);
  EXPECT_EQ(node->gpus.size(), 8u);
  EXPECT_EQ(node->gpus[0].model, "H200-SXM-141GB");
  EXPECT_EQ(node->gpus[5].nvlink_peers.size(), 7u);
  EXPECT_NE(node->gpus[0].uuid, node->gpus[1].uuid);
  EXPECT_EQ(make_uuid("GPU", 3, 1, 2), make_uuid("GPU", 3, 1, 2));
  EXPECT_TRUE(std::regex_match(make_uuid("MIG", 3, 1, 2),
                               std::regex("MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")));
  auto unknown = make_node(NodeSpec{"Z9000", 1, false, false, 1});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, Errc::not_found);
  EXPECT_FALSE(make_node(NodeSpec{"H200", 0, false, false, 1}));
  EXPECT_FALSE(make_node(NodeSpec{"H200", 17, false, false, 1}));
  // The JSON form round-trips.
  auto back = node_from_json_text(to_json_text(*node));
  ASSERT_TRUE(back);
  EXPECT_EQ(to_json_text(*back), to_json_text(*node));
}

TEST(SimMigEngine, FollowsTheHardwareRules) {
  Node node = a100();
  uint64_t uid = 0;
  // 3g.40gb (id 9) at memory slice 4; not at 2 (not a placement of it).
  EXPECT_EQ(create_gpu_instance(node, 0, 9, Placement{2, 4}, uid), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(create_gpu_instance(node, 0, 9, Placement{4, 4}, uid), NVML_SUCCESS);
  uint64_t three = uid;
  // 4g.40gb (id 5) only starts at 0 and needs 4 compute slices: 3 + 4 = 7 fits,
  // but its memory slices 0-3 are free, so it is created.
  EXPECT_EQ(create_gpu_instance(node, 0, 5, Placement{0, 4}, uid), NVML_SUCCESS);
  // Now the GPU is full: a 1g.10gb (id 19) anywhere is a resource shortage.
  EXPECT_EQ(create_gpu_instance(node, 0, 19, std::nullopt, uid), NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(remaining_capacity(node, 0, 19), 0u);
  EXPECT_EQ(node.gpus[0].gpu_instances.size(), 2u);
  EXPECT_EQ(node.gpus[0].gpu_instances[0].id, 1u);
  EXPECT_EQ(node.gpus[0].gpu_instances[1].id, 2u);

  uint64_t ci = 0;
  EXPECT_EQ(create_compute_instance(node, 0, three, 0, ci), NVML_SUCCESS);  // 1c.3g.40gb
  EXPECT_EQ(remaining_compute_capacity(node, 0, three, 0), 2u);
  EXPECT_EQ(create_compute_instance(node, 0, three, 2, uid), NVML_ERROR_INSUFFICIENT_RESOURCES);  // 3g needs all 3
  EXPECT_EQ(destroy_gpu_instance(node, 0, three), NVML_ERROR_IN_USE);
  node.processes.push_back(SimProcess{42, 0, 1, 0, 1 << 20});
  EXPECT_EQ(destroy_compute_instance(node, 0, ci), NVML_ERROR_IN_USE);
  node.processes.clear();
  EXPECT_EQ(destroy_compute_instance(node, 0, ci), NVML_SUCCESS);
  EXPECT_EQ(destroy_gpu_instance(node, 0, three), NVML_SUCCESS);
  EXPECT_EQ(remaining_capacity(node, 0, 19), 3u);  // slices 4, 5, 6
  // Every change was announced as a MIG config change event.
  EXPECT_EQ(node.events.size(), 5u);
  EXPECT_EQ(node.events.back().type, nvmlEventMigConfigChange);
}

TEST(SimMigEngine, MigModeWaitsForIdleGpus) {
  Node node = a100(2, false);
  uint64_t uid = 0;
  EXPECT_EQ(create_gpu_instance(node, 0, 19, std::nullopt, uid), NVML_ERROR_NOT_SUPPORTED);
  node.processes.push_back(SimProcess{7, 1, -1, -1, 1 << 30});
  Return activation = NVML_SUCCESS;
  EXPECT_EQ(set_mig_mode(node, 1, true, activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_IN_USE);
  EXPECT_FALSE(node.gpus[1].mig_current);
  EXPECT_TRUE(node.gpus[1].mig_pending);
  EXPECT_EQ(reset_gpu(node, 1), NVML_ERROR_IN_USE);
  node.processes.clear();
  EXPECT_EQ(reset_gpu(node, 1), NVML_SUCCESS);
  EXPECT_TRUE(node.gpus[1].mig_current);
  // Disabling with instances left is refused.
  EXPECT_EQ(create_gpu_instance(node, 1, 19, std::nullopt, uid), NVML_SUCCESS);
  EXPECT_EQ(set_mig_mode(node, 1, false, activation), NVML_ERROR_IN_USE);
}

}  // namespace
}  // namespace tessera::sim
