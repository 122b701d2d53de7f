// kube::ListWatch against the fake API server: a list, then watches that keep the cache
// current (added, changed, deleted, left out by `keep`); an unchanged cluster read again costs
// no request and hands the same List; 410 Expired lists again; a failing list is an error until
// it recovers; a server that ends every watch at once is not polled in a busy loop.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "kube/fake_apiserver.hpp"
#include "kube/helpers.hpp"
#include "kube/list_watch.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using tessera::kube::ListWatch;
using tessera::kube::ListWatchOptions;
using tessera::kube::WatchedCollection;
using tessera::kube::testing::client_for;
using tessera::kube::testing::FakeApiServer;
using tessera::kube::testing::FakeOptions;

WatchedCollection collection(const std::string& path, const std::string& kind, const std::string& api_version = "v1") {
  WatchedCollection c;
  c.path = path;
  c.kind = kind;
  c.api_version = api_version;
  return c;
}

// Nodes, pods (those labelled skip=yes left out), budgets, and claims (which the fake does not serve).
std::vector<WatchedCollection> collections() {
  std::vector<WatchedCollection> c{collection("/api/v1/nodes", "Node"), collection("/api/v1/pods", "Pod"),
                                   collection("/apis/policy/v1/poddisruptionbudgets", "PodDisruptionBudget", "policy/v1"),
                                   collection("/apis/resource.k8s.io/v1/resourceclaims", "ResourceClaim", "resource.k8s.io/v1")};
  c[1].keep = [](json& pod) {
    pod["metadata"].erase("uid");  // trimmed as it arrives
    return pod["metadata"].value("labels", json::object()).value("skip", "") != "yes";
  };
  c[3].optional = true;
  return c;
}

ListWatchOptions fast() {
  ListWatchOptions o;
  o.page = 2;
  o.watch_seconds = 1;
  o.backoff_initial = 20ms;
  o.backoff_max = 200ms;
  o.absent_recheck = 200ms;
  return o;
}

// "Kind ns/name" of each item.
std::set<std::string> names(const json& list) {
  std::set<std::string> out;
  for (const auto& item : list["items"])
    out.insert(item.value("kind", "") + " " + item["metadata"].value("namespace", "") + "/" + item["metadata"].value("name", ""));
  return out;
}

// Reads the cache until `done` holds (2 s at most); the last List read.
json read_until(ListWatch& cache, const std::function<bool(const json&)>& done) {
  json last;
  for (int i = 0; i < 200; ++i) {
    auto s = cache.snapshot(1s);
    if (s) {
      last = *s->list;
      if (done(last)) return last;
    }
    std::this_thread::sleep_for(10ms);
  }
  return last;
}

TEST(ListWatch, ListsThenFollowsTheClusterByItsWatches) {
  FakeApiServer server;
  server.add_node("gpu-1", {{"a", "1"}});
  server.add_node("gpu-2");
  server.add_node("gpu-3");
  server.add_pod("team", "p1", "gpu-1", "guard");
  server.add_pod("team", "p2", "gpu-1");
  server.add_pod("team", "hidden", "gpu-2");
  server.set_pod_label("team", "hidden", "skip", "yes");
  ListWatch cache(client_for(server), collections(), fast());
  auto first = cache.snapshot(5s);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(names(*first->list), (std::set<std::string>{"Node /gpu-1", "Node /gpu-2", "Node /gpu-3", "Pod team/p1", "Pod team/p2",
                                                   "PodDisruptionBudget team/guard"}));
  for (const auto& item : (*first->list)["items"]) {
    if (item["kind"] == "Pod") {
      EXPECT_FALSE(item["metadata"].contains("uid")) << "keep trims each item";
    }
  }

  // Paged lists: 3 nodes in pages of 2.
  size_t node_pages = 0;
  for (const auto& r : server.requests())
    if (r.path == "/api/v1/nodes" && !r.params.contains("watch")) ++node_pages;
  EXPECT_EQ(node_pages, 2u);

  server.set_node_label("gpu-1", "a", "2");
  server.add_pod("team", "p3", "gpu-3");
  server.delete_pod("team", "p2");
  server.set_pod_label("team", "p1", "skip", "yes");     // now left out
  server.set_pod_label("team", "hidden", "skip", "no");  // now kept
  server.set_budget("guard", 1);
  json now = read_until(cache, [](const json& l) {
    // Each collection follows its own watch: wait for the last change of each.
    bool budget_seen = false, label_seen = false;
    for (const auto& item : l["items"]) {
      if (item["kind"] == "PodDisruptionBudget") budget_seen = item["status"]["disruptionsAllowed"] == 1;
      if (item["metadata"]["name"] == "gpu-1") label_seen = item["metadata"]["labels"]["a"] == "2";
    }
    return budget_seen && label_seen && names(l).contains("Pod team/hidden") && !names(l).contains("Pod team/p1");
  });
  EXPECT_EQ(names(now), (std::set<std::string>{"Node /gpu-1", "Node /gpu-2", "Node /gpu-3", "Pod team/hidden", "Pod team/p3",
                                               "PodDisruptionBudget team/guard"}));
  for (const auto& item : now["items"]) {
    if (item["metadata"]["name"] == "gpu-1") {
      EXPECT_EQ(item["metadata"]["labels"]["a"], "2");
    }
  }
  const auto stats = cache.stats();
  EXPECT_EQ(stats.lists, 4u) << "one list per collection, no list again";
  EXPECT_GE(stats.events, 6u);
}

TEST(ListWatch, AnUnchangedClusterIsReadAgainWithoutARequest) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.add_pod("team", "p1", "gpu-1");
  ListWatch cache(client_for(server), collections(), fast());
  auto first = cache.snapshot(5s);
  ASSERT_TRUE(first) << first.error().message;
  const size_t requests = server.request_count() - server.watch_requests();
  auto again = cache.snapshot(1s);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->list.get(), first->list.get()) << "the same List, not a copy";
  EXPECT_EQ(again->version, first->version);
  EXPECT_NE(first->version, 0u);
  EXPECT_EQ(server.request_count() - server.watch_requests(), requests) << "no list for a read of the cache";
  // A change makes a new version; the List a reader holds is left as it was.
  server.add_node("gpu-2");
  json now = read_until(cache, [](const json& l) { return names(l).contains("Node /gpu-2"); });
  EXPECT_TRUE(names(now).contains("Node /gpu-2"));
  EXPECT_FALSE(names(*first->list).contains("Node /gpu-2"));
  auto changed = cache.snapshot(1s);
  ASSERT_TRUE(changed);
  EXPECT_NE(changed->version, first->version);
  // Nobody else holds the List now: a change goes into it in place, under a new version.
  const uint64_t before = changed->version;
  const json* place = changed->list.get();
  changed = {};
  again = {};
  first = {};
  const uint64_t events = cache.stats().events;
  server.add_node("gpu-3");
  for (int i = 0; i < 200 && cache.stats().events == events; ++i) std::this_thread::sleep_for(10ms);
  auto last = cache.snapshot(1s);
  ASSERT_TRUE(last);
  EXPECT_TRUE(names(*last->list).contains("Node /gpu-3"));
  EXPECT_NE(last->version, before);
  EXPECT_EQ(last->list.get(), place) << "changed in place, not copied";
}

TEST(ListWatch, AnExpiredVersionListsAgainAndMissesNothing) {
  FakeApiServer server;
  server.add_node("gpu-1");
  ListWatch cache(client_for(server), {collection("/api/v1/nodes", "Node")}, fast());
  ASSERT_TRUE(cache.snapshot(5s));
  // The watch (1 s) ends; meanwhile the history is compacted past its version and a node added:
  // the next watch gets 410, and only a new list shows the node.
  std::this_thread::sleep_for(100ms);
  server.add_node("gpu-2");
  server.compact();
  server.add_node("gpu-3");
  server.compact();
  json now = read_until(cache, [](const json& l) { return names(l).contains("Node /gpu-3"); });
  EXPECT_EQ(names(now), (std::set<std::string>{"Node /gpu-1", "Node /gpu-2", "Node /gpu-3"}));
}

TEST(ListWatch, AFailingListIsAnErrorUntilItRecovers) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.fail_next(3, 403);  // the first list's tries, and one more
  auto options = fast();
  options.backoff_initial = 300ms;
  ListWatch cache(client_for(server), {collection("/api/v1/nodes", "Node")}, options);
  auto failed = cache.snapshot(2s);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("/api/v1/nodes"), std::string::npos) << failed.error().message;
  EXPECT_NE(failed.error().message.find("403"), std::string::npos) << failed.error().message;
  json now = read_until(cache, [](const json& l) { return names(l).contains("Node /gpu-1"); });
  EXPECT_TRUE(names(now).contains("Node /gpu-1"));
}

TEST(ListWatch, AServerEndingEveryWatchAtOnceIsNotPolledInABusyLoop) {
  FakeOptions o;
  o.end_watches_at_once = true;
  FakeApiServer server(o);
  server.add_node("gpu-1");
  auto options = fast();
  options.backoff_initial = 100ms;
  options.backoff_max = 400ms;
  ListWatch cache(client_for(server), {collection("/api/v1/nodes", "Node")}, options);
  ASSERT_TRUE(cache.snapshot(5s));
  const size_t before = server.watch_requests();
  std::this_thread::sleep_for(1500ms);
  // Backoff 100, 200, 400, 400 ... ms: about five watches in 1.5 s, not thousands.
  EXPECT_LE(server.watch_requests() - before, 8u);
  EXPECT_GE(server.watch_requests() - before, 2u);
  EXPECT_TRUE(cache.snapshot(1s)) << "the cache stays usable: the watches end without an error";
}

TEST(ListWatch, StopEndsItsThreadsPromptlyAndLaterReadsFail) {
  FakeApiServer server;
  server.add_node("gpu-1");
  auto options = fast();
  options.watch_seconds = 60;
  auto cache = std::make_unique<ListWatch>(client_for(server), collections(), options);
  ASSERT_TRUE(cache->snapshot(5s));
  const auto start = std::chrono::steady_clock::now();
  cache->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "the watches (60 s) are cut short";
  auto after = cache->snapshot(100ms);
  ASSERT_FALSE(after);
  EXPECT_NE(after.error().message.find("stopped"), std::string::npos);
}

}  // namespace
