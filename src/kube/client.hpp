// A small client of the Kubernetes API: the calls the node agent makes (its
// own Node, the pods on it, evictions, events), a general request for any
// other (the fleet controller's lists, ConfigMaps and other Nodes), over HTTPS with Debian's
// cpp-httplib and OpenSSL, JSON through nlohmann-json. Credentials come from
// a kubeconfig or from the pod's service account (in-cluster).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"

namespace tessera::kube {

// Where the API server is and who we are to it.
struct Credentials {
  std::string server;             // https://host:port (http:// only without credentials, or for tests)
  std::string ca_pem;             // PEM of the CA bundle to verify the server; empty: the system's
  bool insecure_skip_verify = false;
  std::string token;              // bearer token, or
  std::string token_file;         // a file re-read when it changes (bound service-account tokens rotate);
                                  // when both are set, token_file is used
  std::string client_cert_pem;    // client certificate and key (both or neither)
  std::string client_key_pem;
  std::string source;             // where these came from, for messages ("kubeconfig /x, context y")
};

// The kubeconfig's current context (or `context` when given): server, CA
// (certificate-authority file or -data), insecure-skip-tls-verify, and the
// user's token, tokenFile, or client-certificate/-key (files or -data).
// Errors name the file and field: unreadable, not YAML, no such context,
// cluster or user, exec/auth-provider plugins (not supported).
[[nodiscard]] Result<Credentials> from_kubeconfig(const std::string& path, const std::string& context = {});

// The pod's service account: KUBERNETES_SERVICE_HOST and _PORT, and
// <root>/token and <root>/ca.crt (root: /var/run/secrets/kubernetes.io/serviceaccount).
[[nodiscard]] Result<Credentials> in_cluster(const std::string& root = "/var/run/secrets/kubernetes.io/serviceaccount");

struct ClientOptions {
  std::chrono::milliseconds request_timeout{10000};  // one request: connect, send, answer
  int max_attempts = 5;                              // for idempotent requests on connection errors, 5xx and 429
  std::chrono::milliseconds backoff_initial{200};    // doubled each attempt, with jitter
  std::chrono::milliseconds backoff_max{5000};
  std::string user_agent = "tessera";
  // A token or client certificate is refused over http:// unless this is set
  // (tests only; create() then warns).
  bool allow_insecure_http = false;
};

// One HTTP answer that was not 2xx, as an error: the status, the Status
// object's reason and message when the server sent one.
struct ApiError {
  int status = 0;        // HTTP status; 0 when no answer came (connection, TLS, timeout)
  std::string reason;    // Status.reason (NotFound, Conflict, TooManyRequests, Expired, ...)
  std::string message;   // what went wrong, naming the request
};

template <typename T>
using ApiResult = expected<T, ApiError>;

// Percent-encodes a path segment or query value (everything but RFC 3986's unreserved characters).
std::string escape_path_segment(std::string_view text);

enum class EvictionResult {
  evicted,       // the API accepted the eviction (the pod is terminating)
  gone,          // the pod no longer exists
  blocked,       // 429: a PodDisruptionBudget allows no disruption now; try again later
};

// Which fields of a listed item to build: the path of object keys from the item down.
using FieldFilter = std::function<bool(std::span<const std::string> path)>;

// A List's JSON with each item's fields that `wanted` refuses left out as they are parsed (all of
// them kept when `wanted` is empty). Discarded (is_discarded()) when the text is not JSON.
nlohmann::json parse_list(std::string_view text, const FieldFilter& wanted);

// One watch event.
struct WatchEvent {
  std::string type;      // ADDED, MODIFIED, DELETED, or BOOKMARK
  nlohmann::json* object = nullptr;  // the object; valid during the callback only
};
using NodeEvent = WatchEvent;

// Every call may come from any thread; each request opens its own connection
// (a watch holds one until it ends), so a watch never delays the other calls.
// A request is logged at debug level (method, path, status, milliseconds), a
// retry at warn level.
class Client {
 public:
  // Checks the credentials: the server URL (https://host[:port][/prefix], an
  // IPv6 host in brackets), the CA bundle and client certificate and key as
  // PEM (the key must match), the token file readable. The CA bundle, when
  // given, is the only trust: the system's CAs are not added to it. Errors
  // (Errc::invalid_argument, Errc::parse, Errc::io) name `source`.
  // Sets SIGPIPE to be ignored when it has its default action, as OpenSSL
  // writes to sockets the peer may have closed.
  static Result<std::unique_ptr<Client>> create(Credentials credentials, ClientOptions options = {});
  // Destroy the client only once no call is in progress (stop() a watch and let it return first).
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // GET /api/v1/nodes/{name}.
  ApiResult<nlohmann::json> get_node(const std::string& name);

  // Merge patch of metadata.labels: a value sets a label, nullopt removes it.
  // Returns the Node as the server wrote it.
  ApiResult<nlohmann::json> patch_node_labels(const std::string& name,
                                              const std::map<std::string, std::optional<std::string>>& labels);

  // Watches one Node from `resource_version` (fieldSelector metadata.name=name)
  // until `on_event` returns false, the server ends the watch (after its
  // timeout, `timeout_seconds`), or `stop()` is called from another thread.
  // Returns the last resourceVersion seen (BOOKMARK events included), so the
  // caller resumes from it; an ApiError with status 410 (Expired) means: list
  // again. Opening the watch is retried as a GET is (no answer, 5xx, 429); a
  // stream that breaks after it opened ends the watch like the server's
  // timeout does, returning the last resourceVersion.
  ApiResult<std::string> watch_node(const std::string& name, const std::string& resource_version,
                                    const std::function<bool(const NodeEvent&)>& on_event, int timeout_seconds = 300);
  // Watches any collection: `path` is its list's path (/api/v1/pods); the same rules as
  // watch_node. `wanted`, when given, sees each event object's field paths as
  // list_all's does (metadata.resourceVersion is always built, for the resume).
  ApiResult<std::string> watch(const std::string& path, const std::string& resource_version,
                               const std::function<bool(const WatchEvent&)>& on_event, int timeout_seconds = 300,
                               const FieldFilter& wanted = {});
  // Ends a watch in progress from another thread (it returns soon after).
  // How: an atomic flag, checked when the answer's headers arrive and with
  // each piece of the stream, and httplib::ClientImpl::stop() on the watch's
  // connection, which shuts its socket so that a blocked read returns at once.
  // stop() does not wait for the watch to end, so it may be called from
  // on_event or while holding locks on_event needs. It lasts: a watch_node
  // called after stop() returns `resource_version` at once, and a watch in its
  // backoff between attempts returns without another. Other calls are sent
  // as before, but no longer retried: a call waiting to try again gives up
  // at once with its last answer, so nothing holds a shutdown up for long.
  void stop();

  // GET /api/v1/pods?fieldSelector=spec.nodeName={node}: the PodList's items.
  ApiResult<std::vector<nlohmann::json>> list_pods_on_node(const std::string& node);

  // GET /api/v1/namespaces/{ns}/pods/{name}; status 404 when it is gone.
  ApiResult<nlohmann::json> get_pod(const std::string& pod_namespace, const std::string& name);

  // POST .../pods/{name}/eviction (policy/v1, or policy/v1beta1 on a server
  // before 1.22, learned once). The API server applies PodDisruptionBudgets.
  ApiResult<EvictionResult> evict_pod(const std::string& pod_namespace, const std::string& name,
                                      std::optional<int64_t> grace_period_seconds = std::nullopt);

  // Creates a core/v1 Event about the Node `node` (involvedObject kind Node,
  // name and uid), in namespace "default", reporting component "tessera".
  // type: Normal or Warning.
  ApiResult<void> create_node_event(const std::string& node, const std::string& node_uid, const std::string& type,
                                    const std::string& reason, const std::string& message);

  // ---- General-purpose calls (the fleet controller's, and anyone's) ----

  // Any request: `path` from /api or /apis on, its query already escaped
  // (escape_path_segment helps); the answer as JSON (an empty 2xx body is
  // null). GET, PUT, PATCH and DELETE are retried as get_node is (no
  // answer, 5xx, 429 with Retry-After); a POST is sent once, unless
  // `retry_post` says that sending it again is harmless.
  ApiResult<nlohmann::json> request(const std::string& method, const std::string& path, const std::string& body = {},
                                    const std::string& content_type = "application/json", bool retry_post = false);

  // GET /api/v1/nodes: the NodeList (items, metadata.resourceVersion).
  ApiResult<nlohmann::json> list_nodes();
  // GET /api/v1/pods: every pod in every namespace, as a PodList.
  ApiResult<nlohmann::json> list_pods();
  // One collection (`path`: /api/v1/pods) as a List (kind List), read in pages of `page` items
  // (limit/continue, as kubectl pages; a continue token that expired starts the list again); its
  // metadata.resourceVersion is the list's (a watch from it misses nothing), each item with
  // `kind` and `api_version` where it has none (a typed list's items carry neither). `keep`, when
  // given, sees each item as its page arrives: it may trim it, and false leaves it out, so a big
  // cluster never sits in memory whole. `wanted`, when given, sees the path of each field of an
  // item as it is parsed (object keys from the item down, array levels adding no step: {"spec",
  // "containers", "resources"}); a field it refuses is never built, so fields nobody reads
  // (managedFields, images, env) cost a scan, not a tree of allocations.
  ApiResult<nlohmann::json> list_all(const std::string& path, const std::string& kind, const std::string& api_version,
                                     const std::function<bool(nlohmann::json&)>& keep = {}, size_t page = 500,
                                     const FieldFilter& wanted = {});

  // ConfigMaps: get (404 when absent), create, replace (PUT: the object's
  // metadata.resourceVersion, when set, makes it conditional: 409 Conflict
  // if it changed), merge patch.
  ApiResult<nlohmann::json> get_configmap(const std::string& config_namespace, const std::string& name);
  ApiResult<nlohmann::json> create_configmap(const std::string& config_namespace, const nlohmann::json& configmap);
  ApiResult<nlohmann::json> update_configmap(const std::string& config_namespace, const nlohmann::json& configmap);
  ApiResult<nlohmann::json> patch_configmap(const std::string& config_namespace, const std::string& name,
                                            const nlohmann::json& merge_patch);

  // A core/v1 Event in `event_namespace` about `involved` (an ObjectReference:
  // kind, name, namespace, uid, apiVersion), reporting `component`.
  ApiResult<void> create_event(const std::string& event_namespace, const nlohmann::json& involved, const std::string& type,
                               const std::string& reason, const std::string& message,
                               const std::string& component = "tessera");

  const Credentials& credentials() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::kube
