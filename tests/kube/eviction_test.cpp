// Evictions: accepted, pod gone, blocked by a disruption budget (never
// retried), and a server before 1.22 that knows only policy/v1beta1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/client.hpp"
#include "kube/fake_apiserver.hpp"
#include "kube/helpers.hpp"

namespace {

using json = nlohmann::json;
using tessera::kube::EvictionResult;
using tessera::kube::testing::client_for;
using tessera::kube::testing::FakeApiServer;
using tessera::kube::testing::FakeOptions;

TEST(Eviction, AnAllowedEvictionEvictsThePod) {
  FakeApiServer server;
  server.set_budget("llama", 1);
  server.add_pod("ml", "llama-0", "gpu-1", "llama");
  auto result = client_for(server)->evict_pod("ml", "llama-0", 30);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, EvictionResult::evicted);
  EXPECT_FALSE(server.has_pod("ml", "llama-0"));
  const auto seen = server.requests().back();
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.path, "/api/v1/namespaces/ml/pods/llama-0/eviction");
  EXPECT_EQ(seen.header("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(seen.body), json({{"apiVersion", "policy/v1"},
                                          {"kind", "Eviction"},
                                          {"metadata", {{"name", "llama-0"}, {"namespace", "ml"}}},
                                          {"deleteOptions", {{"gracePeriodSeconds", 30}}}}));
}

TEST(Eviction, AMissingPodIsGone) {
  FakeApiServer server;
  auto result = client_for(server)->evict_pod("ml", "nope");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, EvictionResult::gone);
  EXPECT_EQ(server.evictions_requested("policy/v1"), 1);
  EXPECT_EQ(server.evictions_requested("policy/v1beta1"), 0) << "a missing pod is not a missing version";
}

TEST(Eviction, ABudgetAllowingNothingBlocksAtOnce) {
  FakeApiServer server;
  server.set_budget("llama", 0);
  server.add_pod("ml", "llama-0", "gpu-1", "llama");
  auto result = client_for(server)->evict_pod("ml", "llama-0");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, EvictionResult::blocked);
  EXPECT_TRUE(server.has_pod("ml", "llama-0"));
  EXPECT_EQ(server.request_count(), 1u) << "429 from an eviction is an answer, not retried";
}

TEST(Eviction, TheBudgetIsSpentOneEvictionAtATime) {
  FakeApiServer server;
  server.set_budget("llama", 1);
  server.add_pod("ml", "llama-0", "gpu-1", "llama");
  server.add_pod("ml", "llama-1", "gpu-1", "llama");
  auto client = client_for(server);
  EXPECT_EQ(client->evict_pod("ml", "llama-0").value(), EvictionResult::evicted);
  EXPECT_EQ(client->evict_pod("ml", "llama-1").value(), EvictionResult::blocked);
}

TEST(Eviction, AServerErrorIsRetried) {
  FakeApiServer server;
  server.add_pod("ml", "p", "gpu-1");
  server.fail_next(1, 500);
  auto result = client_for(server)->evict_pod("ml", "p");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, EvictionResult::evicted);
  EXPECT_EQ(server.request_count(), 2u);
}

TEST(Eviction, ForbiddenIsAnError) {
  FakeApiServer server;
  server.add_pod("ml", "p", "gpu-1");
  server.fail_next(3, 403);
  auto result = client_for(server)->evict_pod("ml", "p");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().status, 403);
  EXPECT_EQ(result.error().message.rfind("POST /api/v1/namespaces/ml/pods/p/eviction: HTTP 403 Forbidden", 0), 0u)
      << result.error().message;
  EXPECT_EQ(server.request_count(), 1u);
}

class OldServer : public ::testing::TestWithParam<int> {};

TEST_P(OldServer, FallsBackToV1beta1AndRemembers) {
  FakeOptions o;
  o.before_1_22 = true;
  o.v1_eviction_status = GetParam();
  FakeApiServer server(o);
  server.set_budget("b", 1);
  server.add_pod("ml", "a", "gpu-1", "b");
  server.add_pod("ml", "b", "gpu-1", "b");
  auto client = client_for(server);

  auto first = client->evict_pod("ml", "a");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(*first, EvictionResult::evicted);
  EXPECT_EQ(server.evictions_requested("policy/v1"), 1);
  EXPECT_EQ(server.evictions_requested("policy/v1beta1"), 1);

  // Learned: v1beta1 straight away, and its answers mean what they say.
  EXPECT_EQ(client->evict_pod("ml", "b").value(), EvictionResult::blocked);
  EXPECT_EQ(client->evict_pod("ml", "gone").value(), EvictionResult::gone);
  EXPECT_EQ(server.evictions_requested("policy/v1"), 1);
  EXPECT_EQ(server.evictions_requested("policy/v1beta1"), 3);
  EXPECT_EQ(json::parse(server.requests().back().body)["apiVersion"], "policy/v1beta1");
}

TEST_P(OldServer, AMissingPodIsGoneThroughTheFallback) {
  FakeOptions o;
  o.before_1_22 = true;
  o.v1_eviction_status = GetParam();
  FakeApiServer server(o);
  auto result = client_for(server)->evict_pod("ml", "nope");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(*result, EvictionResult::gone);
  EXPECT_EQ(server.evictions_requested("policy/v1"), 1);
  EXPECT_EQ(server.evictions_requested("policy/v1beta1"), 1);
}

INSTANTIATE_TEST_SUITE_P(Answers, OldServer, ::testing::Values(404, 400),
                         [](const ::testing::TestParamInfo<int>& info) { return "v1_answered_" + std::to_string(info.param); });

}  // namespace
