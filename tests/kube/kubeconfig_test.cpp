// Credentials from kubeconfig files and from a service account, and the
// errors: each names the file and the field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kube/client.hpp"
#include "kube/helpers.hpp"
#include "kube/test_certs.hpp"
#include "support/run.hpp"

namespace {

using tessera::Errc;
using tessera::kube::Credentials;
using tessera::kube::from_kubeconfig;
using tessera::kube::in_cluster;
using tessera::kube::testing::base64;
using tessera::kube::testing::pki;
using tessera::testing::TempDir;

// Two clusters, users and contexts; current-context: dev.
std::string two_contexts() {
  const auto& p = pki();
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: prod\n"
         "  cluster:\n"
         "    server: https://10.0.0.1:6443\n"
         "    certificate-authority-data: " + base64(p.ca.cert_pem()) + "\n"
         "- name: dev\n"
         "  cluster:\n"
         "    server: https://127.0.0.1:8443\n"
         "    insecure-skip-tls-verify: true\n"
         "users:\n"
         "- name: admin\n"
         "  user:\n"
         "    client-certificate-data: " + base64(p.client.cert_pem()) + "\n"
         "    client-key-data: " + base64(p.client.key_pem()) + "\n"
         "- name: dev-user\n"
         "  user:\n"
         "    token: dev-token\n"
         "contexts:\n"
         "- name: prod-admin\n"
         "  context:\n"
         "    cluster: prod\n"
         "    user: admin\n"
         "- name: dev\n"
         "  context:\n"
         "    cluster: dev\n"
         "    user: dev-user\n"
         "    namespace: gpu\n"
         "current-context: dev\n";
}

TEST(Kubeconfig, CurrentContextIsUsed) {
  TempDir dir;
  std::string path = dir.write("config", two_contexts());
  auto c = from_kubeconfig(path);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://127.0.0.1:8443");
  EXPECT_TRUE(c->insecure_skip_verify);
  EXPECT_EQ(c->token, "dev-token");
  EXPECT_TRUE(c->token_file.empty());
  EXPECT_TRUE(c->ca_pem.empty());
  EXPECT_TRUE(c->client_cert_pem.empty());
  EXPECT_NE(c->source.find(path), std::string::npos) << c->source;
  EXPECT_NE(c->source.find("'dev'"), std::string::npos) << c->source;
}

TEST(Kubeconfig, ExplicitContextWithEmbeddedData) {
  TempDir dir;
  auto c = from_kubeconfig(dir.write("config", two_contexts()), "prod-admin");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_FALSE(c->insecure_skip_verify);
  EXPECT_EQ(c->ca_pem, pki().ca.cert_pem());
  EXPECT_EQ(c->client_cert_pem, pki().client.cert_pem());
  EXPECT_EQ(c->client_key_pem, pki().client.key_pem());
  EXPECT_TRUE(c->token.empty());
}

TEST(Kubeconfig, FilesAreRelativeToTheKubeconfigsDirectory) {
  TempDir dir;
  const auto& p = pki();
  std::filesystem::create_directories(dir.path() + "/kube/certs");
  dir.write("kube/ca.crt", p.ca.cert_pem());
  dir.write("kube/certs/client.crt", p.client.cert_pem());
  dir.write("kube/certs/client.key", p.client.key_pem());
  std::string config = dir.write("kube/config",
                                 "clusters:\n"
                                 "- name: c\n"
                                 "  cluster:\n"
                                 "    server: https://127.0.0.1:6443\n"
                                 "    certificate-authority: ca.crt\n"
                                 "users:\n"
                                 "- name: u\n"
                                 "  user:\n"
                                 "    client-certificate: certs/client.crt\n"
                                 "    client-key: " + dir.path() + "/kube/certs/client.key\n"
                                 "contexts:\n"
                                 "- name: x\n"
                                 "  context: {cluster: c, user: u}\n"
                                 "current-context: x\n");
  auto c = from_kubeconfig(config);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->ca_pem, p.ca.cert_pem());
  EXPECT_EQ(c->client_cert_pem, p.client.cert_pem());
  EXPECT_EQ(c->client_key_pem, p.client.key_pem());
}

TEST(Kubeconfig, TokenFileIsKeptAsAPathRelativeToTheKubeconfig) {
  TempDir dir;
  dir.write("token", "abc\n");
  auto c = from_kubeconfig(dir.write("config",
                                     "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
                                     "users: [{name: u, user: {tokenFile: token}}]\n"
                                     "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                                     "current-context: x\n"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->token_file, dir.path() + "/token");
  EXPECT_TRUE(c->token.empty());
}

TEST(Kubeconfig, TokenWinsOverTokenFileAndDataOverFiles) {
  TempDir dir;
  auto c = from_kubeconfig(dir.write(
      "config", "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: missing.crt, "
                "certificate-authority-data: '" + base64(pki().ca.cert_pem()) + "'}}]\n"
                "users: [{name: u, user: {token: t1, tokenFile: missing-token}}]\n"
                "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                "current-context: x\n"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->token, "t1");
  EXPECT_TRUE(c->token_file.empty());
  EXPECT_EQ(c->ca_pem, pki().ca.cert_pem());
}

TEST(Kubeconfig, AContextWithoutUserHasNoCredentials) {
  TempDir dir;
  auto c = from_kubeconfig(dir.write("config",
                                     "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
                                     "contexts: [{name: x, context: {cluster: c}}]\n"
                                     "current-context: x\n"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->token.empty());
  EXPECT_TRUE(c->client_cert_pem.empty());
}

struct BadCase {
  const char* description;
  std::string yaml;  // "" for no file at all
  std::string context;
  Errc code;
  std::vector<std::string> says;  // beside the file's path
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.description; }

std::string with_cluster(const std::string& cluster_body, const std::string& user_body = "token: t") {
  return "clusters:\n- name: c\n  cluster:\n" + cluster_body + "users:\n- name: u\n  user:\n    " + user_body +
         "\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";
}

std::string with_user(const std::string& user_body) {
  return with_cluster("    server: https://127.0.0.1:6443\n", user_body);
}

std::vector<BadCase> bad_cases() {
  const auto& p = pki();
  const std::string server = "    server: https://127.0.0.1:6443\n";
  return {
      {"file missing", "", "", Errc::not_found, {"cannot open file"}},
      {"malformed YAML", "clusters: [\n  - {name: c\n", "", Errc::parse, {"not valid YAML"}},
      {"not a mapping", "- a\n- b\n", "", Errc::validation, {"not a kubeconfig"}},
      {"no current context", "clusters: []\n", "", Errc::not_found, {"current-context", "not set"}},
      {"no such context", with_user("token: t"), "other", Errc::not_found,
       {"contexts:", "no context named 'other'", "it has 'x'"}},
      {"no such cluster",
       "clusters: [{name: a, cluster: {server: 'https://h'}}]\ncontexts: [{name: x, context: {cluster: b}}]\n"
       "current-context: x\n",
       "", Errc::not_found, {"clusters:", "no cluster named 'b'", "named by context 'x'"}},
      {"no such user",
       "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: nobody}}]\ncurrent-context: x\n",
       "", Errc::not_found, {"users:", "no user named 'nobody'", "the file has none"}},
      {"context without cluster", "contexts: [{name: x, context: {user: u}}]\ncurrent-context: x\n", "",
       Errc::validation, {"contexts[0].context.cluster", "missing"}},
      {"server missing", with_cluster("    insecure-skip-tls-verify: true\n"), "", Errc::validation,
       {"clusters[0].cluster.server", "missing"}},
      {"server not a string", with_cluster("    server: {a: b}\n"), "", Errc::validation,
       {"clusters[0].cluster.server", "must be a string"}},
      {"insecure not a boolean", with_cluster(server + "    insecure-skip-tls-verify: maybe\n"), "",
       Errc::validation, {"clusters[0].cluster.insecure-skip-tls-verify", "true or false"}},
      {"CA data bad base64", with_cluster(server + "    certificate-authority-data: 'not*base64'\n"), "",
       Errc::parse, {"clusters[0].cluster.certificate-authority-data", "not valid base64 (at character 4)"}},
      {"CA data not PEM", with_cluster(server + "    certificate-authority-data: " + base64("hello") + "\n"), "",
       Errc::parse, {"clusters[0].cluster.certificate-authority-data", "no PEM certificate"}},
      {"CA file missing", with_cluster(server + "    certificate-authority: missing.crt\n"), "", Errc::not_found,
       {"clusters[0].cluster.certificate-authority", "missing.crt: cannot open file: No such file or directory"}},
      {"CA and insecure",
       with_cluster(server + "    insecure-skip-tls-verify: true\n    certificate-authority-data: " +
                    base64(p.ca.cert_pem()) + "\n"),
       "", Errc::validation, {"clusters[0].cluster.certificate-authority-data", "insecure-skip-tls-verify"}},
      {"exec plugin", with_user("exec: {command: aws, apiVersion: client.authentication.k8s.io/v1beta1}"), "",
       Errc::unsupported, {"users[0].user.exec", "exec credential plugins are not supported", "user 'u'"}},
      {"auth-provider", with_user("auth-provider: {name: gcp}"), "", Errc::unsupported,
       {"users[0].user.auth-provider", "not supported"}},
      {"basic auth", with_user("username: admin"), "", Errc::unsupported,
       {"users[0].user.username", "basic authentication"}},
      {"client key bad base64", with_user("{client-certificate-data: " + base64(p.client.cert_pem()) +
                                          ", client-key-data: 'AAA'}"),
       "", Errc::parse, {"users[0].user.client-key-data", "not valid base64"}},
      {"certificate without key", with_user("client-certificate-data: " + base64(p.client.cert_pem())), "",
       Errc::validation, {"users[0].user.client-certificate-data", "without a client-key"}},
      {"key of another certificate",
       with_user("{client-certificate-data: " + base64(p.client.cert_pem()) +
                 ", client-key-data: " + base64(p.server.key_pem()) + "}"),
       "", Errc::validation, {"users[0].user.client-key-data", "does not belong"}},
      {"key not PEM",
       with_user("{client-certificate-data: " + base64(p.client.cert_pem()) + ", client-key-data: " +
                 base64("junk") + "}"),
       "", Errc::parse, {"users[0].user.client-key-data", "no PEM private key"}},
      {"token file missing", with_user("tokenFile: nothere"), "", Errc::not_found,
       {"users[0].user.tokenFile", "nothere: cannot open file"}},
  };
}

class KubeconfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(KubeconfigErrors, NameTheFileAndTheField) {
  const BadCase& c = GetParam();
  TempDir dir;
  std::string path = dir.path() + "/config";
  if (!c.yaml.empty()) dir.write("config", c.yaml);
  auto result = from_kubeconfig(path, c.context);
  ASSERT_FALSE(result) << c.description;
  const std::string& message = result.error().message;
  EXPECT_EQ(result.error().code, c.code) << c.description << ": " << message;
  EXPECT_EQ(message.rfind(path, 0), 0u) << c.description << ": " << message;
  for (const auto& part : c.says) {
    EXPECT_NE(message.find(part), std::string::npos) << c.description << ": '" << part << "' not in: " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, KubeconfigErrors, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           std::string name;
                           for (const char* s = info.param.description; *s; ++s) {
                             name += std::isalnum(static_cast<unsigned char>(*s)) ? *s : '_';
                           }
                           return name;
                         });

TEST(Kubeconfig, ErrorsCarryTheLineOfTheField) {
  TempDir dir;
  std::string path = dir.write("config", with_user("exec: {command: x}"));
  auto result = from_kubeconfig(path);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().message.rfind(path + ":8:11: users[0].user.exec: ", 0), 0u) << result.error().message;
}

// Sets environment variables for one test and puts them back.
class ScopedEnv {
 public:
  void set(const std::string& name, const std::optional<std::string>& value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    apply(name, value);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) apply(it->first, it->second);
  }

 private:
  static void apply(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(InCluster, ReadsTheServiceAccountAndTheEnvironment) {
  TempDir root;
  root.write("token", "sa-token\n");
  root.write("ca.crt", pki().ca.cert_pem());
  ScopedEnv env;
  env.set("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  env.set("KUBERNETES_SERVICE_PORT", "443");
  auto c = in_cluster(root.path());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token_file, root.path() + "/token");
  EXPECT_EQ(c->ca_pem, pki().ca.cert_pem());
  EXPECT_NE(c->source.find(root.path()), std::string::npos);
}

TEST(InCluster, AnIPv6HostGoesInBrackets) {
  TempDir root;
  root.write("token", "t");
  root.write("ca.crt", pki().ca.cert_pem());
  ScopedEnv env;
  env.set("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
  env.set("KUBERNETES_SERVICE_PORT", "6443");
  auto c = in_cluster(root.path());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://[fd00:10:96::1]:6443");
}

TEST(InCluster, OutsideAPodSaysWhatIsMissing) {
  TempDir root;
  ScopedEnv env;
  env.set("KUBERNETES_SERVICE_HOST", std::nullopt);
  env.set("KUBERNETES_SERVICE_PORT", "443");
  auto c = in_cluster(root.path());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Errc::not_found);
  EXPECT_NE(c.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos) << c.error().message;
}

TEST(InCluster, AMissingTokenOrCaIsNamed) {
  TempDir root;
  ScopedEnv env;
  env.set("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  env.set("KUBERNETES_SERVICE_PORT", "443");
  auto c = in_cluster(root.path());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message.rfind(root.path() + "/token: cannot open file", 0), 0u) << c.error().message;
  root.write("token", "t");
  root.write("ca.crt", "not a certificate");
  c = in_cluster(root.path());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, root.path() + "/ca.crt: no PEM certificate in it");
}

}  // namespace
