// NodeWatch against the fake API server: what reaches the callback, and how
// often it asks when the server (or a proxy before it) ends every watch at once.
#include "agent/node_watch.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kube/fake_apiserver.hpp"

namespace tessera::agent {
namespace {

using namespace std::chrono_literals;
using kube::testing::FakeApiServer;
using kube::testing::FakeOptions;

std::unique_ptr<kube::Client> client_for(const FakeApiServer& api) {
  kube::Credentials c;
  c.server = api.url();
  c.source = "test";
  kube::ClientOptions o;
  o.max_attempts = 1;
  auto client = kube::Client::create(c, o);
  EXPECT_TRUE(client) << client.error().message;
  return std::move(*client);
}

// Every watch ends as it opens. Before, the agent reopened it at once: a
// tight loop of requests. Now the delay doubles from 250 ms while streams keep
// ending early, so 3 s hold a handful of watches (0.25 + 0.5 + 1 + 2 s).
TEST(NodeWatch, StreamsThatEndAtOnceAreReopenedWithBackoff) {
  FakeOptions options;
  options.end_watches_at_once = true;
  FakeApiServer api(options);
  api.add_node("gpu-1", {{"nvidia.com/mig.config", "all-1g.10gb"}});
  std::atomic<int> seen{0};
  NodeWatch watch(client_for(api), "gpu-1", [&](const NodeView& v) {
    if (v.labels.contains("nvidia.com/mig.config")) ++seen;
  });
  std::this_thread::sleep_for(3s);
  watch.stop();
  const size_t watches = api.watch_requests();
  EXPECT_GE(watches, 2u) << "the watch is still reopened";
  EXPECT_LE(watches, 6u) << "a watch that ends at once must not be reopened at once";
  EXPECT_GE(seen.load(), 1) << "the list before the watch reached the callback";
}

// A server that keeps its streams open: a label set by someone else arrives
// through the watch, and nothing waits when streams last.
TEST(NodeWatch, ChangesArriveThroughTheWatch) {
  FakeApiServer api;
  api.add_node("gpu-1");
  std::mutex mu;
  std::string value;
  NodeWatch watch(client_for(api), "gpu-1", [&](const NodeView& v) {
    std::lock_guard lock(mu);
    if (auto it = v.labels.find("nvidia.com/mig.config"); it != v.labels.end()) value = it->second;
  });
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!watch.connected() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(watch.connected());
  std::this_thread::sleep_for(200ms);  // the watch is open
  api.set_node_label("gpu-1", "nvidia.com/mig.config", "all-balanced");
  bool arrived = false;
  while (!arrived && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    std::lock_guard lock(mu);
    arrived = value == "all-balanced";
  }
  EXPECT_TRUE(arrived);
  watch.stop();
  EXPECT_EQ(api.watch_requests(), 1u);
}

}  // namespace
}  // namespace tessera::agent
