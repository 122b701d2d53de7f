// HTTPS: the server's certificate is checked against the given CA and the
// host, unless verification is switched off; client certificates; a watch
// stopped over TLS. Every certificate is made by the test (test_certs.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "kube/client.hpp"
#include "kube/fake_apiserver.hpp"
#include "kube/helpers.hpp"
#include "kube/test_certs.hpp"
#include "support/run.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using tessera::Errc;
using tessera::kube::ApiError;
using tessera::kube::ApiResult;
using tessera::kube::Client;
using tessera::kube::Credentials;
using tessera::kube::from_kubeconfig;
using tessera::kube::NodeEvent;
using tessera::kube::testing::base64;
using tessera::kube::testing::FakeApiServer;
using tessera::kube::testing::FakeOptions;
using tessera::kube::testing::fast_options;
using tessera::kube::testing::Issued;
using tessera::kube::testing::must_create;
using tessera::kube::testing::pki;

FakeOptions tls_server(const Issued& cert, const Issued* client_ca = nullptr) {
  FakeOptions o;
  o.cert = cert.cert.get();
  o.key = cert.key.get();
  if (client_ca) o.client_ca = client_ca->cert.get();
  return o;
}

Credentials trusting(const FakeApiServer& server, const Issued& ca) {
  Credentials c;
  c.server = server.url();
  c.ca_pem = ca.cert_pem();
  c.source = "test";
  return c;
}

TEST(Tls, TheRightCaIsTrusted) {
  FakeApiServer server(tls_server(pki().server));
  server.add_node("gpu-1");
  ASSERT_EQ(server.url().rfind("https://", 0), 0u);
  auto node = must_create(trusting(server, pki().ca))->get_node("gpu-1");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["metadata"]["name"], "gpu-1");
}

TEST(Tls, AnUnrelatedCaIsRefused) {
  FakeApiServer server(tls_server(pki().server));
  server.add_node("gpu-1");
  auto node = must_create(trusting(server, pki().other_ca))->get_node("gpu-1");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().status, 0);
  EXPECT_EQ(node.error().message, "GET /api/v1/nodes/gpu-1: no answer from " + server.url() +
                                      ": the server's certificate was refused: unable to get local issuer certificate "
                                      "(httplib: SSLServerVerification)");
  EXPECT_EQ(server.request_count(), 0u);
}

TEST(Tls, WithoutACaOnlyTheSystemsCasAreTrusted) {
  FakeApiServer server(tls_server(pki().server));
  Credentials c;
  c.server = server.url();
  auto node = must_create(c)->get_node("gpu-1");
  ASSERT_FALSE(node);
  EXPECT_NE(node.error().message.find("the server's certificate was refused: unable to get local issuer certificate"),
            std::string::npos)
      << node.error().message;
}

TEST(Tls, TheHostIsChecked) {
  FakeApiServer server(tls_server(pki().wrong_host));  // signed by the right CA, for 10.1.2.3
  auto node = must_create(trusting(server, pki().ca))->get_node("gpu-1");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().status, 0);
  EXPECT_NE(node.error().message.find("the server's certificate was refused: it does not name 127.0.0.1"),
            std::string::npos)
      << node.error().message;
}

TEST(Tls, InsecureSkipVerifyConnectsAnyway) {
  FakeApiServer server(tls_server(pki().wrong_host));
  server.add_node("gpu-1");
  Credentials c;
  c.server = server.url();
  c.insecure_skip_verify = true;
  auto node = must_create(c)->get_node("gpu-1");
  ASSERT_TRUE(node) << node.error().message;
}

TEST(Tls, AClientCertificateIsShown) {
  const auto& p = pki();
  FakeApiServer server(tls_server(p.server, &p.ca));
  server.add_node("gpu-1");
  Credentials c = trusting(server, p.ca);
  c.client_cert_pem = p.client.cert_pem();
  c.client_key_pem = p.client.key_pem();
  auto node = must_create(c)->get_node("gpu-1");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(server.last_client_cn(), "system:node:gpu-1");

  auto anonymous = must_create(trusting(server, p.ca))->get_node("gpu-1");
  ASSERT_FALSE(anonymous);
  EXPECT_EQ(anonymous.error().status, 0);
}

TEST(Tls, AKubeconfigWithEmbeddedCertificatesWorksEndToEnd) {
  const auto& p = pki();
  FakeApiServer server(tls_server(p.server, &p.ca));
  server.add_node("gpu-1");
  tessera::testing::TempDir dir;
  std::string path = dir.write("config",
                               "clusters:\n"
                               "- name: c\n"
                               "  cluster:\n"
                               "    server: " + server.url() + "\n"
                               "    certificate-authority-data: " + base64(p.ca.cert_pem()) + "\n"
                               "users:\n"
                               "- name: u\n"
                               "  user:\n"
                               "    client-certificate-data: " + base64(p.client.cert_pem()) + "\n"
                               "    client-key-data: " + base64(p.client.key_pem()) + "\n"
                               "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                               "current-context: x\n");
  auto credentials = from_kubeconfig(path);
  ASSERT_TRUE(credentials) << credentials.error().message;
  auto client = must_create(*credentials);
  auto node = client->patch_node_labels("gpu-1", {{"k", "v"}});
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["metadata"]["labels"]["k"], "v");
  EXPECT_EQ(server.last_client_cn(), "system:node:gpu-1");
}

TEST(Tls, StopEndsAWatchOverTls) {
  FakeApiServer server(tls_server(pki().server));
  json node = server.add_node("gpu-1");
  auto client = must_create(trusting(server, pki().ca));
  int events = 0;
  ApiResult<std::string> result = tessera::unexpected(ApiError{-1, "", "did not return"});
  std::thread watcher([&] {
    result = client->watch_node("gpu-1", node["metadata"]["resourceVersion"], [&](const NodeEvent&) {
      ++events;
      return true;
    }, 60);
  });
  std::this_thread::sleep_for(100ms);
  std::string rv = server.set_node_label("gpu-1", "a", "1");
  std::this_thread::sleep_for(100ms);
  auto stopped_at = std::chrono::steady_clock::now();
  client->stop();
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, 1s);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(events, 1);
  EXPECT_EQ(*result, rv);
}

TEST(Tls, CreateChecksThePem) {
  const auto& p = pki();
  Credentials c;
  c.server = "https://127.0.0.1:6443";
  c.source = "kubeconfig k";
  c.ca_pem = "junk";
  auto client = Client::create(c, fast_options());
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().code, Errc::parse);
  EXPECT_EQ(client.error().message, "CA bundle (kubeconfig k): no PEM certificate in it");

  c.ca_pem = p.ca.cert_pem();
  c.client_cert_pem = p.client.cert_pem();
  client = Client::create(c, fast_options());
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().message, "client certificate and key (kubeconfig k): give both or neither");

  c.client_key_pem = p.server.key_pem();
  client = Client::create(c, fast_options());
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().message, "client key (kubeconfig k): it does not belong to the client certificate");

  c.client_key_pem = p.client.key_pem();
  EXPECT_TRUE(Client::create(c, fast_options()));
}

}  // namespace
