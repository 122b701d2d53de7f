// Watching one Node: events as they happen, resuming from a resourceVersion,
// 410 Expired, the server's timeout with a bookmark, and stop().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "kube/client.hpp"
#include "kube/fake_apiserver.hpp"
#include "kube/helpers.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using tessera::kube::ApiError;
using tessera::kube::ApiResult;
using tessera::kube::NodeEvent;
using tessera::kube::testing::client_for;
using tessera::kube::testing::FakeApiServer;

struct Seen {
  std::string type;
  json labels;
  std::string rv;
};

// Collects events; the watch ends after `want` of them.
struct Collector {
  explicit Collector(size_t n) : want(n) {}
  size_t want = 0;
  std::mutex mu;
  std::vector<Seen> seen;
  bool operator()(const NodeEvent& e) {
    std::lock_guard lock(mu);
    const json& o = *e.object;
    seen.push_back({e.type, o["metadata"].value("labels", json::object()),
                    o["metadata"].value("resourceVersion", std::string())});
    return seen.size() < want;
  }
  size_t count() {
    std::lock_guard lock(mu);
    return seen.size();
  }
};

ApiResult<std::string> not_yet() { return tessera::unexpected(ApiError{-1, "", "did not return"}); }

TEST(Watch, ReceivesModifiedEventsWithTheNewLabels) {
  FakeApiServer server;
  json node = server.add_node("gpu-1");
  server.add_node("gpu-2");
  auto client = client_for(server);
  Collector events(2);
  ApiResult<std::string> result = not_yet();
  std::thread watcher([&] {
    result = client->watch_node("gpu-1", node["metadata"]["resourceVersion"], std::ref(events), 10);
  });
  std::this_thread::sleep_for(100ms);
  server.set_node_label("gpu-2", "other", "x");  // another node: not in this watch
  server.set_node_label("gpu-1", "nvidia.com/mig.config", "all-1g.10gb");
  std::string last = server.set_node_label("gpu-1", "nvidia.com/mig.config.state", "pending");
  watcher.join();
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_EQ(events.seen.size(), 2u);
  EXPECT_EQ(events.seen[0].type, "MODIFIED");
  EXPECT_EQ(events.seen[0].labels, json({{"nvidia.com/mig.config", "all-1g.10gb"}}));
  EXPECT_EQ(events.seen[1].labels,
            json({{"nvidia.com/mig.config", "all-1g.10gb"}, {"nvidia.com/mig.config.state", "pending"}}));
  EXPECT_EQ(*result, last);
  const auto request = server.requests().back();
  EXPECT_EQ(request.path, "/api/v1/nodes");
  EXPECT_EQ(request.params.at("fieldSelector"), "metadata.name=gpu-1");
  EXPECT_EQ(request.params.at("watch"), "true");
  EXPECT_EQ(request.params.at("allowWatchBookmarks"), "true");
  EXPECT_EQ(request.params.at("timeoutSeconds"), "10");
  EXPECT_EQ(request.params.at("resourceVersion"), node["metadata"]["resourceVersion"]);
}

TEST(Watch, ResumesFromAResourceVersion) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.set_node_label("gpu-1", "step", "1");
  std::string after_first = server.set_node_label("gpu-1", "step", "2");
  server.set_node_label("gpu-1", "step", "3");
  std::string last = server.set_node_label("gpu-1", "step", std::nullopt);
  Collector events(2);
  auto result = client_for(server)->watch_node("gpu-1", after_first, std::ref(events), 10);
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_EQ(events.seen.size(), 2u);
  EXPECT_EQ(events.seen[0].labels, json({{"step", "3"}}));
  EXPECT_EQ(events.seen[1].labels, json::object());  // removed
  EXPECT_EQ(*result, last);
}

TEST(Watch, WithoutAResourceVersionStartsWithTheNodeAsItIs) {
  FakeApiServer server;
  server.add_node("gpu-1", {{"a", "b"}});
  Collector events(1);
  auto result = client_for(server)->watch_node("gpu-1", "", std::ref(events), 10);
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_EQ(events.seen.size(), 1u);
  EXPECT_EQ(events.seen[0].type, "ADDED");
  EXPECT_EQ(events.seen[0].labels, json({{"a", "b"}}));
  EXPECT_FALSE(server.requests().back().params.contains("resourceVersion"));
}

TEST(Watch, ATooOldResourceVersionIsExpired) {
  FakeApiServer server;
  json node = server.add_node("gpu-1");
  server.set_node_label("gpu-1", "a", "1");
  server.compact();
  Collector events(10);
  auto result = client_for(server)->watch_node("gpu-1", node["metadata"]["resourceVersion"], std::ref(events), 10);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().status, 410);
  EXPECT_EQ(result.error().reason, "Expired");
  EXPECT_NE(result.error().message.find("GET /api/v1/nodes?fieldSelector=metadata.name%3Dgpu-1&watch=true"),
            std::string::npos)
      << result.error().message;
  EXPECT_NE(result.error().message.find("too old resource version"), std::string::npos) << result.error().message;
  EXPECT_TRUE(events.seen.empty());
}

TEST(Watch, StopEndsABlockedWatchPromptly) {
  FakeApiServer server;
  json node = server.add_node("gpu-1");
  auto client = client_for(server);
  Collector events(10);
  ApiResult<std::string> result = not_yet();
  std::atomic<bool> returned{false};
  std::thread watcher([&] {
    result = client->watch_node("gpu-1", node["metadata"]["resourceVersion"], std::ref(events), 60);
    returned = true;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(returned);
  auto stopped_at = std::chrono::steady_clock::now();
  client->stop();
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, 1s);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, node["metadata"]["resourceVersion"]);

  // It lasts: a later watch returns at once.
  auto again = client->watch_node("gpu-1", "7", std::ref(events), 60);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, "7");
}

TEST(Watch, StopFromTheCallbackEndsTheWatch) {
  FakeApiServer server;
  json node = server.add_node("gpu-1");
  auto client = client_for(server);
  std::atomic<int> calls{0};
  ApiResult<std::string> result = not_yet();
  std::thread watcher([&] {
    result = client->watch_node("gpu-1", node["metadata"]["resourceVersion"], [&](const NodeEvent&) {
      ++calls;
      client->stop();
      return true;
    }, 60);
  });
  std::this_thread::sleep_for(100ms);
  std::string rv = server.set_node_label("gpu-1", "a", "1");
  server.set_node_label("gpu-1", "a", "2");
  watcher.join();
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(*result, rv);
}

TEST(Watch, TheServersTimeoutEndsItWithTheBookmarksVersion) {
  FakeApiServer server;
  json node = server.add_node("gpu-1");
  server.add_pod("ml", "p", "gpu-2");  // the resourceVersion moves on without a change to gpu-1
  Collector events(10);
  auto result = client_for(server)->watch_node("gpu-1", node["metadata"]["resourceVersion"], std::ref(events), 1);
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_EQ(events.seen.size(), 1u);
  EXPECT_EQ(events.seen[0].type, "BOOKMARK");
  EXPECT_EQ(*result, server.resource_version());
  EXPECT_NE(*result, node["metadata"]["resourceVersion"]);
}

TEST(Watch, OpeningIsRetriedAfterAServerError) {
  FakeApiServer server;
  json node = server.add_node("gpu-1");
  server.fail_next(1, 503);
  auto client = client_for(server);
  Collector events(1);
  ApiResult<std::string> result = not_yet();
  std::thread watcher([&] {
    result = client->watch_node("gpu-1", node["metadata"]["resourceVersion"], std::ref(events), 10);
  });
  while (server.request_count() < 2) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(50ms);
  std::string rv = server.set_node_label("gpu-1", "a", "1");
  watcher.join();
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, rv);
  EXPECT_EQ(server.request_count(), 2u);
}

TEST(Watch, ForbiddenIsReportedAtOnce) {
  FakeApiServer server;
  server.fail_next(5, 403);
  Collector events(1);
  auto result = client_for(server)->watch_node("gpu-1", "5", std::ref(events), 10);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().status, 403);
  EXPECT_EQ(server.request_count(), 1u);
}

}  // namespace
