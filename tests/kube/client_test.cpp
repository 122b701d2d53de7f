// The client's requests, credentials, errors and retries against the fake API
// server over plain HTTP.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "kube/client.hpp"
#include "kube/fake_apiserver.hpp"
#include "kube/helpers.hpp"
#include "support/run.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using tessera::Errc;
using tessera::kube::Client;
using tessera::kube::ClientOptions;
using tessera::kube::Credentials;
using tessera::kube::testing::client_for;
using tessera::kube::testing::FakeApiServer;
using tessera::kube::testing::FakeOptions;
using tessera::kube::testing::fast_options;
using tessera::kube::testing::insecure_http;
using tessera::kube::testing::must_create;
using tessera::testing::TempDir;

TEST(Client, GetNodeAsksForJson) {
  FakeApiServer server;
  server.add_node("gpu-1", {{"zone", "a"}});
  auto client = client_for(server);
  auto node = client->get_node("gpu-1");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["metadata"]["name"], "gpu-1");
  EXPECT_EQ((*node)["metadata"]["labels"]["zone"], "a");
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].path, "/api/v1/nodes/gpu-1");
  EXPECT_EQ(seen[0].header("Accept"), "application/json");
  EXPECT_EQ(seen[0].header("User-Agent"), "tessera-test");
  EXPECT_EQ(seen[0].header("Authorization"), "");
}

TEST(Client, SendsTheBearerToken) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.require_token("s3cret");
  Credentials c;
  c.server = server.url();
  c.token = "s3cret";
  auto good = must_create(c, insecure_http());
  ASSERT_TRUE(good->get_node("gpu-1"));
  EXPECT_EQ(server.requests().back().header("Authorization"), "Bearer s3cret");

  c.token = "wrong";
  auto bad = must_create(c, insecure_http());
  size_t before = server.request_count();
  auto refused = bad->get_node("gpu-1");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().status, 401);
  EXPECT_EQ(refused.error().reason, "Unauthorized");
  EXPECT_EQ(server.request_count(), before + 1) << "401 is not retried";
}

TEST(Client, PicksUpARotatedTokenFile) {
  FakeApiServer server;
  server.add_node("gpu-1");
  TempDir dir;
  std::string path = dir.write("token", "first-token\n");
  server.require_token("first-token");
  Credentials c;
  c.server = server.url();
  c.token_file = path;
  auto client = must_create(c, insecure_http());
  ASSERT_TRUE(client->get_node("gpu-1"));
  EXPECT_EQ(server.requests().back().header("Authorization"), "Bearer first-token");

  // The kubelet writes the new token; its modification time moves on.
  dir.write("token", "second-token");
  std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) + 2s);
  server.require_token("second-token");
  auto node = client->get_node("gpu-1");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(server.requests().back().header("Authorization"), "Bearer second-token");
}

// A token is never sent in clear text unless a test asks for it: the error
// names the server and where the credentials came from, and nothing is sent.
TEST(Client, ATokenOverPlainHttpIsRefused) {
  FakeApiServer server;
  server.add_node("gpu-1");
  Credentials c;
  c.server = server.url();
  c.source = "kubeconfig /etc/k.conf, context x";
  for (int i = 0; i < 2; ++i) {
    c.token = i == 0 ? "s3cret" : "";
    c.token_file = i == 0 ? "" : "/var/run/secrets/token";
    auto client = Client::create(c, fast_options());
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error().code, Errc::invalid_argument);
    EXPECT_EQ(client.error().message, "server '" + server.url() +
                                          "' (kubeconfig /etc/k.conf, context x): a bearer token would go over "
                                          "http:// in clear text; use https:// (--allow-insecure-http allows it, "
                                          "for tests only)");
  }
  EXPECT_EQ(server.request_count(), 0u);
  // Without credentials plain HTTP is fine (a local proxy such as kubectl proxy).
  c = Credentials{};
  c.server = server.url();
  auto anonymous = Client::create(c, fast_options());
  ASSERT_TRUE(anonymous) << anonymous.error().message;
  EXPECT_TRUE((*anonymous)->get_node("gpu-1"));
}

TEST(Client, AnUnreadableTokenFileIsRefusedAtCreate) {
  Credentials c;
  c.server = "http://127.0.0.1:1";
  c.token_file = "/nonexistent/token";
  c.source = "kubeconfig k";
  auto client = Client::create(c, insecure_http());
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, Errc::io);
  EXPECT_NE(client.error().message.find("/nonexistent/token"), std::string::npos) << client.error().message;
  EXPECT_NE(client.error().message.find("kubeconfig k"), std::string::npos) << client.error().message;
}

TEST(Client, PatchLabelsSetsAndRemoves) {
  FakeApiServer server;
  json before = server.add_node("gpu-1", {{"a", "1"}, {"b", "2"}});
  auto client = client_for(server);
  auto node = client->patch_node_labels("gpu-1", {{"a", std::nullopt}, {"c", "3"}});
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["metadata"]["labels"], json({{"b", "2"}, {"c", "3"}}));
  EXPECT_GT(std::stoull((*node)["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(before["metadata"]["resourceVersion"].get<std::string>()));
  EXPECT_EQ(server.node("gpu-1")["metadata"]["labels"], json({{"b", "2"}, {"c", "3"}}));
  const auto seen = server.requests().back();
  EXPECT_EQ(seen.method, "PATCH");
  EXPECT_EQ(seen.header("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(json::parse(seen.body), json::parse(R"({"metadata":{"labels":{"a":null,"c":"3"}}})"));
}

TEST(Client, NotFoundCarriesTheStatus) {
  FakeApiServer server;
  auto client = client_for(server);
  auto node = client->get_node("nope");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().status, 404);
  EXPECT_EQ(node.error().reason, "NotFound");
  EXPECT_EQ(node.error().message, "GET /api/v1/nodes/nope: HTTP 404 NotFound: nodes \"nope\" not found");
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(Client, ListsThePodsOfANodeAndGetsOne) {
  FakeApiServer server;
  server.add_pod("ml", "llama-0", "gpu-1");
  server.add_pod("ml", "llama-1", "gpu-1");
  server.add_pod("ml", "other", "gpu-2");
  auto client = client_for(server);
  auto pods = client->list_pods_on_node("gpu-1");
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0]["metadata"]["name"], "llama-0");
  EXPECT_EQ(server.requests().back().params.at("fieldSelector"), "spec.nodeName=gpu-1");

  auto pod = client->get_pod("ml", "other");
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ((*pod)["spec"]["nodeName"], "gpu-2");
  auto gone = client->get_pod("ml", "nope");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().status, 404);
}

TEST(Client, RetriesUntilTheServerIsUp) {
  int port = 0;
  {
    FakeApiServer probe;  // a free port, closed again
    port = probe.port();
  }
  ClientOptions o = fast_options();
  o.max_attempts = 20;
  o.backoff_initial = 20ms;
  o.backoff_max = 50ms;
  Credentials c;
  c.server = "http://127.0.0.1:" + std::to_string(port);
  auto client = must_create(c, o);
  tessera::kube::ApiResult<json> node = tessera::unexpected(tessera::kube::ApiError{});
  std::thread caller([&] { node = client->get_node("gpu-1"); });
  std::this_thread::sleep_for(150ms);
  FakeOptions fo;
  fo.port = port;
  fo.nodes = {"gpu-1"};  // there before the port opens: the first answer the client gets has it
  FakeApiServer server(fo);
  caller.join();
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["metadata"]["name"], "gpu-1");
}

TEST(Client, NoAnswerIsStatusZeroWithTheReason) {
  int port = 0;
  {
    FakeApiServer probe;
    port = probe.port();
  }
  ClientOptions o = fast_options();
  o.max_attempts = 2;
  Credentials c;
  c.server = "http://127.0.0.1:" + std::to_string(port);
  auto node = must_create(c, o)->get_node("gpu-1");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().status, 0);
  EXPECT_EQ(node.error().message, "GET /api/v1/nodes/gpu-1: no answer from " + c.server +
                                      ": could not connect (httplib: Connection) (after 2 attempts)");
}

TEST(Client, ServerErrorsAreRetriedUpToMaxAttempts) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.fail_next(10, 500);
  auto node = client_for(server)->get_node("gpu-1");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().status, 500);
  EXPECT_EQ(node.error().reason, "InternalError");
  EXPECT_NE(node.error().message.find("(after 3 attempts)"), std::string::npos) << node.error().message;
  EXPECT_EQ(server.request_count(), 3u);
}

TEST(Client, AServerErrorThenSuccess) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.fail_next(2, 503);
  auto node = client_for(server)->patch_node_labels("gpu-1", {{"x", "y"}});
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(server.request_count(), 3u);
}

TEST(Client, ForbiddenIsNotRetried) {
  FakeApiServer server;
  server.fail_next(5, 403);
  auto node = client_for(server)->get_node("gpu-1");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().status, 403);
  EXPECT_EQ(node.error().reason, "Forbidden");
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(Client, TooManyRequestsWaitsRetryAfterCappedAtBackoffMax) {
  FakeApiServer server;
  server.add_node("gpu-1");
  server.fail_next(1, 429, "30");
  auto client = client_for(server);
  auto started = std::chrono::steady_clock::now();
  auto node = client->get_node("gpu-1");
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(server.request_count(), 2u);
  EXPECT_GE(took, 40ms);   // backoff_max
  EXPECT_LT(took, 1000ms);  // not the 30 s asked for
}

TEST(Client, CreatesANodeEvent) {
  FakeApiServer server;
  auto client = client_for(server);
  auto made = client->create_node_event("gpu-1", "uid-gpu-1", "Warning", "MigReconfigureFailed", "GPU 0: busy");
  ASSERT_TRUE(made) << made.error().message;
  auto events = server.events();
  ASSERT_EQ(events.size(), 1u);
  const json& e = events[0];
  EXPECT_EQ(server.requests().back().path, "/api/v1/namespaces/default/events");
  EXPECT_EQ(e["metadata"]["namespace"], "default");
  EXPECT_EQ(e["metadata"]["generateName"], "gpu-1.");
  EXPECT_EQ(e["metadata"]["name"].get<std::string>().rfind("gpu-1.", 0), 0u);
  EXPECT_EQ(e["involvedObject"], json({{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "gpu-1"}, {"uid", "uid-gpu-1"}}));
  EXPECT_EQ(e["reason"], "MigReconfigureFailed");
  EXPECT_EQ(e["message"], "GPU 0: busy");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["source"], json({{"component", "tessera"}, {"host", "gpu-1"}}));
  EXPECT_EQ(e["count"], 1);
  std::string first = e["firstTimestamp"].get<std::string>();
  EXPECT_EQ(first, e["lastTimestamp"].get<std::string>());
  ASSERT_EQ(first.size(), 20u) << first;  // 2024-01-02T03:04:05Z
  EXPECT_EQ(first[4], '-');
  EXPECT_EQ(first[10], 'T');
  EXPECT_EQ(first.back(), 'Z');
}

TEST(Client, RefusesServersItCannotUse) {
  for (std::string url : {"ftp://h", "h:443", "https://", "https://h:0", "https://h:99999", "https://h:x",
                          "https://fd00::1:443", "https://[fd00::1", "https://user@h", "https://h/?q"}) {
    Credentials c;
    c.server = url;
    c.source = "kubeconfig k, context 'x'";
    auto client = Client::create(c, fast_options());
    ASSERT_FALSE(client) << url;
    EXPECT_EQ(client.error().code, Errc::invalid_argument) << url;
    EXPECT_EQ(client.error().message.rfind("server '" + url + "' (kubeconfig k, context 'x'): ", 0), 0u)
        << client.error().message;
  }
}

TEST(Client, AcceptsATrailingSlash) {
  FakeApiServer server;
  server.add_node("gpu-1");
  Credentials c;
  c.server = server.url() + "/";
  ASSERT_TRUE(must_create(c)->get_node("gpu-1"));
  EXPECT_EQ(server.requests().back().path, "/api/v1/nodes/gpu-1");
}

TEST(Client, StopLeavesOtherCallsAlone) {
  FakeApiServer server;
  server.add_node("gpu-1");
  auto client = client_for(server);
  client->stop();
  EXPECT_TRUE(client->get_node("gpu-1"));
}

}  // namespace
