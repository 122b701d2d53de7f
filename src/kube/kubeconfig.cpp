// Credentials from a kubeconfig file or from the pod's service account.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/file_read.hpp"
#include "core/text.hpp"
#include "kube/client.hpp"
#include "kube/tls.hpp"

namespace tessera::kube {
namespace {

// Kubeconfigs hold embedded certificates and can be long; this still stops a runaway input.
constexpr size_t kMaxKubeconfigBytes = 16u << 20;
constexpr size_t kMaxCredentialFileBytes = 1u << 20;

// Standard base64 (RFC 4648, with padding) as Go's encoding/json decodes []byte fields:
// line breaks are skipped, anything else outside the alphabet is an error.
std::optional<std::string> decode_base64(std::string_view text, size_t& bad_at) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned bits = 0;
  int nbits = 0;
  size_t symbols = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n' || c == '\r') continue;
    if (c == '=') {
      ++padding;
      ++symbols;
      if (padding > 2) {
        bad_at = i;
        return std::nullopt;
      }
      continue;
    }
    int v = value(c);
    if (v < 0 || padding > 0) {
      bad_at = i;
      return std::nullopt;
    }
    ++symbols;
    bits = (bits << 6) | static_cast<unsigned>(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out.push_back(static_cast<char>((bits >> nbits) & 0xffu));
    }
  }
  if (symbols % 4 != 0) {
    bad_at = text.size();
    return std::nullopt;
  }
  return out;
}

// yaml-cpp throws when asked the kind of a node that is not there; these ask safely.
bool is_map(const YAML::Node& n) { return n.IsDefined() && n.IsMap(); }
bool is_sequence(const YAML::Node& n) { return n.IsDefined() && n.IsSequence(); }
bool is_absent(const YAML::Node& n) { return !n.IsDefined() || n.IsNull(); }

// Reads one kubeconfig; every error names the file, the line and column where
// known, and the field.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {
    dir_ = std::filesystem::path(file_).parent_path();
  }

  const std::string& file() const { return file_; }

  unexpected<Error> error(Errc code, const YAML::Node& at, const std::string& field, const std::string& message) const {
    std::string where = file_;
    if (at.IsDefined() && at.Mark().line >= 0) {
      where += ":" + std::to_string(at.Mark().line + 1) + ":" + std::to_string(at.Mark().column + 1);
    }
    return fail(code, where + ": " + field + ": " + message);
  }

  // A string field of `parent`; "" when absent or null.
  Result<std::string> string_field(const YAML::Node& parent, const std::string& key, const std::string& field) const {
    YAML::Node node = parent[key];
    if (is_absent(node)) return std::string();
    if (!node.IsScalar()) return error(Errc::validation, node, field, "must be a string");
    return node.Scalar();
  }

  Result<bool> bool_field(const YAML::Node& parent, const std::string& key, const std::string& field) const {
    YAML::Node node = parent[key];
    if (is_absent(node)) return false;
    if (node.IsScalar()) {
      const std::string& s = node.Scalar();
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
    }
    return error(Errc::validation, node, field, "must be true or false");
  }

  Result<std::string> base64_field(const YAML::Node& parent, const std::string& key, const std::string& field) const {
    auto text = string_field(parent, key, field);
    if (!text || text->empty()) return text;
    size_t bad_at = 0;
    auto decoded = decode_base64(*text, bad_at);
    if (!decoded) {
      return error(Errc::parse, parent[key], field,
                   bad_at < text->size() ? "not valid base64 (at character " + std::to_string(bad_at + 1) + ")"
                                         : "not valid base64 (its length is not a multiple of 4)");
    }
    return *decoded;
  }

  // A file named by a field: relative to the kubeconfig's directory.
  // https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/#file-references
  std::string resolve(const std::string& path) const {
    std::filesystem::path p(path);
    if (p.is_absolute() || dir_.empty()) return path;
    return (dir_ / p).string();
  }

  Result<std::string> read_file_field(const YAML::Node& parent, const std::string& key, const std::string& field,
                                      std::string* resolved = nullptr) const {
    auto name = string_field(parent, key, field);
    if (!name || name->empty()) return name;
    std::string path = resolve(*name);
    if (resolved) *resolved = path;
    auto text = read_whole_file(path, kMaxCredentialFileBytes);
    if (!text) return error(text.error().code, parent[key], field, path + ": " + text.error().message);
    return *text;
  }

  // The entry of `list` (clusters, contexts, users) whose name is `name`, and its index.
  Result<std::pair<YAML::Node, size_t>> find_named(const YAML::Node& root, const std::string& list,
                                                   const std::string& name, const std::string& wanted_by) const {
    YAML::Node items = root[list];
    if (!is_absent(items) && !items.IsSequence()) {
      return error(Errc::validation, items, list, "must be a list");
    }
    std::vector<std::string> names;
    if (is_sequence(items)) {
      for (size_t i = 0; i < items.size(); ++i) {
        YAML::Node item = items[i];
        std::string field = list + "[" + std::to_string(i) + "]";
        if (!is_map(item)) return error(Errc::validation, item, field, "must be a mapping with name and " + entry(list));
        auto n = string_field(item, "name", field + ".name");
        if (!n) return unexpected(n.error());
        if (*n == name) return std::pair{item, i};
        names.push_back(quote(*n));
      }
    }
    std::string known = names.empty() ? "the file has none" : "it has " + join(names);
    return error(Errc::not_found, items.IsDefined() ? items : root_, list,
                 "no " + entry(list) + " named " + quote(name) + " (" + wanted_by + "; " + known + ")");
  }

  void set_root(const YAML::Node& root) { root_ = root; }

  static std::string entry(const std::string& list) {
    if (list == "clusters") return "cluster";
    if (list == "contexts") return "context";
    return "user";
  }

 private:
  std::string file_;
  std::filesystem::path dir_;
  YAML::Node root_;
};

Result<YAML::Node> load_yaml(const Reader& r, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::string where = r.file();
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    return fail(Errc::parse, where + ": not valid YAML: " + e.msg);
  }
}

Result<void> read_cluster(const Reader& r, const YAML::Node& root, const std::string& name, const std::string& context,
                          Credentials& out) {
  auto found = r.find_named(root, "clusters", name, "named by context " + quote(context));
  if (!found) return unexpected(found.error());
  auto [item, index] = *found;
  std::string base = "clusters[" + std::to_string(index) + "].cluster";
  YAML::Node cluster = item["cluster"];
  if (!is_map(cluster)) return r.error(Errc::validation, cluster.IsDefined() ? cluster : item, base, "missing or not a mapping");

  auto server = r.string_field(cluster, "server", base + ".server");
  if (!server) return unexpected(server.error());
  if (server->empty()) return r.error(Errc::validation, cluster, base + ".server", "missing (the API server's URL)");
  out.server = *server;

  auto insecure = r.bool_field(cluster, "insecure-skip-tls-verify", base + ".insecure-skip-tls-verify");
  if (!insecure) return unexpected(insecure.error());
  out.insecure_skip_verify = *insecure;

  // certificate-authority-data wins over certificate-authority, as in client-go's rest.TLSClientConfig.
  auto data = r.base64_field(cluster, "certificate-authority-data", base + ".certificate-authority-data");
  if (!data) return unexpected(data.error());
  std::string field = base + ".certificate-authority-data";
  YAML::Node at = cluster["certificate-authority-data"];
  if (data->empty()) {
    field = base + ".certificate-authority";
    at = cluster["certificate-authority"];
    data = r.read_file_field(cluster, "certificate-authority", field);
    if (!data) return unexpected(data.error());
  }
  if (!data->empty()) {
    if (out.insecure_skip_verify) {
      // client-go refuses the same: "specifying a root certificates file with the insecure flag is not allowed".
      return r.error(Errc::validation, at, field,
                     "given together with insecure-skip-tls-verify: true; use one or the other");
    }
    auto certs = tls::parse_certificates(*data);
    if (!certs) return r.error(Errc::parse, at, field, certs.error().message);
    out.ca_pem = *data;
  }
  return {};
}

Result<void> read_user(const Reader& r, const YAML::Node& root, const std::string& name, const std::string& context,
                       Credentials& out) {
  auto found = r.find_named(root, "users", name, "named by context " + quote(context));
  if (!found) return unexpected(found.error());
  auto [item, index] = *found;
  std::string base = "users[" + std::to_string(index) + "].user";
  YAML::Node user = item["user"];
  if (is_absent(user)) return {};  // a user with no credentials: anonymous
  if (!is_map(user)) return r.error(Errc::validation, user, base, "must be a mapping");

  if (!is_absent(user["exec"])) {
    return r.error(Errc::unsupported, user["exec"], base + ".exec",
                   "exec credential plugins are not supported (user " + quote(name) +
                       "); give the user a token, tokenFile or client certificate");
  }
  if (!is_absent(user["auth-provider"])) {
    return r.error(Errc::unsupported, user["auth-provider"], base + ".auth-provider",
                   "auth-provider plugins are not supported (user " + quote(name) +
                       "); give the user a token, tokenFile or client certificate");
  }
  for (const char* key : {"username", "password"}) {
    if (!is_absent(user[key])) {
      return r.error(Errc::unsupported, user[key], base + "." + key,
                     "basic authentication is not supported (user " + quote(name) +
                         "); give the user a token, tokenFile or client certificate");
    }
  }

  // token wins over tokenFile: "If both Token and TokenFile are present, Token takes
  // precedence" (client-go, tools/clientcmd/api/v1/types.go, AuthInfo.TokenFile).
  auto token = r.string_field(user, "token", base + ".token");
  if (!token) return unexpected(token.error());
  if (!token->empty()) {
    out.token = *token;
  } else {
    std::string path;
    auto content = r.read_file_field(user, "tokenFile", base + ".tokenFile", &path);
    if (!content) return unexpected(content.error());
    if (!path.empty()) out.token_file = path;
  }

  // Each of certificate and key: -data wins over the file.
  auto pem_of = [&](const std::string& key, std::string& field, YAML::Node& at) -> Result<std::string> {
    field = base + "." + key + "-data";
    at = user[key + "-data"];
    auto data = r.base64_field(user, key + "-data", field);
    if (!data || !data->empty()) return data;
    field = base + "." + key;
    at = user[key];
    return r.read_file_field(user, key, field);
  };
  std::string cert_field, key_field;
  YAML::Node cert_at, key_at;
  auto cert = pem_of("client-certificate", cert_field, cert_at);
  if (!cert) return unexpected(cert.error());
  auto key = pem_of("client-key", key_field, key_at);
  if (!key) return unexpected(key.error());
  if (cert->empty() != key->empty()) {
    if (cert->empty()) return r.error(Errc::validation, key_at, key_field, "a client key without a client-certificate");
    return r.error(Errc::validation, cert_at, cert_field, "a client certificate without a client-key");
  }
  if (!cert->empty()) {
    auto certs = tls::parse_certificates(*cert);
    if (!certs) return r.error(Errc::parse, cert_at, cert_field, certs.error().message);
    auto pkey = tls::parse_private_key(*key);
    if (!pkey) return r.error(Errc::parse, key_at, key_field, pkey.error().message);
    if (!tls::key_matches(certs->front().get(), pkey->get())) {
      return r.error(Errc::validation, key_at, key_field, "this key does not belong to the client certificate");
    }
    out.client_cert_pem = *cert;
    out.client_key_pem = *key;
  }
  return {};
}

Result<Credentials> read_kubeconfig(const std::string& path, const std::string& context) {
  Reader r(path);
  auto text = read_whole_file(path, kMaxKubeconfigBytes);
  if (!text) return fail(text.error().code, path + ": " + text.error().message);
  auto loaded = load_yaml(r, *text);
  if (!loaded) return unexpected(loaded.error());
  YAML::Node root = *loaded;
  if (!is_map(root)) return fail(Errc::validation, path + ": not a kubeconfig (the top level is not a mapping)");
  r.set_root(root);

  std::string wanted = context;
  std::string wanted_by = "given";
  if (wanted.empty()) {
    auto current = r.string_field(root, "current-context", "current-context");
    if (!current) return unexpected(current.error());
    if (current->empty()) {
      return r.error(Errc::not_found, root["current-context"], "current-context",
                     "not set, and no context was given");
    }
    wanted = *current;
    wanted_by = "the current-context";
  }
  auto found = r.find_named(root, "contexts", wanted, wanted_by);
  if (!found) return unexpected(found.error());
  auto [item, index] = *found;
  std::string base = "contexts[" + std::to_string(index) + "].context";
  YAML::Node ctx = item["context"];
  if (!is_map(ctx)) return r.error(Errc::validation, ctx.IsDefined() ? ctx : item, base, "missing or not a mapping");
  auto cluster = r.string_field(ctx, "cluster", base + ".cluster");
  if (!cluster) return unexpected(cluster.error());
  if (cluster->empty()) return r.error(Errc::validation, ctx, base + ".cluster", "missing (the context names no cluster)");
  auto user = r.string_field(ctx, "user", base + ".user");
  if (!user) return unexpected(user.error());

  Credentials out;
  out.source = "kubeconfig " + path + ", context " + quote(wanted);
  if (auto ok = read_cluster(r, root, *cluster, wanted, out); !ok) return unexpected(ok.error());
  if (!user->empty()) {
    if (auto ok = read_user(r, root, *user, wanted, out); !ok) return unexpected(ok.error());
  }
  return out;
}

}  // namespace

Result<Credentials> from_kubeconfig(const std::string& path, const std::string& context) {
  try {
    return read_kubeconfig(path, context);
  } catch (const YAML::Exception& e) {
    // The reader checks each node's kind before it looks inside; this is a net for what it missed.
    std::string where = path;
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    return fail(Errc::parse, where + ": " + e.msg);
  }
}

Result<Credentials> in_cluster(const std::string& root) {
  // What client-go's rest.InClusterConfig reads: the service's host and port from the
  // environment, the token and CA from the service account's mount.
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return fail(Errc::not_found,
                "not running in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  std::string h = host;
  if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";  // an IPv6 address
  Credentials out;
  out.server = "https://" + h + ":" + port;
  out.source = "in-cluster service account " + root;

  std::string token_path = root + "/token";
  auto token = read_whole_file(token_path, kMaxCredentialFileBytes);
  if (!token) return fail(token.error().code, token_path + ": " + token.error().message);
  out.token_file = token_path;

  std::string ca_path = root + "/ca.crt";
  auto ca = read_whole_file(ca_path, kMaxCredentialFileBytes);
  if (!ca) return fail(ca.error().code, ca_path + ": " + ca.error().message);
  auto certs = tls::parse_certificates(*ca);
  if (!certs) return fail(Errc::parse, ca_path + ": " + certs.error().message);
  out.ca_pem = *ca;
  return out;
}

}  // namespace tessera::kube
