// The fleet controller over an in-memory API server: nothing changes before
// a person approves the plan's hash, a stale plan is refused and planned
// again, waves go one at a time behind the node agents' success, a failure
// stops the rollout, --dry-run changes nothing.
#include <gtest/gtest.h>

#include <tuple>

#include "fleet/controller.hpp"
#include "fleet/helpers.hpp"

namespace tessera::fleet::testing {
namespace {

using namespace std::chrono_literals;

class FakeApi : public FleetApi {
 public:
  std::vector<json> nodes, pods;
  std::map<std::string, ConfigMapView> cms;
  std::vector<std::pair<std::string, std::string>> events;  // (reason, message)
  std::vector<std::pair<std::string, std::string>> labelled;  // (node, config) in order

  int changes_per_read = 0;  // > 0: a new pending pod appears at every read (a cluster that never rests)
  Result<ClusterList> snapshot() override {
    for (int k = 0; k < changes_per_read; ++k) pods.push_back(pod("churn-" + std::to_string(pods.size()), "1g.10gb", 1));
    std::vector<json> items = nodes;
    for (const auto& p : pods) items.push_back(p);
    return ClusterList{std::make_shared<const json>(list(items)), 0};
  }
  Result<std::optional<ConfigMapView>> get_configmap(const std::string& name) override {
    auto it = cms.find(name);
    if (it == cms.end()) return std::optional<ConfigMapView>();
    return std::optional<ConfigMapView>(it->second);
  }
  Result<void> put_configmap(const std::string& name, const std::map<std::string, std::string>& data,
                             const std::map<std::string, std::optional<std::string>>& annotations) override {
    auto& cm = cms[name];
    for (const auto& [k, v] : data) cm.data[k] = v;
    for (const auto& [k, v] : annotations) {
      if (v) cm.annotations[k] = *v;
      else cm.annotations.erase(k);
    }
    return {};
  }
  Result<void> label_node(const std::string& name, const std::map<std::string, std::optional<std::string>>& labels) override {
    for (auto& n : nodes)
      if (n["metadata"]["name"] == name) {
        for (const auto& [k, v] : labels) {
          if (v) n["metadata"]["labels"][k] = *v;
          else n["metadata"]["labels"].erase(k);
          if (k == kMigConfigLabel && v) labelled.push_back({name, *v});
        }
        return {};
      }
    return fail(Errc::not_found, "no node " + name);
  }
  Result<void> event(const std::string&, const std::string& reason, const std::string& message) override {
    events.push_back({reason, message});
    return {};
  }
  void set_state(const std::string& name, const std::string& state) {
    for (auto& n : nodes)
      if (n["metadata"]["name"] == name) n["metadata"]["labels"][kMigStateLabel] = state;
  }
  std::string label(const std::string& name, const std::string& key) {
    for (auto& n : nodes)
      if (n["metadata"]["name"] == name) return n["metadata"]["labels"].value(key, "");
    return "";
  }
  bool has_event(const std::string& reason) const {
    return std::any_of(events.begin(), events.end(), [&](const auto& e) { return e.first == reason; });
  }
};

// Two A100 nodes of seven 1g.10gb, three pods on each; two 3g.40gb pods wait.
// Each node takes one 3g.40gb beside its pods: two changed nodes, no eviction.
void two_node_fleet(FakeApi& api) {
  api.nodes = {node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb")};
  for (const char* n : {"a", "b"})
    for (int i = 0; i < 3; ++i) api.pods.push_back(pod(std::string(n) + "-run-" + std::to_string(i), "1g.10gb", 1, n));
  api.pods.push_back(pod("big-0", "3g.40gb", 1));
  api.pods.push_back(pod("big-1", "3g.40gb", 1));
  api.cms["tessera-mig-config"].data["config.yaml"] = std::string("# the operators' file\n") + kMigConfigs;
}

ControllerOptions options() {
  ControllerOptions o;
  o.pending_after = 60s;
  o.poll = 1s;
  o.config_propagation = 10s;
  o.wave_timeout = 120s;
  o.plan.max_wave_nodes = 1;
  o.plan.seconds = 5;
  return o;
}

// Planned on request, approved at once, the first wave labelled (no propagation wait configured).
void start_first_wave(FakeApi& api, Controller& c, Clock::time_point t) {
  c.request_plan();
  c.step(t);
  api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = c.plan_hash();
  c.step(t + 1s);
  c.step(t + 2s);
}

TEST(FleetController, NothingChangesBeforeApprovalThenWavesGoInOrder) {
  FakeApi api;
  two_node_fleet(api);
  Controller c(api, options());
  Clock::time_point t{};
  c.step(t);
  EXPECT_EQ(c.phase(), ControllerPhase::watching) << "pending for less than --pending-after";
  EXPECT_EQ(c.metrics().pending_gpu_pods, 2);
  c.step(t + 61s);
  ASSERT_EQ(c.phase(), ControllerPhase::proposed);
  const auto& cm = api.cms.at(kPlanConfigMap);
  EXPECT_EQ(cm.data.at("hash"), c.plan_hash());
  EXPECT_EQ(cm.annotations.at(kPlanHashAnnotation), c.plan_hash());
  EXPECT_NE(cm.data.at("summary").find("2 node(s) change"), std::string::npos) << cm.data.at("summary");
  json plan = json::parse(cm.data.at("plan.json"));
  EXPECT_EQ(plan["rollout"].size(), 2u);
  EXPECT_TRUE(api.has_event("FleetPlanProposed"));
  // Waiting: nothing changes, however long.
  for (int i = 0; i < 5; ++i) c.step(t + 70s + i * 10s);
  EXPECT_TRUE(api.labelled.empty());
  EXPECT_EQ(api.label("a", kMigConfigLabel), "all-1g.10gb");
  // A wrong hash is not an approval.
  api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = "0123456789abcdef";
  c.step(t + 130s);
  EXPECT_EQ(c.phase(), ControllerPhase::proposed);
  EXPECT_TRUE(api.has_event("FleetPlanNotApproved"));
  // Approved: the configs go into the mig-parted ConfigMap first, comments kept.
  api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = c.plan_hash();
  c.step(t + 140s);
  EXPECT_EQ(c.phase(), ControllerPhase::propagating);
  const std::string& mig = api.cms.at("tessera-mig-config").data.at("config.yaml");
  EXPECT_TRUE(mig.starts_with("# the operators' file\n"));
  std::string wave1 = plan["rollout"][0][0], wave2 = plan["rollout"][1][0];
  std::string cfg1 = plan["nodes"][wave1 == "a" ? 0 : 1]["mig.config"];
  EXPECT_NE(mig.find(cfg1 + ":"), std::string::npos) << mig;
  EXPECT_TRUE(api.labelled.empty()) << "no label before the nodes can see the new configs";
  c.step(t + 151s);
  ASSERT_EQ(api.labelled.size(), 1u);
  EXPECT_EQ(api.labelled[0], std::pair(wave1, cfg1));
  EXPECT_EQ(api.label(wave1, kMigStateLabel), "") << "the old state is cleared with the relabel";
  c.step(t + 152s);
  EXPECT_EQ(api.labelled.size(), 1u) << "the second wave waits for the first's success";
  api.set_state(wave1, "pending");
  c.step(t + 153s);
  EXPECT_EQ(api.labelled.size(), 1u);
  api.set_state(wave1, "success");
  c.step(t + 154s);
  ASSERT_EQ(api.labelled.size(), 2u);
  EXPECT_EQ(api.labelled[1].first, wave2);
  EXPECT_EQ(c.metrics().waves_done, 1);
  api.set_state(wave2, "success");
  c.step(t + 155s);
  EXPECT_EQ(c.phase(), ControllerPhase::done);
  EXPECT_TRUE(api.has_event("FleetPlanApplied"));
  EXPECT_NE(c.metrics_text().find("tessera_fleet_waves_done 2"), std::string::npos);
}

// After a rollout the pods it placed wait for the scheduler (and the ones it evicted for their
// owners): each gets a fresh --pending-after, and a plan that would change nothing leaves the
// record of the applied plan as it is.
TEST(FleetController, ADoneRolloutKeepsItsRecordWhilePodsSettle) {
  FakeApi api;
  two_node_fleet(api);
  ControllerOptions o = options();
  o.config_propagation = 0s;
  Controller c(api, o);
  Clock::time_point t{};
  c.step(t);  // big-0 and big-1 pending from t
  start_first_wave(api, c, t + 1s);
  ASSERT_EQ(api.labelled.size(), 1u);
  api.set_state(api.labelled[0].first, "success");
  c.step(t + 4s);
  ASSERT_EQ(api.labelled.size(), 2u);
  api.set_state(api.labelled[1].first, "success");
  c.step(t + 61s);
  ASSERT_EQ(c.phase(), ControllerPhase::done);
  const std::string hash = c.plan_hash();
  const auto& cm = api.cms.at(kPlanConfigMap);
  ASSERT_TRUE(cm.data.at("status").starts_with("done: plan " + hash)) << cm.data.at("status");
  const int64_t plans = c.metrics().plans_made;
  // big-0 and big-1 still wait (no scheduler here): pending since before the plan, yet no plan
  // is made before a whole --pending-after has passed since the rollout ended.
  c.step(t + 62s);
  c.step(t + 120s);
  EXPECT_EQ(c.metrics().plans_made, plans);
  // Overdue then: planned again, nothing to change; the record still names the applied plan.
  c.step(t + 123s);
  EXPECT_EQ(c.metrics().plans_made, plans + 1);
  EXPECT_EQ(c.phase(), ControllerPhase::done);
  EXPECT_EQ(c.plan_hash(), hash);
  EXPECT_TRUE(cm.data.at("status").starts_with("done: plan " + hash)) << cm.data.at("status");
  EXPECT_EQ(cm.data.at("hash"), hash);
}

TEST(FleetController, AStalePlanIsRefusedAndPlannedAgain) {
  FakeApi api;
  two_node_fleet(api);
  Controller c(api, options());
  c.request_plan();
  c.step(Clock::time_point{});
  ASSERT_EQ(c.phase(), ControllerPhase::proposed);
  std::string first = c.plan_hash();
  api.pods.push_back(pod("late", "1g.10gb", 1));  // the cluster changes
  api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = first;
  c.step(Clock::time_point{} + 5s);
  EXPECT_TRUE(api.has_event("FleetPlanStale"));
  EXPECT_EQ(c.phase(), ControllerPhase::proposed);
  EXPECT_NE(c.plan_hash(), first);
  EXPECT_FALSE(api.cms[kPlanConfigMap].annotations.contains(kApproveAnnotation)) << "the old approval is cleared";
  EXPECT_TRUE(api.labelled.empty());
  // The mig-parted file is part of what a plan stands on: a change to its text makes the approval stale too.
  const std::string second = c.plan_hash();
  api.cms["tessera-mig-config"].data["config.yaml"] += "# edited\n";
  api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = second;
  c.step(Clock::time_point{} + 10s);
  EXPECT_EQ(c.phase(), ControllerPhase::proposed);
  EXPECT_NE(c.plan_hash(), second);
  EXPECT_TRUE(api.labelled.empty());
}

// With auto-approve on a cluster that changes at every look, a stale plan is planned again once
// and waits for the next poll: one plan per step, never a loop.
TEST(FleetController, AutoApproveOnAChangingClusterMakesOnePlanPerPoll) {
  FakeApi api;
  two_node_fleet(api);
  auto o = options();
  o.auto_approve = true;
  o.plan.max_evictions = 0;
  Controller c(api, o);
  c.request_plan();
  Clock::time_point t{};
  api.changes_per_read = 1;
  c.step(t);  // planned, approved at once, found stale: planned again, and waits
  EXPECT_EQ(c.metrics().plans_made, 2);
  for (int i = 1; i <= 3; ++i) {
    const int64_t before = c.metrics().plans_made;
    c.step(t + std::chrono::seconds(i));
    EXPECT_LE(c.metrics().plans_made - before, 1) << "step " << i;
  }
  EXPECT_TRUE(api.has_event("FleetPlanStale"));
  EXPECT_TRUE(api.labelled.empty());
}

TEST(FleetController, AFailedWaveStopsTheRollout) {
  FakeApi api;
  two_node_fleet(api);
  auto o = options();
  o.config_propagation = 0s;
  Controller c(api, o);
  Clock::time_point t{};
  start_first_wave(api, c, t);
  ASSERT_EQ(api.labelled.size(), 1u);
  api.set_state(api.labelled[0].first, "failed");
  c.step(t + 3s);
  EXPECT_EQ(c.phase(), ControllerPhase::failed);
  EXPECT_TRUE(api.has_event("FleetRolloutFailed"));
  c.step(t + 4s);
  EXPECT_EQ(api.labelled.size(), 1u) << "the later waves are left as they are";
  EXPECT_NE(api.cms[kPlanConfigMap].data["status"].find("failed"), std::string::npos);
}

TEST(FleetController, DryRunChangesNothing) {
  FakeApi api;
  two_node_fleet(api);
  auto o = options();
  o.dry_run = true;
  Controller c(api, o);
  c.request_plan();
  c.step(Clock::time_point{});
  api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = c.plan_hash();
  std::string before = api.cms["tessera-mig-config"].data["config.yaml"];
  for (int i = 1; i < 5; ++i) c.step(Clock::time_point{} + i * 1s);
  EXPECT_TRUE(api.labelled.empty());
  EXPECT_EQ(api.cms["tessera-mig-config"].data["config.yaml"], before);
}

TEST(FleetController, AutoApproveRollsOutWithoutAPerson) {
  FakeApi api;
  two_node_fleet(api);
  auto o = options();
  o.auto_approve = true;
  o.plan.max_evictions = 0;
  o.config_propagation = 0s;
  Controller c(api, o);
  c.request_plan();
  c.step(Clock::time_point{});
  c.step(Clock::time_point{} + 1s);
  EXPECT_EQ(api.labelled.size(), 1u);
  EXPECT_FALSE(api.has_event("FleetPlanNotApproved"));
}

// A controller that restarts goes on from what the plan's ConfigMap records: an approved plan
// whose configs are propagating, then a wave in flight, without labelling a node twice.
TEST(FleetController, ARestartedControllerResumesFromTheConfigMap) {
  FakeApi api;
  two_node_fleet(api);
  Clock::time_point t{};
  std::string hash;
  {
    Controller c(api, options());
    c.request_plan();
    c.step(t);
    hash = c.plan_hash();
    api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = hash;
    c.step(t + 1s);
    ASSERT_EQ(c.phase(), ControllerPhase::propagating);
  }  // the controller's pod is replaced
  {
    Controller c(api, options());
    c.step(t + 2s);
    EXPECT_EQ(c.phase(), ControllerPhase::propagating);
    EXPECT_EQ(c.plan_hash(), hash);
    EXPECT_TRUE(api.has_event("FleetControllerResumed"));
    EXPECT_TRUE(api.labelled.empty());
    c.step(t + 20s);  // propagation time, counted again from the restart
    ASSERT_EQ(api.labelled.size(), 1u);
    EXPECT_EQ(c.metrics().plans_made, 0) << "resumed, not planned again";
  }
  const std::string first = api.labelled[0].first;
  {
    Controller c(api, options());
    c.step(t + 30s);
    EXPECT_EQ(c.phase(), ControllerPhase::rolling);
    EXPECT_EQ(api.labelled.size(), 1u) << "the wave in flight is not labelled again";
    api.set_state(first, "success");
    c.step(t + 31s);
    ASSERT_EQ(api.labelled.size(), 2u);
    EXPECT_NE(api.labelled[1].first, first);
    api.set_state(api.labelled[1].first, "success");
    c.step(t + 32s);
    EXPECT_EQ(c.phase(), ControllerPhase::done);
  }
  Controller after(api, options());
  after.step(t + 40s);
  EXPECT_EQ(after.phase(), ControllerPhase::watching) << "a finished plan is not resumed";
}

// A plan ConfigMap whose record cannot be read is said so in an Event and not resumed; a state
// that is not JSON, or names no phase in flight, is not resumed either.
TEST(FleetController, AnUnreadableRecordIsNotResumed) {
  for (const auto& [state, plan, event] : std::vector<std::tuple<std::string, std::string, bool>>{
           {R"({"phase": "rolling", "wave": 1})", R"({"nodes": "not a list"})", true},
           {R"({"phase": "rolling"})", "not JSON", true},
           {"not JSON", R"({"rollout": [], "nodes": []})", false},
           {R"({"phase": "done"})", R"({"rollout": [], "nodes": []})", false}}) {
    FakeApi api;
    two_node_fleet(api);
    api.cms[kPlanConfigMap].data = {{"state", state}, {"plan.json", plan}, {"hash", "0123456789abcdef"}};
    Controller c(api, options());
    c.step(Clock::time_point{});
    EXPECT_EQ(c.phase(), ControllerPhase::watching) << state << " " << plan;
    EXPECT_EQ(api.has_event("FleetPlanNotResumed"), event) << state << " " << plan;
    EXPECT_FALSE(api.has_event("FleetControllerResumed"));
    EXPECT_TRUE(api.labelled.empty());
  }
}

// Each wave reads the cluster again: a pod that arrived on an instance the wave would destroy
// counts against --max-wave-evictions, and over it the rollout stops with an Event.
TEST(FleetController, AWaveWhoseNodesChangedStops) {
  FakeApi api;
  two_node_fleet(api);
  auto o = options();
  o.config_propagation = 0s;
  o.plan.max_wave_evictions = 0;
  Controller c(api, o);
  Clock::time_point t{};
  start_first_wave(api, c, t);
  ASSERT_EQ(api.labelled.size(), 1u);
  const std::string second = api.labelled[0].first == "a" ? "b" : "a";
  // The scheduler fills every free 1g.10gb of the second node meanwhile.
  for (int i = 0; i < 4; ++i) api.pods.push_back(pod(second + "-late-" + std::to_string(i), "1g.10gb", 1, second));
  api.set_state(api.labelled[0].first, "success");
  c.step(t + 3s);
  EXPECT_EQ(c.phase(), ControllerPhase::failed);
  EXPECT_TRUE(api.has_event("FleetPlanStale"));
  EXPECT_EQ(api.labelled.size(), 1u) << "the second wave is not started";
  EXPECT_NE(api.cms[kPlanConfigMap].data["status"].find("--max-wave-evictions 0"), std::string::npos)
      << api.cms[kPlanConfigMap].data["status"];
}

// A GPU planned as it is (a bare pod holds it) does not stop its node's wave: the wave changes the
// node's other GPU. A GPU that must be kept by the time its wave comes (its pod lost its owner
// meanwhile) stops the rollout before anything is relabelled there.
TEST(FleetController, AWaveKeepsTheGpusPlannedAsTheyAre) {
  auto gpu = [](int index, const std::string& pod) {
    json first = {{"profile", "3g.40gb"}, {"start", 0}};
    if (!pod.empty()) first["pod"] = pod;
    return json{{"index", index}, {"mig", true}, {"instances", json::array({first, {{"profile", "3g.40gb"}, {"start", 4}}})}};
  };
  auto high = [](json p) {
    p["spec"]["priority"] = 1000;
    return p;
  };
  {
    FakeApi api;
    api.nodes = {node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-3g.40gb", json{{"gpus", json::array({gpu(0, "ml/keep"), gpu(1, "")})}})};
    api.pods = {bare_pod("keep", "3g.40gb", 1, "a"), pod("big", "7g.80gb", 1)};
    api.cms["tessera-mig-config"].data["config.yaml"] = kMigConfigs;
    auto o = options();
    o.config_propagation = 0s;
    Controller c(api, o);
    start_first_wave(api, c, Clock::time_point{});
    ASSERT_EQ(api.labelled.size(), 1u) << api.cms[kPlanConfigMap].data["status"];
    EXPECT_EQ(c.phase(), ControllerPhase::rolling);
  }
  FakeApi api;
  api.nodes = {node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb", json{{"gpus", json::array({gpu(0, "ml/on-a")})}}),
               node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb", json{{"gpus", json::array({gpu(0, "ml/on-b")})}})};
  api.pods = {pod("on-a", "3g.40gb", 1, "a"), pod("on-b", "3g.40gb", 1, "b"), high(pod("big-1", "7g.80gb", 1)),
              high(pod("big-2", "7g.80gb", 1))};
  api.cms["tessera-mig-config"].data["config.yaml"] = kMigConfigs;
  auto o = options();
  o.config_propagation = 0s;
  Controller c(api, o);
  Clock::time_point t{};
  start_first_wave(api, c, t);
  ASSERT_EQ(api.labelled.size(), 1u) << api.cms[kPlanConfigMap].data["status"];
  const std::string second = api.labelled[0].first == "a" ? "b" : "a";
  for (auto& p : api.pods)
    if (p["metadata"]["name"] == "on-" + second) p["metadata"].erase("ownerReferences");
  api.set_state(api.labelled[0].first, "success");
  c.step(t + 3s);
  EXPECT_EQ(c.phase(), ControllerPhase::failed);
  EXPECT_EQ(api.labelled.size(), 1u) << "the second wave is not started";
  EXPECT_NE(api.cms[kPlanConfigMap].data["status"].find("node " + second + " GPU 0 is to be kept as it is now"), std::string::npos)
      << api.cms[kPlanConfigMap].data["status"];
}

// Generated configs no node names are removed when a plan rolls out; those a node names stay.
TEST(FleetController, GeneratedConfigsNoNodeNamesAreRemoved) {
  FakeApi api;
  two_node_fleet(api);
  const std::string old_cfg = "  tessera-fleet-a100-sxm4-80gb-0badc0de:\n    - devices: all\n      mig-enabled: false\n";
  const std::string used_cfg = "  tessera-fleet-a100-sxm4-80gb-00c0ffee:\n    - devices: all\n      mig-enabled: true\n"
                               "      mig-devices:\n        \"1g.10gb\": 7\n";
  api.cms["tessera-mig-config"].data["config.yaml"] += old_cfg + used_cfg;
  api.nodes.push_back(node("c", "NVIDIA-A100-SXM4-80GB", 1, "tessera-fleet-a100-sxm4-80gb-00c0ffee"));
  auto o = options();
  o.config_propagation = 0s;
  Controller c(api, o);
  c.request_plan();
  c.step(Clock::time_point{});
  api.cms[kPlanConfigMap].annotations[kApproveAnnotation] = c.plan_hash();
  c.step(Clock::time_point{} + 1s);
  const std::string& mig = api.cms.at("tessera-mig-config").data.at("config.yaml");
  EXPECT_EQ(mig.find("0badc0de"), std::string::npos) << mig;
  EXPECT_NE(mig.find("tessera-fleet-a100-sxm4-80gb-00c0ffee:"), std::string::npos) << mig;
  EXPECT_NE(mig.find("all-1g.10gb:"), std::string::npos) << "the operators' own configs stay";
  auto kept = prune_mig_configs(mig, {"tessera-fleet-a100-sxm4-80gb-00c0ffee"});
  ASSERT_TRUE(kept);
  config::Diagnostics d;
  auto parsed = config::parse_mig_parted(*kept, "x", d);
  ASSERT_TRUE(parsed && !d.has_errors()) << *kept;
  EXPECT_NE(parsed->find("tessera-fleet-a100-sxm4-80gb-00c0ffee"), nullptr);
}

TEST(FleetController, AddMigConfigsKeepsTheFile) {
  std::string text = "# mine\nversion: v1\nmig-configs:\n  # a comment\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n";
  json add = {{"new-one", json::array({{{"devices", json::array({0})}, {"mig-enabled", true}, {"mig-devices", {{"3g.40gb", 2}}}}})}};
  auto out = add_mig_configs(text, add);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_TRUE(out->starts_with(text));
  config::Diagnostics d;
  auto parsed = config::parse_mig_parted(*out, "x", d);
  ASSERT_TRUE(parsed && !d.has_errors()) << *out;
  ASSERT_NE(parsed->find("new-one"), nullptr);
  EXPECT_EQ(parsed->find("new-one")->entries[0].mig_devices[0].count, 2u);
  EXPECT_EQ(*add_mig_configs(*out, add), *out) << "a config already there is left alone";
}

}  // namespace
}  // namespace tessera::fleet::testing
