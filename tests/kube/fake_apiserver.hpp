// A Kubernetes API server in the test process, on cpp-httplib (plain HTTP, or
// TLS with a certificate the test made). It keeps Nodes, Pods, disruption
// budgets, ConfigMaps and Events in memory and applies the API's rules itself: a global
// resourceVersion that every change increments, JSON merge patches (null
// removes a key), watches that stream the changes after a resourceVersion and
// answer an ERROR event with 410 for one older than its history, evictions
// refused with 429 while a budget allows no disruption, and, configured as a
// server before 1.22, no policy/v1 Eviction.
#pragma once

#include <atomic>
#include <httplib.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tessera::kube::testing {

struct FakeOptions {
  // TLS when cert and key are given (the server takes references of its own).
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  // With TLS: clients must show a certificate signed by this CA.
  X509* client_ca = nullptr;
  // A server before 1.22 (ours is 1.20): policy/v1 Eviction is unknown and
  // answered with v1_eviction_status, 404 (no such resource) or 400 (no such kind).
  bool before_1_22 = false;
  int v1_eviction_status = 404;
  int port = 0;  // 0: any free port
  // Nodes there before the port opens (a client retrying until the server is up never sees it
  // without them).
  std::vector<std::string> nodes;
  // Every watch ends as soon as it opens, with nothing sent: as a proxy that
  // closes long streams at once does.
  bool end_watches_at_once = false;
  // ResourceSlices stored as a 1.34/1.35 server without the
  // DRAPartitionableDevices and DRAConsumableCapacity gates stores them:
  // spec.sharedCounters, devices[].consumesCounters and
  // devices[].allowMultipleAllocations dropped (disabled fields are wiped).
  bool drop_partitionable_fields = false;
  // ResourceSlices validated as a 1.34 server with those gates on validates
  // them: a device may consume only a counter set defined in its own slice
  // (1.35 moved counter sets to slices of their own), anything else is
  // refused with 422 Invalid.
  bool counter_sets_in_the_devices_slice = false;
};

struct SeenRequest {
  std::string method;
  std::string path;  // without the query
  std::map<std::string, std::string> params;
  std::multimap<std::string, std::string> headers;
  std::string body;
  std::string header(const std::string& name) const;
};

class FakeApiServer {
 public:
  explicit FakeApiServer(FakeOptions options = {});
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  std::string url() const;  // http(s)://127.0.0.1:PORT
  int port() const { return port_; }

  // Nodes. Each change is an event in the watch history.
  nlohmann::json add_node(const std::string& name, const nlohmann::json& labels = nlohmann::json::object());
  nlohmann::json node(const std::string& name) const;
  // Someone else changes a label (nullopt removes it); returns the new resourceVersion.
  std::string set_node_label(const std::string& name, const std::string& key, const std::optional<std::string>& value);
  std::string resource_version() const;
  // Forgets the history: a watch from an older resourceVersion gets 410 Expired.
  void compact();

  // Pods and the budgets that guard them (disruptions allowed, as a PodDisruptionBudget's status says).
  void add_pod(const std::string& ns, const std::string& name, const std::string& node, const std::string& budget = "");
  // Someone else labels a pod (nullopt removes the label), or deletes it.
  void set_pod_label(const std::string& ns, const std::string& name, const std::string& key, const std::optional<std::string>& value);
  void delete_pod(const std::string& ns, const std::string& name);
  bool has_pod(const std::string& ns, const std::string& name) const;
  void set_budget(const std::string& name, int disruptions_allowed);
  // Eviction requests seen, by the apiVersion of their body.
  int evictions_requested(const std::string& api_version) const;

  std::vector<nlohmann::json> events() const;
  // ResourceSlices (resource.k8s.io/v1) as stored, by name: created (POST),
  // replaced (PUT), deleted and listed through the API.
  std::map<std::string, nlohmann::json> resource_slices() const;

  // ConfigMaps ("ns/name"): created, replaced (PUT; a stale metadata.resourceVersion is 409 Conflict)
  // and merge-patched through the API, or put here by the test. Empty json when absent.
  void put_configmap(const std::string& ns, const std::string& name, const nlohmann::json& data,
                     const nlohmann::json& annotations = nlohmann::json::object());
  nlohmann::json configmap(const std::string& ns, const std::string& name) const;

  // Requests must carry "Authorization: Bearer <token>" (empty: anything goes).
  void require_token(const std::string& token);
  // The next `count` requests get `status` (a Status body, Retry-After when given) whatever they ask.
  void fail_next(int count, int status, const std::string& retry_after = "");
  std::vector<SeenRequest> requests() const;
  size_t watch_requests() const;  // those with watch=true
  size_t request_count() const;
  // The next list request that carries a continue token answers 410 Expired, as the API server
  // does once a token outlives its compaction window.
  void expire_next_continue() { expire_continue_ = true; }
  // The common name of the last client certificate shown ("" when none).
  std::string last_client_cn() const;

 private:
  struct Pod {
    nlohmann::json object;
    std::string budget;
  };
  struct HistoryEntry {
    unsigned long long rv = 0;
    std::string kind;  // Node, Pod or PodDisruptionBudget
    std::string name;
    std::string line;  // the watch event, one JSON line
  };

  // limit/continue paging of a list's items (the token: the next item's index); false: answered 410.
  bool page(nlohmann::json& list, const httplib::Request& req, httplib::Response& res);
  std::atomic<bool> expire_continue_{false};
  void routes();
  void keep_body(const httplib::Request& req);  // into the request seen last with this method and path
  unsigned long long bump(nlohmann::json& object);  // next resourceVersion, written into object's metadata
  void record(const std::string& type, const nlohmann::json& object);
  // The budget `name` of namespace `ns` as a PodDisruptionBudget.
  nlohmann::json budget_object(const std::string& ns, const std::string& name) const;
  // A watch of one kind's collection (of one object with fieldSelector metadata.name=).
  void watch(const httplib::Request& req, httplib::Response& res, const std::string& kind);

  FakeOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool closing_ = false;
  unsigned long long rv_ = 1;
  unsigned long long oldest_rv_ = 0;  // history holds the changes after this one
  std::map<std::string, nlohmann::json> nodes_;
  std::map<std::string, Pod> pods_;  // "ns/name"
  std::map<std::string, int> budgets_;
  std::map<std::string, int> evictions_;
  std::vector<HistoryEntry> history_;
  std::vector<nlohmann::json> events_;
  std::map<std::string, nlohmann::json> configmaps_;  // "ns/name"
  std::map<std::string, nlohmann::json> slices_;  // ResourceSlices by name
  std::string token_;
  int fail_count_ = 0;
  int fail_status_ = 0;
  std::string fail_retry_after_;
  std::vector<SeenRequest> requests_;
  std::string client_cn_;
};

}  // namespace tessera::kube::testing
