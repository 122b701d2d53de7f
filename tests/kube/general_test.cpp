// The client's general-purpose calls (what the fleet controller uses): any
// request, a cluster-wide list in pages, ConfigMaps, Events about any
// object, another Node's labels.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "kube/client.hpp"
#include "kube/fake_apiserver.hpp"
#include "kube/helpers.hpp"

namespace {

using json = nlohmann::json;
using tessera::kube::ApiResult;
using tessera::kube::Client;
using tessera::kube::escape_path_segment;
using tessera::kube::FieldFilter;
using tessera::kube::testing::client_for;
using tessera::kube::testing::FakeApiServer;

TEST(ClientGeneral, RequestReturnsJsonAndRetriesOnlyWhatItMay) {
  FakeApiServer server;
  server.add_node("gpu-1");
  auto client = client_for(server);
  auto node = client->request("GET", "/api/v1/nodes/gpu-1");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["metadata"]["name"], "gpu-1");
  // A GET is tried again after a 503; a POST is sent once.
  server.fail_next(1, 503);
  EXPECT_TRUE(client->request("GET", "/api/v1/nodes/gpu-1"));
  server.fail_next(1, 503);
  size_t before = server.request_count();
  auto post = client->request("POST", "/api/v1/namespaces/t/configmaps", R"({"kind":"ConfigMap","metadata":{"name":"x"}})");
  ASSERT_FALSE(post);
  EXPECT_EQ(post.error().status, 503);
  EXPECT_EQ(server.request_count(), before + 1);
  auto missing = client->request("GET", "/api/v1/nodes/" + escape_path_segment("no such/node"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().status, 404);
  EXPECT_EQ(server.requests().back().path, "/api/v1/nodes/no such/node");
}

// Nodes and pods as one List, as `kubectl get nodes,pods -A -o json` prints it.
ApiResult<nlohmann::json> nodes_and_pods(Client& client, const std::function<bool(nlohmann::json&)>& keep = {},
                                         size_t page = 500, const FieldFilter& wanted = {}) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [path, kind] : {std::pair{"/api/v1/nodes", "Node"}, std::pair{"/api/v1/pods", "Pod"}}) {
    auto list = client.list_all(path, kind, "v1", keep, page, wanted);
    if (!list) return list;
    EXPECT_EQ((*list)["kind"], "List");
    EXPECT_NE((*list)["metadata"].value("resourceVersion", ""), "") << "the list's version, for a watch from it";
    for (auto& item : (*list)["items"]) items.push_back(std::move(item));
  }
  return nlohmann::json{{"kind", "List"}, {"items", std::move(items)}};
}

TEST(ClientGeneral, NodesAndPodsAsOneList) {
  FakeApiServer server;
  server.add_node("gpu-1", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}});
  server.add_node("gpu-2");
  server.add_pod("ml", "a", "gpu-1");
  server.add_pod("web", "b", "gpu-2");
  auto client = client_for(server);
  auto list = nodes_and_pods(*client);
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ((*list)["kind"], "List");
  ASSERT_EQ((*list)["items"].size(), 4u);
  EXPECT_EQ((*list)["items"][0]["kind"], "Node");
  EXPECT_EQ((*list)["items"][3]["kind"], "Pod");
  EXPECT_EQ((*list)["items"][3]["metadata"]["namespace"], "web");
  auto seen = server.requests();
  EXPECT_EQ(seen[seen.size() - 1].path, "/api/v1/pods");
  EXPECT_FALSE(seen[seen.size() - 1].params.contains("fieldSelector")) << "every pod of every namespace: no selector";
  EXPECT_EQ(seen[seen.size() - 1].params.at("limit"), "500");
}

// A big cluster is read in pages (limit/continue); a continue token that expired starts that list
// again; `keep` trims or drops items as their page arrives.
TEST(ClientGeneral, NodesAndPodsArePagedAndFiltered) {
  FakeApiServer server;
  for (int n = 0; n < 5; ++n) server.add_node("node-" + std::to_string(n));
  for (int i = 0; i < 7; ++i) server.add_pod("ml", "p" + std::to_string(i), "node-0");
  auto client = client_for(server);
  const size_t before = server.requests().size();
  auto list = nodes_and_pods(*client, {}, 2);
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ((*list)["items"].size(), 12u);
  auto seen = server.requests();
  size_t pages = 0;
  for (size_t i = before; i < seen.size(); ++i) pages += seen[i].method == "GET";
  EXPECT_EQ(pages, 3u + 4u) << "5 nodes in pages of 2, 7 pods in pages of 2";
  std::set<std::string> names;
  for (const auto& item : (*list)["items"]) names.insert(item["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names.size(), 12u) << "no item twice, none missing";
  server.expire_next_continue();
  auto again = nodes_and_pods(
      *client, [](nlohmann::json& item) {
        if (item["kind"] == "Node") return item["metadata"]["name"] != "node-3";
        item.erase("spec");
        return true;
      },
      2);
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_EQ((*again)["items"].size(), 11u) << "node-3 left out, and nothing twice after the restart";
  EXPECT_FALSE((*again)["items"][10].contains("spec")) << "trimmed as it came";
}

// A field filter leaves an item's unwanted fields unbuilt as the page is parsed, at any depth, and
// sees each field's path from the item down (arrays adding no step); the List's own fields stay.
TEST(ClientGeneral, ListedItemsKeepOnlyWantedFields) {
  FakeApiServer server;
  server.add_node("gpu-1", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}});
  server.add_pod("ml", "a", "gpu-1");
  auto client = client_for(server);
  std::set<std::string> paths;
  auto list = nodes_and_pods(
      *client, {}, 1, [&](std::span<const std::string> path) {
        std::string joined;
        for (const auto& k : path) joined += (joined.empty() ? "" : ".") + k;
        paths.insert(joined);
        if (path[0] == "status") return false;
        return path.size() < 2 || path[0] != "metadata" || path[1] == "name" || path[1] == "labels";
      });
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ((*list)["items"].size(), 2u) << "both pages read: the List's metadata.continue was kept";
  for (const auto& item : (*list)["items"]) {
    EXPECT_FALSE(item.contains("status")) << item.dump();
    EXPECT_FALSE(item["metadata"].contains("namespace")) << item.dump();
    EXPECT_TRUE(item["metadata"].contains("name")) << item.dump();
  }
  EXPECT_EQ((*list)["items"][0]["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
  EXPECT_TRUE((*list)["items"][1]["spec"].contains("nodeName"));
  EXPECT_TRUE(paths.contains("metadata.labels.nvidia.com/gpu.product")) << "a label's path is item-relative";
  EXPECT_TRUE(paths.contains("spec.nodeName"));
}

// Arrays add no step to a field's path; a refused field is left out at any depth, whatever its type;
// the List's own fields are never offered; text that is not one JSON document is refused.
TEST(ClientGeneral, ParseListFiltersItemsFields) {
  const std::string text = R"({"kind": "PodList", "metadata": {"continue": "t"}, "items": [
    {"metadata": {"name": "a", "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:spec": {}}}]},
     "spec": {"containers": [{"name": "main", "env": [{"name": "X", "value": "1"}], "resources": {"limits": {"cpu": 1}}},
                             {"name": "side", "image": "x", "resources": {}}]},
     "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "message": "m"}], "x": [1, 2.5, null, true]}},
    {"metadata": {"name": "b"}, "spec": {"containers": []}}]})";
  std::set<std::string> seen;
  auto wanted = [&](std::span<const std::string> path) {
    std::string joined;
    for (const auto& k : path) joined += (joined.empty() ? "" : ".") + k;
    seen.insert(joined);
    return joined != "metadata.managedFields" && joined != "spec.containers.env" && joined != "spec.containers.image" &&
           joined != "status.conditions.message" && joined != "status.x";
  };
  json got = tessera::kube::parse_list(text, wanted);
  ASSERT_FALSE(got.is_discarded());
  json want = json::parse(text);
  want["items"][0]["metadata"].erase("managedFields");
  want["items"][0]["spec"]["containers"][0].erase("env");
  want["items"][0]["spec"]["containers"][1].erase("image");
  want["items"][0]["status"]["conditions"][0].erase("message");
  want["items"][0]["status"].erase("x");
  EXPECT_EQ(got, want) << got.dump();
  EXPECT_TRUE(seen.contains("spec.containers.resources.limits.cpu"));
  EXPECT_FALSE(seen.contains("metadata.managedFields.manager")) << "nothing inside a refused field is offered";
  EXPECT_FALSE(seen.contains("continue")) << "the List's own fields are not items' fields";
  EXPECT_EQ(tessera::kube::parse_list(text, {}), json::parse(text)) << "no filter: everything";
  EXPECT_TRUE(tessera::kube::parse_list(R"({"items": [)", wanted).is_discarded());
  EXPECT_TRUE(tessera::kube::parse_list(R"({"items": []} {)", wanted).is_discarded()) << "one document only";
  EXPECT_TRUE(tessera::kube::parse_list(R"({"items": [{"a": tru}]})", wanted).is_discarded());
}

TEST(ClientGeneral, ConfigMaps) {
  FakeApiServer server;
  auto client = client_for(server);
  auto absent = client->get_configmap("tessera", "plan");
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error().status, 404);
  auto made = client->create_configmap("tessera", {{"metadata", {{"name", "plan"}}}, {"data", {{"a", "1"}}}});
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ(server.configmap("tessera", "plan")["data"]["a"], "1");
  auto again = client->create_configmap("tessera", {{"metadata", {{"name", "plan"}}}});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().status, 409);
  EXPECT_EQ(again.error().reason, "AlreadyExists");
  // Replace, conditional on the resourceVersion read.
  json cm = *client->get_configmap("tessera", "plan");
  cm["data"]["a"] = "2";
  ASSERT_TRUE(client->update_configmap("tessera", cm));
  cm["data"]["a"] = "3";  // the old resourceVersion: someone else changed it since
  auto stale = client->update_configmap("tessera", cm);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().status, 409);
  EXPECT_EQ(server.configmap("tessera", "plan")["data"]["a"], "2");
  // A merge patch: annotations set and removed, other data kept.
  ASSERT_TRUE(client->patch_configmap("tessera", "plan", {{"metadata", {{"annotations", {{"tessera.dev/approve", "abc"}}}}},
                                                          {"data", {{"b", "x"}}}}));
  json now = server.configmap("tessera", "plan");
  EXPECT_EQ(now["metadata"]["annotations"]["tessera.dev/approve"], "abc");
  EXPECT_EQ(now["data"]["a"], "2");
  EXPECT_EQ(now["data"]["b"], "x");
  EXPECT_EQ(server.requests().back().header("Content-Type"), "application/merge-patch+json");
  ASSERT_TRUE(client->patch_configmap("tessera", "plan", {{"metadata", {{"annotations", {{"tessera.dev/approve", nullptr}}}}}}));
  EXPECT_FALSE(server.configmap("tessera", "plan")["metadata"]["annotations"].contains("tessera.dev/approve"));
}

TEST(ClientGeneral, EventsAboutAnyObject) {
  FakeApiServer server;
  auto client = client_for(server);
  json involved = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "tessera-fleet-plan"}, {"namespace", "tessera"}};
  ASSERT_TRUE(client->create_event("tessera", involved, "Normal", "FleetPlanProposed", "plan abc", "tessera-fleet"));
  auto events = server.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["metadata"]["namespace"], "tessera");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "ConfigMap");
  EXPECT_EQ(events[0]["reason"], "FleetPlanProposed");
  EXPECT_EQ(events[0]["source"]["component"], "tessera-fleet");
  EXPECT_TRUE(events[0]["metadata"]["name"].get<std::string>().starts_with("tessera-fleet-plan."));
}

TEST(ClientGeneral, AnotherNodesLabels) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.add_node("gpu-2", {{"nvidia.com/mig.config.state", "success"}});
  auto client = client_for(server);
  auto r = client->patch_node_labels("gpu-2", {{"nvidia.com/mig.config", "plan-x"}, {"nvidia.com/mig.config.state", std::nullopt}});
  ASSERT_TRUE(r) << r.error().message;
  json n = server.node("gpu-2");
  EXPECT_EQ(n["metadata"]["labels"]["nvidia.com/mig.config"], "plan-x");
  EXPECT_FALSE(n["metadata"]["labels"].contains("nvidia.com/mig.config.state"));
  EXPECT_FALSE(server.node("gpu-1")["metadata"]["labels"].contains("nvidia.com/mig.config"));
}

}  // namespace
