// Label-driven MIG changes (agent::MigController) in process, over a
// simulated node opened through the real NVML loader. The API server and the
// kubelet's pod list are fakes that keep their own rules: an eviction a
// budget refuses is refused until the budget allows it, and an evicted pod
// leaves the kubelet's list only after its grace period (counted in turns).
// Time is the test's own clock: nothing sleeps.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <set>

#include "agent/mig_controller.hpp"
#include "config/device_plugin.hpp"
#include "config/mig_parted.hpp"
#include "nvml/session.hpp"
#include "plugin/node_inventory.hpp"
#include "reconciler/node_state.hpp"
#include "sharing/resources.hpp"
#include "support/run.hpp"
#include "support/sim_nvml.hpp"

#include <string>

namespace tessera::agent {
namespace {

using namespace std::chrono_literals;
using testing::run;
using testing::TempDir;

const char* kConfigs = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  # GPU 0 becomes one 3g.40gb and three 1g.10gb; GPU 1 keeps seven 1g.10gb.
  mixed-gpu0:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "1g.10gb": 3}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  too-many:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 8}
)";

// The API server, as far as the controller uses it.
struct FakeApi : ClusterApi {
  std::map<std::string, std::string> labels;
  std::vector<std::string> state_history;  // every mig.config.state written
  std::vector<std::pair<std::string, std::string>> events;  // (type, message)
  std::map<PodRef, int> budget_refusals;  // evictions to refuse (429) before one is allowed
  std::vector<PodRef> eviction_calls;
  std::set<PodRef> evicted;
  int label_failures = 0;  // label writes to refuse (API server away)

  Result<void> set_label(const std::string& key, const std::string& value) override {
    if (label_failures > 0) {
      --label_failures;
      return fail(Errc::io, "connection refused");
    }
    labels[key] = value;
    if (key == kMigStateLabel) state_history.push_back(value);
    return {};
  }
  Result<Eviction> evict(const PodRef& pod) override {
    eviction_calls.push_back(pod);
    if (auto it = budget_refusals.find(pod); it != budget_refusals.end() && it->second != 0) {
      if (it->second > 0) --it->second;
      return Eviction::blocked;
    }
    evicted.insert(pod);
    return Eviction::evicted;
  }
  Result<void> event(const std::string& type, const std::string&, const std::string& message) override {
    events.emplace_back(type, message);
    return {};
  }
};

struct Pod {
  PodRef ref;
  std::string resource;
  std::string device;
};

struct Fixture {
  TempDir dir;
  std::string node = dir.path() + "/node";
  config::MigPartedConfig configs;
  config::DevicePluginConfig plugin_config;
  std::optional<nvml::Session> session;
  FakeApi api;
  std::vector<Pod> pods;               // what the kubelet lists
  std::map<PodRef, int> leaving;       // evicted pods: turns until they are gone
  int grace_turns = 1;
  bool kubelet_answers = true;
  std::set<std::string> withdrawn;
  std::vector<std::set<std::string>> withdraw_calls;
  int layout_changes = 0;
  std::string serve_fails;  // the plugin cannot serve the new inventory, with this message
  std::unique_ptr<MigController> controller;
  Clock::time_point now = Clock::time_point{} + 1h;

  explicit Fixture(std::chrono::milliseconds eviction_timeout = 60s, const std::string& strategy = "mixed") {
    auto made = run({TESSERA_BIN, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", "2"});
    EXPECT_EQ(made.exit_code, 0) << made.err;
    config::Diagnostics diags;
    auto parsed = config::parse_mig_parted(kConfigs, "mig.yaml", diags);
    EXPECT_TRUE(parsed);
    if (parsed) configs = *parsed;
    auto pc = config::parse_device_plugin_config("version: v1\nflags:\n  migStrategy: " + strategy + "\n", "dp.yaml", diags);
    EXPECT_TRUE(pc);
    if (pc) plugin_config = *pc;
    auto s = testing::open_simulated_nvml(TESSERA_SIM_LIBRARY, node);
    EXPECT_TRUE(s) << s.error().message;
    if (!s) return;
    session.emplace(std::move(*s));
    NodeHooks hooks;
    hooks.pod_devices = [this]() -> Result<std::vector<plugin::PodDevices>> {
      if (!kubelet_answers) return fail(Errc::io, "pod-resources: connection refused");
      std::vector<plugin::PodDevices> out;
      for (const auto& p : pods)
        out.push_back({p.ref.pod_namespace, p.ref.name, {{"main", {{p.resource, {p.device}}}}}});
      return out;
    };
    hooks.advertised = [this] { return advertised(); };
    hooks.withdraw = [this](std::set<std::string> uuids) {
      withdraw_calls.push_back(uuids);
      withdrawn = std::move(uuids);
    };
    hooks.layout_changed = [this]() -> Result<void> {
      ++layout_changes;
      if (!serve_fails.empty()) return fail(Errc::validation, serve_fails);
      return {};
    };
    hooks.served_inventory = [this] {
      auto inventory = plugin::read_node_inventory(*session);
      return inventory ? *inventory : sharing::Inventory{};
    };
    hooks.can_serve = [this](const sharing::Inventory& inventory) -> Result<void> {
      auto r = sharing::build_resources(inventory, plugin_config);
      if (!r) return unexpected(r.error());
      return {};
    };
    MigControllerOptions options;
    options.config_file = "mig.yaml";
    options.configs = configs;
    options.eviction_timeout = eviction_timeout;
    options.poll_interval = 1s;
    options.retry_interval = 5s;
    controller = std::make_unique<MigController>(*session, api, std::move(hooks),
                                                 reconciler::JournalFile(dir.path() + "/state"), options);
  }

  // What the plugin advertises for the node as it is now.
  std::vector<sharing::Resource> advertised() const {
    auto inventory = plugin::read_node_inventory(*session);
    if (!inventory) return {};
    auto resources = sharing::build_resources(*inventory, plugin_config);
    return resources ? *resources : std::vector<sharing::Resource>{};
  }

  // The kubelet's side of an eviction: the pod goes after its grace period.
  void kubelet_turn() {
    for (const auto& pod : api.evicted)
      if (!leaving.contains(pod)) leaving[pod] = grace_turns;
    for (auto it = leaving.begin(); it != leaving.end();) {
      if (--it->second > 0) {
        ++it;
        continue;
      }
      std::erase_if(pods, [&](const Pod& p) { return p.ref == it->first; });
      it = leaving.erase(it);
    }
  }

  // Turns the controller until it is idle (or `limit` of the test's time passed).
  void settle(std::chrono::seconds limit = 600s) {
    auto end = now + limit;
    while (true) {
      controller->step(now);
      if (controller->phase() == Phase::idle) return;
      if (now >= end) return;
      now += 1s;
      kubelet_turn();
    }
  }

  void label(std::optional<std::string> name) {
    controller->set_desired(std::move(name));
    settle();
  }

  std::vector<mig::CurrentInstance> instances(uint32_t gpu) const {
    auto state = reconciler::read_node_state(*session);
    if (!state) return {};
    for (const auto& g : *state)
      if (g.state.index == gpu) return g.state.instances;
    return {};
  }
  std::set<std::string> mig_uuids() const {
    std::set<std::string> out;
    for (uint32_t g : {0u, 1u})
      for (const auto& i : instances(g)) out.insert(i.uuid);
    return out;
  }
  // The MIG device UUID of the instance at `start` on `gpu`.
  std::string at(uint32_t gpu, uint32_t start) const {
    for (const auto& i : instances(gpu))
      if (i.placed.start == start) return i.uuid;
    return {};
  }
  Pod& add_pod(const std::string& name, const std::string& uuid, const std::string& resource = "nvidia.com/mig-1g.10gb") {
    pods.push_back({{"team-a", name}, resource, uuid});
    return pods.back();
  }
  const ChangeRecord& last() const { return controller->history().back(); }
};

TEST(MigController, AppliesTheLabelledConfigAndReportsSuccess) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  EXPECT_EQ(f.api.state_history, (std::vector<std::string>{"pending", "success"}));
  EXPECT_EQ(f.instances(0).size(), 7u);
  EXPECT_EQ(f.instances(1).size(), 7u);
  EXPECT_EQ(f.controller->applied(), "all-1g.10gb");
  ASSERT_FALSE(f.api.events.empty());
  EXPECT_EQ(f.api.events.back().first, "Normal");
  EXPECT_TRUE(f.api.eviction_calls.empty());
  EXPECT_GE(f.layout_changes, 1);
  EXPECT_TRUE(f.withdrawn.empty()) << "every device is back in service";
}

TEST(MigController, ALayoutAlreadyInPlaceIsSuccessWithoutTouchingAnything) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  auto before = f.mig_uuids();
  f.label(std::nullopt);
  f.label("all-1g.10gb");
  EXPECT_EQ(f.mig_uuids(), before);
  // Only the state is written: no pending, no Event, nothing withdrawn.
  EXPECT_EQ(f.api.state_history, (std::vector<std::string>{"pending", "success", "success"}));
  EXPECT_EQ(f.api.events.size(), 1u);
  EXPECT_TRUE(f.last().destroyed.empty());
}

TEST(MigController, EvictsOnlyThePodsOnDestroyedInstancesAndKeepsThoseItCan) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  // Pods on GPU 0 at slices 1, 4 and 6, and on GPU 1 at 0 and 3.
  const auto gpu0_1 = f.at(0, 1), gpu0_4 = f.at(0, 4), gpu0_6 = f.at(0, 6), gpu1_0 = f.at(1, 0), gpu1_3 = f.at(1, 3);
  f.add_pod("a", gpu0_1);
  f.add_pod("b", gpu0_4);
  f.add_pod("c", gpu0_6);
  f.add_pod("d", gpu1_0);
  f.add_pod("e", gpu1_3);
  f.withdraw_calls.clear();
  f.label("mixed-gpu0");

  EXPECT_EQ(f.api.state_history.back(), "success") << (f.api.events.empty() ? "" : f.api.events.back().second);
  // The 3g.40gb takes slices 0-3 (4-7 would need b and c gone): only a leaves.
  EXPECT_EQ(f.api.evicted, (std::set<PodRef>{{"team-a", "a"}}));
  const auto now = f.mig_uuids();
  for (const auto& kept : {gpu0_4, gpu0_6, gpu1_0, gpu1_3}) EXPECT_TRUE(now.contains(kept)) << kept;
  EXPECT_FALSE(now.contains(gpu0_1));
  size_t g3 = 0;
  for (const auto& i : f.instances(0)) g3 += i.placed.start == 0 && i.compute_instances == 1;
  EXPECT_EQ(g3, 1u);
  EXPECT_EQ(f.instances(0).size(), 4u);
  EXPECT_EQ(f.instances(1).size(), 7u);
  // What was taken out of service first: GPU 0's four 1g.10gb at slices 0-3, nothing else.
  ASSERT_GE(f.withdraw_calls.size(), 2u);
  EXPECT_EQ(f.withdraw_calls.front().size(), 4u);
  EXPECT_TRUE(f.withdraw_calls.front().contains(gpu0_1));
  EXPECT_FALSE(f.withdraw_calls.front().contains(gpu0_4));
  EXPECT_TRUE(f.withdraw_calls.back().empty());
}

TEST(MigController, APodDisruptionBudgetDelaysTheChangeUntilItAllows) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  f.add_pod("guarded", f.at(0, 0));
  f.api.budget_refusals[{"team-a", "guarded"}] = 3;
  f.label("all-3g.40gb");
  EXPECT_EQ(f.api.state_history.back(), "success");
  EXPECT_EQ(f.api.eviction_calls.size(), 4u) << "three refusals, then the eviction";
  EXPECT_EQ(f.instances(0).size(), 2u);
}

TEST(MigController, PodsThatDoNotLeaveInTimeEndInFailedWithTheDevicesBack) {
  Fixture f(30s);
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  const auto before = f.mig_uuids();
  f.add_pod("guarded", f.at(1, 2));
  f.api.budget_refusals[{"team-a", "guarded"}] = -1;  // the budget never allows it
  f.controller->set_desired("all-3g.40gb");
  const auto start = f.now;
  f.settle();
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_EQ(f.controller->phase(), Phase::idle);
  EXPECT_LE(f.now - start, 31s) << "the deadline ends it";
  EXPECT_EQ(f.mig_uuids(), before) << "nothing was changed";
  EXPECT_TRUE(f.withdrawn.empty()) << "the devices are advertised again";
  ASSERT_FALSE(f.api.events.empty());
  EXPECT_EQ(f.api.events.back().first, "Warning");
  EXPECT_NE(f.api.events.back().second.find("team-a/guarded"), std::string::npos) << f.api.events.back().second;
  EXPECT_NE(f.api.events.back().second.find("PodDisruptionBudget"), std::string::npos) << f.api.events.back().second;
  // Not tried again on its own: no busy loop on a config that failed.
  f.settle(60s);
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_EQ(f.controller->history().size(), 2u);
}

TEST(MigController, APodStuckTerminatingAlsoEndsInFailed) {
  Fixture f(20s);
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  f.add_pod("slow", f.at(0, 5));
  f.grace_turns = 1000;  // accepted, but it never goes
  f.label("all-3g.40gb");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_EQ(f.api.evicted.size(), 1u);
  EXPECT_EQ(f.instances(0).size(), 7u);
  EXPECT_NE(f.last().reason.find("team-a/slow"), std::string::npos) << f.last().reason;
}

TEST(MigController, AnUnknownConfigNameFailsAtOnceNamingTheNearest) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  const auto before = f.mig_uuids();
  f.withdraw_calls.clear();
  f.label("all-1g.10g");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_EQ(f.mig_uuids(), before);
  ASSERT_FALSE(f.api.events.empty());
  EXPECT_EQ(f.api.events.back().first, "Warning");
  EXPECT_NE(f.api.events.back().second.find("no config named"), std::string::npos) << f.api.events.back().second;
  EXPECT_NE(f.api.events.back().second.find("all-1g.10gb"), std::string::npos) << f.api.events.back().second;
  EXPECT_TRUE(f.withdraw_calls.empty());
}

TEST(MigController, AConfigTheGpuCannotHoldFailsWithoutChangingAnything) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  const auto before = f.mig_uuids();
  f.add_pod("p", f.at(0, 0));
  f.label("too-many");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_EQ(f.mig_uuids(), before);
  EXPECT_TRUE(f.api.eviction_calls.empty()) << "no pod is disturbed for a change that cannot be made";
  EXPECT_EQ(f.controller->applied(), "all-1g.10gb");
}

TEST(MigController, ALabelChangedWhilePodsLeaveAbandonsThatChangeForTheNewOne) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  f.add_pod("slow", f.at(0, 0));
  f.grace_turns = 5;
  f.controller->set_desired("all-3g.40gb");
  f.controller->step(f.now);
  ASSERT_EQ(f.controller->phase(), Phase::draining);
  f.now += 1s;
  f.kubelet_turn();
  f.label("mixed-gpu0");
  ASSERT_GE(f.controller->history().size(), 3u);
  const auto& abandoned = f.controller->history()[1];
  EXPECT_EQ(abandoned.config, "all-3g.40gb");
  EXPECT_EQ(abandoned.state, "failed");
  EXPECT_NE(abandoned.reason.find("changed to mixed-gpu0"), std::string::npos) << abandoned.reason;
  EXPECT_EQ(f.last().config, "mixed-gpu0");
  EXPECT_EQ(f.last().state, "success");
  EXPECT_EQ(f.instances(0).size(), 4u);
  EXPECT_EQ(f.instances(1).size(), 7u) << "GPU 1 was never changed";
}

TEST(MigController, AnAgentThatStopsMidChangeLeavesFailedNotPending) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  const auto before = f.mig_uuids();
  f.add_pod("slow", f.at(0, 0));
  f.grace_turns = 100;
  f.controller->set_desired("all-3g.40gb");
  f.controller->step(f.now);
  ASSERT_EQ(f.controller->phase(), Phase::draining);
  ASSERT_FALSE(f.withdrawn.empty());
  f.controller->abandon(f.now, "tessera node was stopped");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_TRUE(f.withdrawn.empty());
  EXPECT_EQ(f.mig_uuids(), before);
  EXPECT_NE(f.api.events.back().second.find("tessera node was stopped"), std::string::npos) << f.api.events.back().second;
  // Idle: nothing to abandon.
  const auto changes = f.controller->history().size();
  f.controller->abandon(f.now, "again");
  EXPECT_EQ(f.controller->history().size(), changes);
}

TEST(MigController, AStateTheApiRefusesIsWrittenWhenItIsBack) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.api.label_failures = 2;  // pending and success are refused
  f.label("all-1g.10gb");
  EXPECT_EQ(f.controller->applied(), "all-1g.10gb");
  EXPECT_EQ(f.controller->unwritten_state(), std::optional<std::string>("success"));
  EXPECT_TRUE(f.api.state_history.empty());
  auto next = f.controller->step(f.now);
  EXPECT_EQ(next, f.now + 5s) << "the next try is due after retry_interval";
  EXPECT_TRUE(f.api.state_history.empty());
  f.now = next;
  f.controller->step(f.now);
  EXPECT_EQ(f.api.state_history, (std::vector<std::string>{"success"}));
  EXPECT_EQ(f.controller->unwritten_state(), std::nullopt);
}

TEST(MigController, TheGpusChangeOnlyAfterTheKubeletWasToldOfTheWithdrawal) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  const auto before = f.mig_uuids();
  f.controller->set_desired("all-3g.40gb");
  f.controller->step(f.now);
  EXPECT_EQ(f.controller->phase(), Phase::draining) << "no pod to wait for, but the withdrawal must reach the kubelet";
  EXPECT_FALSE(f.withdrawn.empty());
  EXPECT_EQ(f.mig_uuids(), before);
  f.now += 1s;
  f.controller->step(f.now);
  EXPECT_EQ(f.controller->phase(), Phase::idle);
  EXPECT_EQ(f.instances(0).size(), 2u);
}

// migStrategy none advertises a MIG GPU whole: its pods use every instance.
TEST(MigController, UnderStrategyNoneThePodsOnAChangedGpuLeave) {
  Fixture f(60s, "none");
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  auto resources = f.advertised();
  ASSERT_EQ(resources.size(), 1u);
  ASSERT_EQ(resources[0].name, "nvidia.com/gpu");
  std::string gpu0, gpu1;
  for (const auto& d : resources[0].devices) (d.gpu_index == 0 ? gpu0 : gpu1) = d.id;
  f.add_pod("on-gpu0", gpu0, "nvidia.com/gpu");
  f.add_pod("on-gpu1", gpu1, "nvidia.com/gpu");
  f.withdraw_calls.clear();
  f.label("mixed-gpu0");
  EXPECT_EQ(f.api.state_history.back(), "success");
  EXPECT_EQ(f.api.evicted, (std::set<PodRef>{{"team-a", "on-gpu0"}})) << "GPU 1 did not change";
  ASSERT_FALSE(f.withdraw_calls.empty());
  EXPECT_TRUE(f.withdraw_calls.front().contains(gpu0));
  EXPECT_FALSE(f.withdraw_calls.front().contains(gpu1));
}

// migStrategy single serves one profile: a mixed layout is refused before any pod is touched.
TEST(MigController, ALayoutThePluginCouldNotServeIsRefusedFirst) {
  Fixture f(60s, "single");
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  const auto before = f.mig_uuids();
  f.add_pod("p", f.advertised()[0].devices[0].id, f.advertised()[0].name);
  f.label("mixed-gpu0");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_NE(f.last().reason.find("could not serve"), std::string::npos) << f.last().reason;
  EXPECT_TRUE(f.api.eviction_calls.empty());
  EXPECT_EQ(f.mig_uuids(), before);
}

TEST(MigController, NewDevicesThatCannotBeServedKeepTheOldOnesOutOfService) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  f.serve_fails = "the inventory cannot be read";
  f.label("all-3g.40gb");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_NE(f.last().reason.find("cannot serve"), std::string::npos) << f.last().reason;
  EXPECT_EQ(f.withdrawn.size(), 14u) << "the destroyed 1g.10gb stay Unhealthy";
}

TEST(MigController, AReloadedConfigFileIsUsedAndTheLabelTriedAgain) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  f.label("two-2g");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  config::Diagnostics diags;
  auto more = config::parse_mig_parted(std::string(kConfigs) + R"(  two-2g:
    - devices: all
      mig-enabled: true
      mig-devices: {"2g.20gb": 2}
)", "mig.yaml", diags);
  ASSERT_TRUE(more);
  f.controller->set_configs(*more);
  f.settle();
  EXPECT_EQ(f.api.state_history.back(), "success");
  EXPECT_EQ(f.controller->applied(), "two-2g");
  EXPECT_EQ(f.instances(0).size(), 2u);
}

TEST(MigController, AKubeletThatDoesNotAnswerFailsTheChangeBeforeAnyPodIsTouched) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-1g.10gb");
  f.kubelet_answers = false;
  f.label("all-3g.40gb");
  EXPECT_EQ(f.api.state_history.back(), "failed");
  EXPECT_NE(f.last().reason.find("connection refused"), std::string::npos) << f.last().reason;
  EXPECT_EQ(f.instances(0).size(), 7u);
}

TEST(MigController, TurningMigOnEvictsThePodsOnTheWholeGpu) {
  Fixture f;
  ASSERT_TRUE(f.session);
  f.label("all-disabled");
  auto resources = f.advertised();
  ASSERT_FALSE(resources.empty());
  ASSERT_EQ(resources[0].name, "nvidia.com/gpu");
  const auto gpu0 = resources[0].devices[0].id;
  f.add_pod("whole", gpu0, "nvidia.com/gpu");
  f.label("all-1g.10gb");
  EXPECT_EQ(f.api.state_history.back(), "success");
  EXPECT_EQ(f.api.evicted, (std::set<PodRef>{{"team-a", "whole"}}));
  EXPECT_EQ(f.instances(0).size(), 7u);
}

}  // namespace
}  // namespace tessera::agent
