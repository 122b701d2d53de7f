// The snapshot reader and problem builder: what counts as running and
// pending, the layout annotation, GFD's product names, and bad input, each a
// precise error naming the object.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "fleet/helpers.hpp"

namespace tessera::fleet::testing {
namespace {

Result<Problem> problem_of(const json& doc, const config::MigPartedConfig& cfg) {
  auto snap = parse_snapshot(doc, "snap.json");
  if (!snap) return unexpected(snap.error());
  return build_problem(*snap, cfg);
}

TEST(FleetSnapshot, RunningPendingAndIgnored) {
  auto cfg = configs();
  auto p = problem_of(list({node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-1g.10gb"), pod("run", "1g.10gb", 1, "a"),
                            pod("starting", "1g.10gb", 1, "a", "Pending"), pod("wait", "3g.40gb", 1),
                            pod("done", "1g.10gb", 1, "a", "Succeeded"), pod("gone", "1g.10gb", 1, "a", "Failed"),
                            {{"kind", "Pod"}, {"metadata", {{"name", "cpu"}, {"namespace", "x"}}}, {"spec", {{"containers", json::array()}}}}}),
                      cfg);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->pods.size(), 3u);
  EXPECT_EQ(p->pods[0].id, "ml/run");
  EXPECT_TRUE(p->pods[0].running());
  EXPECT_TRUE(p->pods[1].running()) << "Pending on a node counts as running there";
  EXPECT_FALSE(p->pods[2].running());
  ASSERT_EQ(p->gpus.size(), 2u);
  EXPECT_EQ(p->gpus[0].instances.size(), 7u);
  EXPECT_EQ(p->gpus[0].instances[0].pod, 0);
  EXPECT_EQ(p->gpus[0].instances[1].pod, 1);
}

TEST(FleetSnapshot, GfdProductNames) {
  const auto& c = Catalog::builtin();
  EXPECT_EQ(find_product(c, "NVIDIA-A100-SXM4-80GB")->name, "A100-SXM4-80GB");
  EXPECT_EQ(find_product(c, "NVIDIA-H100-80GB-HBM3")->name, "H100-SXM5-80GB");
  EXPECT_EQ(find_product(c, "NVIDIA-H200")->name, "H200-SXM-141GB");
  EXPECT_EQ(find_product(c, "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb")->name, "A100-SXM4-80GB");
  // GFD's suffix where devices are shared (time-slicing or MPS replicas), which tessera's labeller writes too.
  EXPECT_EQ(find_product(c, "NVIDIA-A100-SXM4-80GB-SHARED")->name, "A100-SXM4-80GB");
  EXPECT_EQ(find_product(c, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED")->name, "H100-SXM5-80GB");
  EXPECT_EQ(find_product(c, "Tesla-T4"), nullptr);
}

TEST(FleetSnapshot, TheLayoutAnnotationGivesPlacementsAndHolders) {
  auto cfg = configs();
  json ann = {{"gpus", json::array({{{"index", 0}, {"mig", true},
                                     {"instances", json::array({{{"profile", "3g.40gb"}, {"start", 4}, {"pod", "ml/x"}}})}},
                                    {{"index", 1}, {"mig", false}, {"pod", "ml/w"}}})}};
  auto p = problem_of(list({node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-1g.10gb", ann), pod("x", "3g.40gb", 1, "a"),
                            pod("w", "gpu", 1, "a")}),
                      cfg);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->nodes[0].placements_known);
  ASSERT_EQ(p->gpus[0].instances.size(), 1u);
  EXPECT_EQ(p->gpus[0].instances[0].start, 4u);
  EXPECT_EQ(p->pods[1].id, "ml/x");  // pods in name order
  EXPECT_EQ(p->gpus[0].instances[0].pod, 1);
  EXPECT_FALSE(p->gpus[1].mig);
  EXPECT_EQ(p->gpus[1].instances[0].pod, 0);
}

TEST(FleetSnapshot, BadInputIsAPreciseError) {
  auto cfg = configs();
  auto expect_error = [&](const json& doc, const std::string& want) {
    auto p = problem_of(doc, cfg);
    ASSERT_FALSE(p) << "accepted: " << doc.dump();
    EXPECT_EQ(p.error().message, want);
  };
  expect_error(json{{"kind", "Node"}, {"metadata", {{"name", "a"}}}},
               "snap.json: not a Kubernetes List (kind 'Node'; expected kind List with items, as `kubectl get nodes,pods -A -o json` prints)");
  json bad_op = pod("picky", "gpu", 1);
  bad_op["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] =
      json::array({{{"matchExpressions", json::array({{{"key", "zone"}, {"operator", "Within"}, {"values", {"a"}}}})}}});
  // Rules the API would refuse stop that pod only (left out, said).
  auto picky = problem_of(list({bad_op, pod("fine", "gpu", 1)}), cfg);
  ASSERT_TRUE(picky) << picky.error().message;
  ASSERT_EQ(picky->pods.size(), 1u);
  EXPECT_EQ(picky->pods[0].id, "ml/fine");
  ASSERT_FALSE(picky->warnings.empty());
  EXPECT_EQ(picky->warnings[0], "Pod ml/picky: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                                ".nodeSelectorTerms[0].matchExpressions[0].operator 'Within' is not In, NotIn, Exists, "
                                "DoesNotExist, Gt or Lt; left out");
}

// Disruption budgets as the eviction API applies them: of the running pods
// a budget selects, only as many as status.disruptionsAllowed may be evicted
// (the first by name); the others are kept like bare pods (their node as it
// is, said). A pod two budgets select is kept (the API refuses it); a null
// selector selects nothing; one in another namespace nothing here; without a
// status, the budget is worked out from minAvailable or maxUnavailable over
// the snapshot's pods; an unreadable budget keeps its whole namespace.
TEST(FleetSnapshot, DisruptionBudgetsKeepThePodsTheyGuard) {
  auto cfg = configs();
  auto warnings_of = [](const Problem& p) {
    std::string w;
    for (const auto& x : p.warnings) w += x + "\n";
    return w;
  };
  auto frozen = [](const Problem& p) {
    std::set<std::string> out;
    for (const auto& n : p.nodes)
      if (n.frozen) out.insert(n.name);
    return out;
  };
  auto nodes = [] {
    return std::vector<json>{node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"),
                             node("c", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb")};
  };
  auto with = [&](std::vector<json> more) {
    auto items = nodes();
    items.push_back(labelled(pod("p-a", "1g.10gb", 1, "a"), "web"));
    items.push_back(labelled(pod("p-b", "1g.10gb", 1, "b"), "web"));
    items.push_back(labelled(pod("p-c", "1g.10gb", 1, "c"), "other"));
    items.insert(items.end(), more.begin(), more.end());
    auto p = problem_of(list(items), configs());
    EXPECT_TRUE(p) << p.error().message;
    return *p;
  };
  // One disruption allowed for two pods: the first may go, the second is kept.
  auto one = with({budget("web", "web", 1)});
  EXPECT_EQ(frozen(one), (std::set<std::string>{"b"}));
  EXPECT_NE(warnings_of(one).find("Pod ml/p-b on b its PodDisruptionBudget ml/web allows no more disruptions: its node is kept as it is"),
            std::string::npos) << warnings_of(one);
  EXPECT_EQ(frozen(with({budget("web", "web", 2)})), std::set<std::string>{});
  EXPECT_EQ(frozen(with({budget("web", "web", 0)})), (std::set<std::string>{"a", "b"}));
  // Two budgets over one pod.
  auto two = with({budget("web", "web", 5), budget("mine", "other", 5, {{"selector", json::object()}})});
  EXPECT_EQ(frozen(two), (std::set<std::string>{"a", "b"})) << "the empty selector takes every pod of ml: p-c has one budget";
  EXPECT_NE(warnings_of(two).find("two disruption budgets select it (ml/web, ml/mine)"), std::string::npos) << warnings_of(two);
  // A null selector selects nothing; another namespace's budget guards nothing here.
  EXPECT_EQ(frozen(with({budget("none", "web", 0, {{"selector", nullptr}})})), std::set<std::string>{});
  json elsewhere = budget("web", "web", 0);
  elsewhere["metadata"]["namespace"] = "other-team";
  EXPECT_EQ(frozen(with({elsewhere})), std::set<std::string>{});
  // No status: minAvailable 50% of 2 running pods leaves one disruption; maxUnavailable 0 none.
  EXPECT_EQ(frozen(with({budget("web", "web", std::nullopt, {{"minAvailable", "50%"}})})), (std::set<std::string>{"b"}));
  EXPECT_EQ(frozen(with({budget("web", "web", std::nullopt, {{"maxUnavailable", 0}})})), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(frozen(with({budget("web", "web", std::nullopt, {{"minAvailable", 2}})})), (std::set<std::string>{"a", "b"}));
  // Unreadable: the whole namespace is kept, said.
  json bad = budget("web", "web", 3);
  bad["spec"]["selector"] = {{"matchExpressions", json::array({{{"key", "app"}, {"operator", "Gt"}, {"values", {"1"}}}})}};
  auto unreadable = with({bad});
  EXPECT_EQ(frozen(unreadable), (std::set<std::string>{"a", "b", "c"}));
  EXPECT_NE(warnings_of(unreadable).find("PodDisruptionBudget ml/web: spec.selector.matchExpressions[0].operator 'Gt' is not In, "
                                         "NotIn, Exists or DoesNotExist; every pod of namespace ml is kept from eviction"),
            std::string::npos) << warnings_of(unreadable);
  // A budget is a fact of the plan: a changed budget makes an approved plan stale.
  auto h1 = parse_snapshot(list({node("a", "NVIDIA-A100-SXM4-80GB", 1, ""), budget("web", "web", 1)}), "s");
  auto h2 = parse_snapshot(list({node("a", "NVIDIA-A100-SXM4-80GB", 1, ""), budget("web", "web", 0)}), "s");
  ASSERT_TRUE(h1 && h2);
  EXPECT_NE(h1->hash, h2->hash);
}

// One node whose labels or annotation cannot be read stops only itself,
// with a warning naming it and why: a count, a replica count or a config
// that cannot be read leaves the node out (nothing on it changes); an
// unreadable layout annotation keeps the node exactly as its labels say.
// The other nodes are planned.
TEST(FleetSnapshot, OneBadNodeStopsOnlyItself) {
  auto cfg = configs();
  json bad_count = node("a", "NVIDIA-A100-SXM4-80GB", 1, "");
  bad_count["metadata"]["labels"]["nvidia.com/gpu.count"] = "eight";
  json bad_replicas = node("b", "NVIDIA-A100-SXM4-80GB", 1, "");
  bad_replicas["metadata"]["labels"]["nvidia.com/mig-1g.10gb.replicas"] = "-1";
  json far = {{"gpus", json::array({{{"index", 0}, {"mig", true},
                                     {"instances", json::array({{{"profile", "1g.10gb"}, {"start", 99999999999}}})}}})}};
  auto p = problem_of(list({bad_count, bad_replicas, node("c", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10g"),
                            node("d", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb", far), node("e", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"),
                            pod("on-d", "1g.10gb", 1, "d"), pod("waits", "1g.10gb", 1)}),
                      cfg);
  ASSERT_TRUE(p) << "one node refused the fleet: " << p.error().message;
  std::string warnings;
  for (const auto& w : p->warnings) warnings += w + "\n";
  const std::string left_out = "; the node is left out of the plan (nothing on it changes, its pods are not planned)";
  for (const std::string& want :
       std::vector<std::string>{"Node a: nvidia.com/gpu.count='eight' is not a GPU count from 1 to 64" + left_out,
        "Node b: nvidia.com/mig-1g.10gb.replicas='-1' is not a replica count from 0 to 1024" + left_out,
        "Node c: nvidia.com/mig.config='all-1g.10g' is not a config in test.yaml (nearest: all-1g.10gb, all-3g.40gb, a30-1g)" + left_out,
        std::string("Node d: annotation tessera.dev/mig-layout: gpus[0].instances[0]: start 99999999999 is not a memory slice of "
                    "A100-SXM4-80GB (0 to 7); its placements are unknown: the node is kept as it is")})
    EXPECT_NE(warnings.find(want), std::string::npos) << want << "\n" << warnings;
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->nodes[0].name, "d");
  EXPECT_TRUE(p->nodes[0].frozen);
  EXPECT_FALSE(p->nodes[0].placements_known);
  EXPECT_EQ(p->gpus[size_t(p->nodes[0].gpus[0])].instances.size(), 7u) << "d as its config says: all-1g.10gb";
  EXPECT_EQ(p->nodes[1].name, "e");
  EXPECT_FALSE(p->nodes[1].frozen);
  ASSERT_EQ(p->pods.size(), 2u);
  EXPECT_EQ(p->pods[0].id, "ml/on-d");
  EXPECT_TRUE(p->pods[0].running()) << "held on d's first free 1g.10gb";
}

// What a node serves now: mig.capable=false and mig.strategy=none nodes
// serve whole GPUs that are never cut, whatever mig.config says; a node
// whose MIG change is pending or failed (mig.config.state) is kept as it is
// and takes no new pod; success (or no state) changes nothing.
TEST(FleetSnapshot, WhatANodeServesFollowsItsMigLabels) {
  auto cfg = configs();
  auto with = [](json n, const std::string& key, const std::string& value) {
    n["metadata"]["labels"][key] = value;
    return n;
  };
  auto p = problem_of(list({with(node("incapable", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), "nvidia.com/mig.capable", "false"),
                            with(node("none", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), "nvidia.com/mig.strategy", "none"),
                            with(node("pending", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), "nvidia.com/mig.config.state", "pending"),
                            with(node("failed", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), "nvidia.com/mig.config.state", "failed"),
                            with(node("done", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), "nvidia.com/mig.config.state", "success")}),
                      cfg);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->nodes.size(), 5u);
  std::map<std::string, const Node*> by;
  for (const auto& n : p->nodes) by[n.name] = &n;
  for (const char* whole : {"incapable", "none"}) {
    const Gpu& g = p->gpus[size_t(by[whole]->gpus[0])];
    EXPECT_FALSE(g.mig) << whole;
    EXPECT_TRUE(g.fixed) << whole << ": may be cut";
    EXPECT_EQ(g.instances.size(), 1u) << whole;
    EXPECT_TRUE(by[whole]->accepts_pods()) << whole << ": its whole GPUs take pods";
  }
  EXPECT_FALSE(by["pending"]->accepts_pods());
  EXPECT_FALSE(by["failed"]->accepts_pods());
  EXPECT_TRUE(by["done"]->accepts_pods());
  EXPECT_FALSE(p->gpus[size_t(by["done"]->gpus[0])].fixed);
  std::string warnings;
  for (const auto& w : p->warnings) warnings += w + "\n";
  for (const std::string want :
       {"Node incapable: nvidia.com/mig.capable=false: its GPUs are planned as whole GPUs that never change, whatever "
        "nvidia.com/mig.config says",
        "Node none: nvidia.com/mig.strategy=none: its GPUs are planned as whole GPUs that never change",
        "Node pending: nvidia.com/mig.config.state='pending': its MIG change is not done; the node is kept as it is and takes "
        "no new pod in this plan",
        "Node failed: nvidia.com/mig.config.state='failed': its last MIG change failed; the node is kept as it is"})
    EXPECT_NE(warnings.find(want), std::string::npos) << want << "\n" << warnings;
  EXPECT_EQ(warnings.find("Node done"), std::string::npos) << warnings;
}

// One pod whose GPU request cannot be read stops only itself, with a warning
// naming it: pending, it is left out; running, its node is kept exactly as
// it is. A finished one is not looked at. The other pods are planned.
// What a pod takes of its node besides GPUs, as NodeResourcesFit reads it: the app containers'
// sum or an init container's own where larger, a limit where no request is given, the overhead,
// one pod; a node's room is its allocatable less what every pod running there asks.
TEST(FleetSnapshot, RequestsAndRoomAreReadAsTheSchedulerReadsThem) {
  json n = node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled");
  n["status"]["allocatable"] = {{"cpu", "7800m"}, {"memory", "500Gi"}, {"pods", "110"}, {"ephemeral-storage", "1e11"},
                                {"hugepages-2Mi", "0"}};
  n["status"]["capacity"] = {{"cpu", "8"}};
  json run = pod("run", "gpu", 1, "a");
  auto& c = run["spec"]["containers"];
  c[0]["resources"]["requests"] = {{"cpu", "1"}, {"memory", "2Gi"}};
  c.push_back({{"name", "side"}, {"resources", {{"limits", {{"cpu", "500m"}, {"memory", "1G"}}}}}});
  run["spec"]["initContainers"] = json::array({{{"name", "init"}, {"resources", {{"requests", {{"cpu", "2"}}}}}}});
  run["spec"]["overhead"] = {{"cpu", "250m"}};
  json web = pod("web", "gpu", 0, "a");
  web["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "0.1"}, {"memory", "128Mi"}}}};
  json other_node = web;
  other_node["metadata"]["name"] = "elsewhere";
  other_node["spec"]["nodeName"] = "b";
  auto snap = parse_snapshot(list({n, run, web, other_node}), "test");
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->nodes.size(), 1u);
  EXPECT_EQ(snap->nodes[0].allocatable, (Amounts{{"cpu", 7800}, {"memory", 500 * (int64_t(1) << 30) * 1000},
                                                 {"pods", 110000}, {"ephemeral-storage", int64_t(1e14)}}));
  ASSERT_EQ(snap->pods.size(), 1u);
  EXPECT_EQ(snap->pods[0].requests, (Amounts{{"cpu", 2250}, {"memory", (int64_t(2) << 30) * 1000 + int64_t(1e12)}, {"pods", 1000}}));
  EXPECT_EQ(snap->other_use["a"], (Amounts{{"cpu", 100}, {"memory", (int64_t(128) << 20) * 1000}, {"pods", 1000}}));
  auto cfg = configs();
  auto p = build_problem(*snap, cfg);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->nodes[0].room.at("cpu"), 7800 - 2250 - 100);
  EXPECT_EQ(p->nodes[0].room.at("pods"), 108000);
  // A request is in the hash (a plan made before it changed is stale); allocatable too.
  json more = run;
  more["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3";
  EXPECT_NE(parse_snapshot(list({n, more, web}), "test")->hash, snap->hash);
  // Quantities the API would not write stop only their pod, or are not counted, with a warning.
  json bad_gpu = pod("bad", "gpu", 1);
  bad_gpu["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "lots"}};
  json bad_web = web;
  bad_web["metadata"]["name"] = "bad-web";
  bad_web["spec"]["containers"][0]["resources"]["requests"]["memory"] = "-1Gi";
  json bad_node = n;
  bad_node["status"]["allocatable"]["cpu"] = "8 cores";
  auto bad = parse_snapshot(list({bad_node, bad_gpu, bad_web}), "test");
  ASSERT_TRUE(bad) << bad.error().message;
  ASSERT_EQ(bad->pods.size(), 1u);
  EXPECT_EQ(bad->pods[0].unreadable, "cpu 'lots' is not a quantity");
  std::string warnings;
  for (const auto& w : bad->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("Node a: status.allocatable.cpu '8 cores' is not a quantity; cpu is not fitted there"),
            std::string::npos) << warnings;
  EXPECT_NE(warnings.find("Pod ml/bad-web: memory '-1Gi' is not a quantity; what it takes of node a is not counted"),
            std::string::npos) << warnings;
  EXPECT_FALSE(bad->nodes[0].allocatable.contains("cpu"));
}

TEST(FleetSnapshot, OneUnreadablePodStopsOnlyItself) {
  auto cfg = configs();
  json two = pod("two", "1g.10gb", 1);
  two["spec"]["containers"].push_back({{"name", "d"}, {"resources", {{"limits", {{"nvidia.com/mig-2g.20gb", "1"}}}}}});
  json half = pod("half", "gpu", 1, "b");
  half["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "500m";
  json done = pod("done", "gpu", 1, "a", "Succeeded");
  done["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "lots";
  auto p = problem_of(list({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"),
                            two, half, done, pod("fine", "1g.10gb", 1)}),
                      cfg);
  ASSERT_TRUE(p) << "one pod refused the fleet: " << p.error().message;
  ASSERT_EQ(p->pods.size(), 1u);
  EXPECT_EQ(p->pods[0].id, "ml/fine");
  std::string warnings;
  for (const auto& w : p->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("Pod ml/two: asks for 2 different GPU resources (nvidia.com/mig-1g.10gb, nvidia.com/mig-2g.20gb); "
                          "the planner places a pod that asks for one MIG profile or whole GPUs; left out"),
            std::string::npos) << warnings;
  EXPECT_NE(warnings.find("Pod ml/half: nvidia.com/gpu '\"500m\"' is not a whole number of devices; its node b is kept as it is"),
            std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("ml/done"), std::string::npos) << "a finished pod was read: " << warnings;
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_FALSE(p->nodes[0].frozen);
  EXPECT_TRUE(p->nodes[1].frozen) << "the node of a running pod that cannot be read may be re-cut";
}

// Requests as the scheduler reads them: the effective request is the larger
// of the app containers' sum (plus sidecars, init containers that keep
// running) and an ordinary init container's own; a pod deleted before it was
// scheduled is no demand, one deleted while it runs still holds its device.
TEST(FleetSnapshot, InitContainersAndTerminatingPodsCountAsTheSchedulerCounts) {
  auto cfg = configs();
  auto with_init = [](json p, const std::string& resource, int count, bool sidecar) {
    json c = {{"name", "init"}, {"resources", {{"limits", {{resource, std::to_string(count)}}}}}};
    if (sidecar) c["restartPolicy"] = "Always";
    p["spec"]["initContainers"].push_back(c);
    return p;
  };
  json init_big = with_init(pod("init-big", "gpu", 1), "nvidia.com/gpu", 3, false);      // max(3, 1) = 3
  json init_small = with_init(pod("init-small", "gpu", 2), "nvidia.com/gpu", 1, false);  // max(1, 2) = 2
  json sidecar = with_init(pod("sidecar", "gpu", 1), "nvidia.com/gpu", 1, true);         // 1 + 1 = 2
  json only_init = {{"kind", "Pod"}, {"metadata", {{"name", "only-init"}, {"namespace", "ml"}}},
                    {"spec", {{"containers", json::array({{{"name", "c"}}})}}}, {"status", {{"phase", "Pending"}}}};
  only_init = with_init(only_init, "nvidia.com/mig-1g.10gb", 1, false);
  json leaving = pod("leaving", "1g.10gb", 1);
  leaving["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z";
  json stopping = pod("stopping", "1g.10gb", 1, "a");
  stopping["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z";
  auto p = problem_of(list({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), init_big, init_small, sidecar, only_init,
                            leaving, stopping}),
                      cfg);
  ASSERT_TRUE(p) << p.error().message;
  std::map<std::string, uint32_t> count;
  for (const auto& x : p->pods) count[x.id] = x.count;
  EXPECT_EQ(count, (std::map<std::string, uint32_t>{{"ml/init-big", 3}, {"ml/init-small", 2}, {"ml/sidecar", 2},
                                                    {"ml/only-init", 1}, {"ml/stopping", 1}}));
  // Read the same once cut down as a big cluster is read.
  json slim = only_init;
  EXPECT_TRUE(slim_snapshot_item(slim)) << "a pod whose only GPU is an init container's was dropped";
}

// Items cut down as a big cluster is read give the same snapshot and hash; pods without a GPU go,
// but for those running on a node (what they take of it counts).
TEST(FleetSnapshot, SlimItemsReadTheSame) {
  json ann = {{"gpus", json::array({{{"index", 0}, {"mig", false}, {"pod", "ml/run"}}})}};
  json n = node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled", ann);
  n["metadata"]["annotations"]["other"] = "x";
  n["metadata"]["managedFields"] = json::array({{{"manager", "kubelet"}}});
  n["spec"]["taints"] = json::array({{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}});
  n["status"]["conditions"] = json::array({{{"type", "MemoryPressure"}, {"status", "False"}}, {{"type", "Ready"}, {"status", "True"}}});
  n["status"]["images"] = json::array({{{"names", {"a"}}}});
  json run = pod("run", "gpu", 1, "a");
  run["spec"]["tolerations"] = json::array({{{"key", "k"}, {"operator", "Exists"}}});
  run["spec"]["volumes"] = json::array({{{"name", "v"}}});
  run["spec"]["containers"][0]["env"] = json::array({{{"name", "A"}, {"value", "1"}}});
  json wait = pod("wait", "1g.10gb", 1);
  wait["spec"]["nodeSelector"] = {{"zone", "a"}};
  json web = pod("web", "gpu", 1, "a");
  web["spec"]["containers"][0]["resources"] = {{"limits", {{"cpu", "1"}}}};
  web["spec"]["containers"][0]["env"] = json::array({{{"name", "A"}, {"value", "1"}}});
  json web_waiting = pod("web-waiting", "gpu", 1);
  web_waiting["spec"]["containers"][0]["resources"] = {{"limits", {{"cpu", "1"}}}};
  json web_done = pod("web-done", "gpu", 1, "a", "Succeeded");
  web_done["spec"]["containers"][0]["resources"] = {{"limits", {{"cpu", "1"}}}};
  const std::vector<json> items = {n, run, wait, web, web_waiting, web_done};
  auto full = parse_snapshot(list(items), "test");
  ASSERT_TRUE(full) << full.error().message;
  EXPECT_EQ(full->other_use["a"], (Amounts{{"cpu", 1000}, {"pods", 1000}}));
  std::vector<json> slim;
  for (json item : items)
    if (slim_snapshot_item(item)) slim.push_back(item);
  ASSERT_EQ(slim.size(), 4u) << "the CPU-only pod running on a node stays; the waiting and finished ones go";
  EXPECT_FALSE(slim[3]["spec"]["containers"][0].contains("env"));
  EXPECT_FALSE(slim[0]["metadata"].contains("managedFields"));
  EXPECT_FALSE(slim[0]["metadata"]["annotations"].contains("other"));
  EXPECT_FALSE(slim[1]["spec"].contains("volumes"));
  auto cut = parse_snapshot(list(slim), "test");
  ASSERT_TRUE(cut) << cut.error().message;
  EXPECT_EQ(cut->hash, full->hash);
  EXPECT_EQ(cut->pods.size(), full->pods.size());
  EXPECT_EQ(cut->other_use, full->other_use);
}

namespace {

// The test's own pruning by a field filter: object keys from the item down, arrays adding no step.
void prune(json& value, std::vector<std::string>& path, size_t& dropped) {
  if (value.is_array()) {
    for (auto& v : value) prune(v, path, dropped);
  } else if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      path.push_back(it.key());
      if (!snapshot_field_wanted(path)) {
        ++dropped;
        it = value.erase(it);
      } else {
        prune(it.value(), path, dropped);
        ++it;
      }
      path.pop_back();
    }
  }
}

}  // namespace

// Fields left unbuilt as a page is parsed are fields the snapshot never reads: the same hash.
TEST(FleetSnapshot, UnwantedFieldsAreNotRead) {
  json ann = {{"gpus", json::array({{{"index", 0}, {"mig", false}, {"pod", "ml/run"}}})}};
  json n = node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-disabled", ann);
  n["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{\"big\": true}";
  n["metadata"]["managedFields"] = json::array({{{"manager", "kubelet"}, {"fieldsV1", {{"f:status", json::object()}}}}});
  n["spec"]["taints"] = json::array({{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}});
  n["spec"]["podCIDR"] = "10.0.0.0/24";
  n["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}, {"message", "kubelet is posting ready status"}}});
  n["status"]["images"] = json::array({{{"names", {"a"}}, {"sizeBytes", 1}}});
  n["status"]["capacity"] = {{"nvidia.com/gpu", "2"}};
  json cordoned = node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb");
  cordoned["spec"]["unschedulable"] = true;
  json run = pod("run", "gpu", 1, "a");
  run["spec"]["tolerations"] = json::array({{{"key", "k"}, {"operator", "Exists"}}});
  run["spec"]["affinity"] = {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution",
                               {{"nodeSelectorTerms", json::array({{{"matchExpressions", json::array({{{"key", "zone"}, {"operator", "In"}, {"values", {"a"}}}})}}})}}}}}};
  run["spec"]["volumes"] = json::array({{{"name", "v"}, {"emptyDir", json::object()}}});
  run["spec"]["containers"][0]["env"] = json::array({{{"name", "A"}, {"value", "1"}}});
  run["spec"]["containers"][0]["image"] = "registry/app:v1";
  run["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "4";
  run["spec"]["containers"][0]["resources"]["limits"]["memory"] = "16Gi";
  run["spec"]["containers"][0]["resources"]["limits"]["example.com/fpga"] = "1";
  run["metadata"]["labels"] = {{"app", "x"}};
  run["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  json wait = pod("wait", "1g.10gb", 1);
  wait["spec"]["nodeSelector"] = {{"zone", "a"}};
  wait["spec"]["topologySpreadConstraints"] = json::array({{{"maxSkew", 1}, {"topologyKey", "zone"}}});
  json doc = list({n, cordoned, run, wait});
  auto full = parse_snapshot(doc, "test");
  ASSERT_TRUE(full) << full.error().message;
  size_t dropped = 0;
  for (auto& item : doc["items"]) {
    std::vector<std::string> path;
    prune(item, path, dropped);
  }
  EXPECT_GE(dropped, 8u) << "managedFields, images, env, volumes, image, podCIDR, capacity, an annotation";
  EXPECT_FALSE(doc["items"][0]["metadata"]["annotations"].contains("kubectl.kubernetes.io/last-applied-configuration"));
  EXPECT_TRUE(doc["items"][0]["metadata"]["annotations"].contains(kLayoutAnnotation));
  EXPECT_FALSE(doc["items"][0]["status"]["conditions"][0].contains("message"));
  EXPECT_EQ(doc["items"][2]["spec"]["containers"][0]["resources"]["limits"].size(), 3u)
      << "only nvidia.com/ resources, and the cpu and memory NodeResourcesFit fits";
  auto cut = parse_snapshot(doc, "test");
  ASSERT_TRUE(cut) << cut.error().message;
  EXPECT_EQ(cut->hash, full->hash);
  EXPECT_EQ(cut->pods.size(), full->pods.size());
  EXPECT_EQ(cut->nodes.size(), full->nodes.size());
  // And a field the snapshot reads, if left out, changes it: the filter is not "keep nothing".
  doc["items"][1]["spec"].erase("unschedulable");
  EXPECT_NE(parse_snapshot(doc, "test")->hash, full->hash);
}

TEST(FleetSnapshot, TheHashFollowsTheFactsNotTheOrder) {
  json a = list({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), pod("p", "1g.10gb", 1)});
  json b = list({pod("p", "1g.10gb", 1), node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb")});
  json c = list({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), pod("p", "1g.10gb", 1, "a")});
  EXPECT_EQ(parse_snapshot(a, "x")->hash, parse_snapshot(b, "y")->hash);
  EXPECT_NE(parse_snapshot(a, "x")->hash, parse_snapshot(c, "x")->hash);
  // Everything the plan depends on: a cordon, a taint, readiness, any label, a pod's phase and rules.
  const std::string base = parse_snapshot(a, "x")->hash;
  auto changed = [&](const std::function<void(json&)>& edit) {
    json d = a;
    edit(d);
    return parse_snapshot(d, "x")->hash;
  };
  std::set<std::string> hashes{base};
  hashes.insert(changed([](json& d) { d["items"][0]["spec"]["unschedulable"] = true; }));
  hashes.insert(changed([](json& d) { d["items"][0]["spec"]["taints"] = json::array({{{"key", "k"}, {"effect", "NoSchedule"}}}); }));
  hashes.insert(changed([](json& d) { d["items"][0]["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "False"}}}); }));
  hashes.insert(changed([](json& d) { d["items"][0]["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending"; }));
  hashes.insert(changed([](json& d) { d["items"][1]["status"]["phase"] = "Unknown"; }));
  hashes.insert(changed([](json& d) { d["items"][1]["spec"]["nodeSelector"] = {{"zone", "a"}}; }));
  EXPECT_EQ(hashes.size(), 7u);
  // But not GFD's timestamp label, which changes on every GFD pass.
  EXPECT_EQ(changed([](json& d) { d["items"][0]["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1764800000"; }), base);
}

// A node whose GPUs the catalog lacks (an L4, a part not in it yet) is whole GPUs that never
// change, with a warning, never an error for the fleet: a pending whole-GPU pod is served there,
// a pod running on a MIG device of it is left out, and a MIG pod goes elsewhere.
TEST(FleetSnapshot, AProductTheCatalogLacksIsFixedWholeGpus) {
  auto cfg = configs();
  auto f = fleet_of({node("l4", "NVIDIA-L4", 2, "all-1g.10gb"), node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"),
                     pod("whole", "gpu", 1), pod("odd", "1g.10gb", 1, "l4"), pod("small", "1g.10gb", 1)});
  ASSERT_EQ(f.problem.nodes.size(), 2u);
  EXPECT_TRUE(f.problem.nodes[1].model->profiles.empty());  // nodes sort by name: a, l4
  ASSERT_GE(f.problem.warnings.size(), 2u);
  EXPECT_EQ(f.problem.warnings[0].rfind("Node l4: nvidia.com/gpu.product='NVIDIA-L4' is not a MIG GPU in the catalog", 0), 0u)
      << f.problem.warnings[0];
  EXPECT_EQ(f.problem.pods.size(), 2u) << "the pod on the L4's MIG device is left out";
  FleetPlan plan = plan_fleet(f.problem);
  auto ok = check_fleet_plan(f.problem, plan);
  ASSERT_TRUE(ok) << ok.error().message;
  for (int g : f.problem.nodes[1].gpus) EXPECT_FALSE(plan.gpus[size_t(g)].changed);
  EXPECT_EQ(plan.objective.unserved, 0);  // small cuts the A100; whole takes an L4
  EXPECT_EQ(plan.node_config[1], "all-1g.10gb");
}

// What a pod's scheduling rules say, and the rules the planner does not model named in its warnings.
TEST(FleetSnapshot, SchedulingRulesAreReadAndTheUnmodelledNamed) {
  auto cfg = configs();
  json n = node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled");
  n["metadata"]["labels"]["zone"] = "a";
  json q = pod("q", "gpu", 1);
  q["spec"]["affinity"] = {
      {"nodeAffinity",
       {{"requiredDuringSchedulingIgnoredDuringExecution",
         {{"nodeSelectorTerms",
           json::array({{{"matchExpressions", json::array({{{"key", "zone"}, {"operator", "NotIn"}, {"values", {"a"}}}})}},
                        {{"matchFields", json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"a"}}}})}}})}}}}},
      {"podAntiAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", json::array({{{"topologyKey", "kubernetes.io/hostname"}}})}}}};
  q["spec"]["topologySpreadConstraints"] = json::array({{{"maxSkew", 1}, {"whenUnsatisfiable", "DoNotSchedule"}}});
  auto p = problem_of(list({n, q}), cfg);
  ASSERT_TRUE(p) << p.error().message;
  const Pod& pod = p->pods[0];
  ASSERT_EQ(pod.rules.required.size(), 2u);
  EXPECT_TRUE(node_admits(p->nodes[0], pod.rules));  // the second term: by name
  EXPECT_FALSE(pod.constrained);                      // every node takes it
  ASSERT_EQ(p->warnings.size(), 2u);
  EXPECT_EQ(p->warnings[0], "Pod ml/q: its pod anti-affinity is not modelled: the plan may place it where the scheduler will not");
  EXPECT_EQ(p->warnings[1], "Pod ml/q: its topology spread is not modelled: the plan may place it where the scheduler will not");
  Node other = p->nodes[0];
  other.name = "b";
  EXPECT_FALSE(node_admits(other, pod.rules));  // zone a, not named
  other.labels["zone"] = "c";
  EXPECT_TRUE(node_admits(other, pod.rules));
  other.taints.push_back({"gpu", "", "NoExecute"});
  EXPECT_FALSE(node_admits(other, pod.rules));
  other.taints.back().effect = "PreferNoSchedule";  // a preference, not a filter
  EXPECT_TRUE(node_admits(other, pod.rules));
  other.unschedulable = true;
  EXPECT_FALSE(node_admits(other, pod.rules));
}

TEST(FleetSnapshot, InfeasibleIsAResult) {
  // A profile no GPU in the fleet has: the pod stays unserved, the plan is still a plan.
  auto cfg = configs();
  auto p = problem_of(list({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), pod("odd", "1g.18gb", 1)}), cfg);
  ASSERT_TRUE(p);
  FleetPlan plan = plan_fleet(*p);
  EXPECT_EQ(plan.status, "optimal");
  EXPECT_EQ(plan.objective.unserved, 1);
  EXPECT_TRUE(check_fleet_plan(*p, plan));
}

}  // namespace
}  // namespace tessera::fleet::testing
