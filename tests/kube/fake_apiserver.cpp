#include "kube/fake_apiserver.hpp"

#include <algorithm>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <random>
#include <set>
#include <stdexcept>

namespace tessera::kube::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

json status_object(int code, const std::string& reason, const std::string& message, const json& details = nullptr) {
  json s = {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", code < 400 ? "Success" : "Failure"},
            {"message", message},
            {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = details;
  return s;
}

void answer(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void answer_status(httplib::Response& res, int code, const std::string& reason, const std::string& message,
                   const json& details = nullptr) {
  answer(res, code, status_object(code, reason, message, details));
}

std::string reason_for(int code) {
  switch (code) {
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 409: return "Conflict";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    default: return "";
  }
}

std::string suffix() {
  static std::mt19937 rng{42};
  static const char letters[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string s;
  for (int i = 0; i < 5; ++i) s.push_back(letters[rng() % (sizeof letters - 1)]);
  return s;
}

}  // namespace

std::string SeenRequest::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

FakeApiServer::FakeApiServer(FakeOptions options) : options_(options) {
  if (options_.cert && options_.key) {
    X509_STORE* client_store = nullptr;
    if (options_.client_ca) {
      client_store = X509_STORE_new();
      X509_STORE_add_cert(client_store, options_.client_ca);
    }
    // The SSLServer's SSL_CTX takes the store (SSL_CTX_set_cert_store) and references to cert and key.
    server_ = std::make_unique<httplib::SSLServer>(options_.cert, options_.key, client_store);
    tls_ = true;
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) throw std::runtime_error("fake API server: TLS setup failed");
  for (const auto& name : options_.nodes) add_node(name);
  routes();
  if (options_.port > 0) {
    if (!server_->bind_to_port("127.0.0.1", options_.port)) {
      throw std::runtime_error("fake API server: cannot bind port " + std::to_string(options_.port));
    }
    port_ = options_.port;
  } else {
    port_ = server_->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("fake API server: cannot bind a port");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(1ms);
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  changed_.notify_all();
  server_->stop();
  thread_.join();
}

std::string FakeApiServer::url() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

unsigned long long FakeApiServer::bump(json& object) {
  ++rv_;
  object["metadata"]["resourceVersion"] = std::to_string(rv_);
  return rv_;
}

void FakeApiServer::record(const std::string& type, const json& object) {
  json event = {{"type", type}, {"object", object}};
  history_.push_back(HistoryEntry{rv_, object["kind"].get<std::string>(), object["metadata"]["name"].get<std::string>(),
                                  event.dump() + "\n"});
  changed_.notify_all();
}

json FakeApiServer::budget_object(const std::string& ns, const std::string& name) const {
  auto allowed = budgets_.find(name);
  return {{"kind", "PodDisruptionBudget"},
          {"apiVersion", "policy/v1"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"resourceVersion", std::to_string(rv_)}}},
          {"spec", {{"selector", {{"matchLabels", {{"budget", name}}}}}}},
          {"status", {{"disruptionsAllowed", allowed == budgets_.end() ? 0 : allowed->second}}}};
}

json FakeApiServer::add_node(const std::string& name, const json& labels) {
  std::lock_guard lock(mu_);
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", name}, {"uid", "uid-" + name}, {"labels", labels}}},
               {"status", {{"capacity", {{"nvidia.com/gpu", "8"}}}}}};
  bump(node);
  nodes_[name] = node;
  record("ADDED", node);
  return node;
}

json FakeApiServer::node(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  return it == nodes_.end() ? json() : it->second;
}

std::string FakeApiServer::set_node_label(const std::string& name, const std::string& key,
                                          const std::optional<std::string>& value) {
  std::lock_guard lock(mu_);
  json& node = nodes_.at(name);
  json patch = {{"metadata", {{"labels", {{key, value ? json(*value) : json(nullptr)}}}}}};
  node.merge_patch(patch);
  bump(node);
  record("MODIFIED", node);
  return std::to_string(rv_);
}

std::string FakeApiServer::resource_version() const {
  std::lock_guard lock(mu_);
  return std::to_string(rv_);
}

void FakeApiServer::compact() {
  std::lock_guard lock(mu_);
  history_.clear();
  oldest_rv_ = rv_;
}

void FakeApiServer::add_pod(const std::string& ns, const std::string& name, const std::string& node,
                            const std::string& budget) {
  std::lock_guard lock(mu_);
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + ns + "-" + name}}},
              {"spec", {{"nodeName", node}}}};
  if (!budget.empty()) pod["metadata"]["labels"] = {{"budget", budget}};  // what its budget selects
  bool new_budget = !budget.empty();
  for (const auto& [key, p] : pods_)
    if (p.budget == budget && p.object["metadata"]["namespace"] == ns) new_budget = false;
  bump(pod);
  pods_[ns + "/" + name] = Pod{pod, budget};
  record("ADDED", pod);
  if (new_budget) {
    ++rv_;
    record("ADDED", budget_object(ns, budget));
  }
}

void FakeApiServer::set_pod_label(const std::string& ns, const std::string& name, const std::string& key,
                                  const std::optional<std::string>& value) {
  std::lock_guard lock(mu_);
  json& pod = pods_.at(ns + "/" + name).object;
  pod.merge_patch(json{{"metadata", {{"labels", {{key, value ? json(*value) : json(nullptr)}}}}}});
  bump(pod);
  record("MODIFIED", pod);
}

void FakeApiServer::delete_pod(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(ns + "/" + name);
  if (it == pods_.end()) return;
  json pod = it->second.object;
  pods_.erase(it);
  bump(pod);
  record("DELETED", pod);
}

bool FakeApiServer::has_pod(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  return pods_.contains(ns + "/" + name);
}

void FakeApiServer::set_budget(const std::string& name, int disruptions_allowed) {
  std::lock_guard lock(mu_);
  budgets_[name] = disruptions_allowed;
  std::set<std::string> namespaces;
  for (const auto& [key, pod] : pods_)
    if (pod.budget == name) namespaces.insert(pod.object["metadata"]["namespace"].get<std::string>());
  for (const auto& ns : namespaces) {
    ++rv_;
    record("MODIFIED", budget_object(ns, name));
  }
}

int FakeApiServer::evictions_requested(const std::string& api_version) const {
  std::lock_guard lock(mu_);
  auto it = evictions_.find(api_version);
  return it == evictions_.end() ? 0 : it->second;
}

std::vector<json> FakeApiServer::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

std::map<std::string, json> FakeApiServer::resource_slices() const {
  std::lock_guard lock(mu_);
  return slices_;
}

void FakeApiServer::put_configmap(const std::string& ns, const std::string& name, const json& data, const json& annotations) {
  std::lock_guard lock(mu_);
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-cm-" + name}, {"annotations", annotations}}},
             {"data", data}};
  bump(cm);
  configmaps_[ns + "/" + name] = cm;
}

json FakeApiServer::configmap(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = configmaps_.find(ns + "/" + name);
  return it == configmaps_.end() ? json() : it->second;
}

void FakeApiServer::require_token(const std::string& token) {
  std::lock_guard lock(mu_);
  token_ = token;
}

void FakeApiServer::fail_next(int count, int status, const std::string& retry_after) {
  std::lock_guard lock(mu_);
  fail_count_ = count;
  fail_status_ = status;
  fail_retry_after_ = retry_after;
}

std::vector<SeenRequest> FakeApiServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t FakeApiServer::request_count() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

size_t FakeApiServer::watch_requests() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::ranges::count_if(requests_, [](const SeenRequest& r) {
    auto it = r.params.find("watch");
    return it != r.params.end() && it->second == "true";
  }));
}

std::string FakeApiServer::last_client_cn() const {
  std::lock_guard lock(mu_);
  return client_cn_;
}

void FakeApiServer::keep_body(const httplib::Request& req) {
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it) {
    if (it->method == req.method && it->path == req.path && it->body.empty()) {
      it->body = req.body;
      return;
    }
  }
}

bool FakeApiServer::page(json& list, const httplib::Request& req, httplib::Response& res) {
  const std::string token = req.get_param_value("continue");
  if (!token.empty() && expire_continue_.exchange(false)) {
    answer_status(res, 410, "Expired", "The provided continue parameter is too old to display a consistent list result.");
    return false;
  }
  size_t from = 0, limit = 0;
  if (!token.empty()) from = std::stoul(token);
  if (const std::string l = req.get_param_value("limit"); !l.empty()) limit = std::stoul(l);
  json& items = list["items"];
  if (limit == 0 && from == 0) return true;
  json out = json::array();
  for (size_t i = from; i < items.size() && (limit == 0 || out.size() < limit); ++i) out.push_back(items[i]);
  const size_t next = from + out.size();
  if (next < items.size()) list["metadata"]["continue"] = std::to_string(next);
  items = std::move(out);
  return true;
}

void FakeApiServer::routes() {
  // Before any route: remember the request, check the caller, apply injected failures.
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    SeenRequest seen{req.method, req.path, {}, {}, {}};  // the body is read after this handler
    for (const auto& [k, v] : req.params) seen.params[k] = v;
    for (const auto& [k, v] : req.headers) seen.headers.emplace(k, v);
    requests_.push_back(std::move(seen));
    if (req.ssl) {
      if (X509* peer = SSL_get1_peer_certificate(req.ssl)) {
        char cn[256] = {};
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
        client_cn_ = cn;
        X509_free(peer);
      }
    }
    if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
      answer_status(res, 401, "Unauthorized", "Unauthorized");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (fail_count_ > 0) {
      --fail_count_;
      answer_status(res, fail_status_, reason_for(fail_status_), "injected failure");
      if (!fail_retry_after_.empty()) res.set_header("Retry-After", fail_retry_after_);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  server_->Get("/api/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("watch") == "true") return watch(req, res, "Node");
    std::lock_guard lock(mu_);
    json items = json::array();
    for (const auto& [name, node] : nodes_) items.push_back(node);
    json list = {{"kind", "NodeList"}, {"apiVersion", "v1"}, {"metadata", {{"resourceVersion", std::to_string(rv_)}}}, {"items", items}};
    if (page(list, req, res)) answer(res, 200, list);
  });

  server_->Get(R"(/api/v1/nodes/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    std::string name = req.matches[1];
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      return answer_status(res, 404, "NotFound", "nodes \"" + name + "\" not found",
                           {{"name", name}, {"kind", "nodes"}});
    }
    answer(res, 200, it->second);
  });

  server_->Patch(R"(/api/v1/nodes/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    std::string name = req.matches[1];
    if (req.get_header_value("Content-Type") != "application/merge-patch+json") {
      return answer_status(res, 415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media types include: "
                           "application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml");
    }
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      return answer_status(res, 404, "NotFound", "nodes \"" + name + "\" not found",
                           {{"name", name}, {"kind", "nodes"}});
    }
    json patch = json::parse(req.body, nullptr, false);
    if (!patch.is_object()) return answer_status(res, 400, "BadRequest", "the patch is not a JSON object");
    patch.erase("kind");
    patch.erase("apiVersion");
    if (patch.contains("metadata") && patch["metadata"].is_object()) {
      patch["metadata"].erase("name");
      patch["metadata"].erase("resourceVersion");
    }
    it->second.merge_patch(patch);  // RFC 7386: null removes
    bump(it->second);
    record("MODIFIED", it->second);
    answer(res, 200, it->second);
  });

  server_->Get("/api/v1/pods", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("watch") == "true") return watch(req, res, "Pod");
    std::lock_guard lock(mu_);
    std::string selector = req.get_param_value("fieldSelector");
    std::string node;
    if (selector.starts_with("spec.nodeName=")) node = selector.substr(14);
    json items = json::array();
    for (const auto& [key, pod] : pods_) {
      if (node.empty() || pod.object["spec"]["nodeName"] == node) items.push_back(pod.object);
    }
    json list = {{"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", {{"resourceVersion", std::to_string(rv_)}}}, {"items", items}};
    if (page(list, req, res)) answer(res, 200, list);
  });

  // A PodDisruptionBudget per budget and namespace of its pods: selector
  // budget=<name>, status.disruptionsAllowed as set.
  server_->Get("/apis/policy/v1/poddisruptionbudgets", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("watch") == "true") return watch(req, res, "PodDisruptionBudget");
    std::lock_guard lock(mu_);
    std::set<std::pair<std::string, std::string>> made;
    json items = json::array();
    for (const auto& [key, pod] : pods_) {
      const std::string ns = pod.object["metadata"]["namespace"];
      if (pod.budget.empty() || !made.insert({ns, pod.budget}).second) continue;
      json budget = budget_object(ns, pod.budget);
      budget.erase("kind");  // a typed list's items carry no kind
      budget.erase("apiVersion");
      items.push_back(std::move(budget));
    }
    answer(res, 200, {{"kind", "PodDisruptionBudgetList"}, {"apiVersion", "policy/v1"},
                      {"metadata", {{"resourceVersion", std::to_string(rv_)}}}, {"items", items}});
  });

  server_->Get(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))", [this](const httplib::Request& req,
                                                                     httplib::Response& res) {
    std::lock_guard lock(mu_);
    std::string ns = req.matches[1], name = req.matches[2];
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) {
      return answer_status(res, 404, "NotFound", "pods \"" + name + "\" not found", {{"name", name}, {"kind", "pods"}});
    }
    answer(res, 200, it->second.object);
  });

  server_->Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction)", [this](const httplib::Request& req,
                                                                               httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    std::string ns = req.matches[1], name = req.matches[2];
    json body = json::parse(req.body, nullptr, false);
    std::string version = body.is_object() && body.contains("apiVersion") && body["apiVersion"].is_string()
                              ? body["apiVersion"].get<std::string>()
                              : std::string();
    ++evictions_[version];
    if (options_.before_1_22 && version == "policy/v1") {
      if (options_.v1_eviction_status == 400) {
        return answer_status(res, 400, "BadRequest",
                             "no kind \"Eviction\" is registered for version \"policy/v1\" in scheme "
                             "\"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\"");
      }
      return answer_status(res, 404, "NotFound", "the server could not find the requested resource");
    }
    if (version != "policy/v1" && version != "policy/v1beta1") {
      return answer_status(res, 400, "BadRequest", "unknown eviction apiVersion " + version);
    }
    if (body.value("kind", "") != "Eviction" || body["metadata"].value("name", "") != name) {
      return answer_status(res, 400, "BadRequest", "name in URL does not match name in Eviction object");
    }
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) {
      return answer_status(res, 404, "NotFound", "pods \"" + name + "\" not found", {{"name", name}, {"kind", "pods"}});
    }
    if (!it->second.budget.empty()) {
      int& allowed = budgets_[it->second.budget];
      if (allowed <= 0) {
        return answer_status(res, 429, "TooManyRequests",
                             "Cannot evict pod as it would violate the pod's disruption budget.",
                             {{"causes", {{{"reason", "DisruptionBudget"},
                                           {"message", "The disruption budget " + it->second.budget +
                                                           " needs 1 healthy pods and has 1 currently"}}}}});
      }
      --allowed;
    }
    json gone = it->second.object;
    pods_.erase(it);
    bump(gone);
    record("DELETED", gone);
    answer(res, 201, status_object(201, "", ""));
  });

  server_->Post(R"(/api/v1/namespaces/([^/]+)/events)", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    std::string ns = req.matches[1];
    json event = json::parse(req.body, nullptr, false);
    if (!event.is_object() || event.value("kind", "") != "Event" || event.value("apiVersion", "") != "v1") {
      return answer_status(res, 400, "BadRequest", "not a v1 Event");
    }
    json& meta = event["metadata"];
    if (meta.value("namespace", ns) != ns) {
      return answer_status(res, 400, "BadRequest", "the namespace of the object does not match the request");
    }
    meta["namespace"] = ns;
    if (!meta.contains("name")) meta["name"] = meta.value("generateName", "") + suffix();
    bump(event);
    events_.push_back(event);
    answer(res, 201, event);
  });

  // ConfigMaps: get, create (409 AlreadyExists), replace (409 Conflict on a stale resourceVersion), merge patch.
  auto cm_not_found = [](httplib::Response& res, const std::string& name) {
    answer_status(res, 404, "NotFound", "configmaps \"" + name + "\" not found", {{"name", name}, {"kind", "configmaps"}});
  };
  server_->Get(R"(/api/v1/namespaces/([^/]+)/configmaps/([^/]+))", [this, cm_not_found](const httplib::Request& req,
                                                                                       httplib::Response& res) {
    std::lock_guard lock(mu_);
    auto it = configmaps_.find(std::string(req.matches[1]) + "/" + std::string(req.matches[2]));
    if (it == configmaps_.end()) return cm_not_found(res, req.matches[2]);
    answer(res, 200, it->second);
  });
  // ResourceSlices: enough of resource.k8s.io/v1 for a DRA driver's publisher.
  const auto store_slice = [this](json slice) {
    if (options_.drop_partitionable_fields && slice.contains("spec")) {
      slice["spec"].erase("sharedCounters");
      if (slice["spec"].contains("devices"))
        for (auto& d : slice["spec"]["devices"]) {
          d.erase("consumesCounters");
          d.erase("allowMultipleAllocations");
        }
    }
    bump(slice);
    return slice;
  };
  // The 1.34 rule: every consumesCounters[].counterSet names a set of the same slice.
  const auto invalid_slice = [this](const json& slice) -> std::string {
    if (!options_.counter_sets_in_the_devices_slice || !slice.contains("spec") || !slice["spec"].is_object()) return "";
    std::set<std::string> sets;
    for (const auto& c : slice["spec"].value("sharedCounters", json::array())) sets.insert(c.value("name", ""));
    const json devices = slice["spec"].value("devices", json::array());
    for (size_t i = 0; i < devices.size(); ++i) {
      const json uses = devices[i].value("consumesCounters", json::array());
      for (size_t k = 0; k < uses.size(); ++k) {
        const std::string set = uses[k].value("counterSet", "");
        if (!sets.contains(set))
          return "ResourceSlice.resource.k8s.io \"" + slice["metadata"].value("name", "") + "\" is invalid: spec.devices[" +
                 std::to_string(i) + "].consumesCounters[" + std::to_string(k) + "].counterSet: Invalid value: \"" + set +
                 "\": must reference a counter set defined in the ResourceSlice sharedCounters";
      }
    }
    return "";
  };
  const std::string slices = "/apis/resource.k8s.io/v1/resourceslices";
  server_->Get(slices, [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(mu_);
    json items = json::array();
    for (const auto& [name, slice] : slices_) items.push_back(slice);
    answer(res, 200, {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceSliceList"}, {"items", items}});
  });
  server_->Post(slices, [this, store_slice, invalid_slice](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    json slice = json::parse(req.body, nullptr, false);
    if (!slice.is_object() || slice.value("kind", "") != "ResourceSlice" || !slice.contains("metadata") ||
        !slice["metadata"].contains("name"))
      return answer_status(res, 400, "BadRequest", "not a ResourceSlice with metadata.name");
    const std::string name = slice["metadata"]["name"];
    if (slices_.contains(name))
      return answer_status(res, 409, "AlreadyExists", "resourceslices \"" + name + "\" already exists");
    if (auto why = invalid_slice(slice); !why.empty()) return answer_status(res, 422, "Invalid", why);
    slices_[name] = store_slice(slice);
    answer(res, 201, slices_[name]);
  });
  server_->Put(slices + R"(/([^/]+))", [this, store_slice, invalid_slice](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    const std::string name = req.matches[1];
    if (!slices_.contains(name)) return answer_status(res, 404, "NotFound", "resourceslices \"" + name + "\" not found");
    json slice = json::parse(req.body, nullptr, false);
    if (!slice.is_object() || slice.value("kind", "") != "ResourceSlice")
      return answer_status(res, 400, "BadRequest", "not a ResourceSlice");
    if (auto why = invalid_slice(slice); !why.empty()) return answer_status(res, 422, "Invalid", why);
    slices_[name] = store_slice(slice);
    answer(res, 200, slices_[name]);
  });
  server_->Delete(slices + R"(/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    const std::string name = req.matches[1];
    if (slices_.erase(name) == 0) return answer_status(res, 404, "NotFound", "resourceslices \"" + name + "\" not found");
    answer(res, 200, {{"kind", "Status"}, {"status", "Success"}});
  });
  server_->Post(R"(/api/v1/namespaces/([^/]+)/configmaps)", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    std::string ns = req.matches[1];
    json cm = json::parse(req.body, nullptr, false);
    if (!cm.is_object() || cm.value("kind", "") != "ConfigMap" || !cm.contains("metadata") || !cm["metadata"].contains("name"))
      return answer_status(res, 400, "BadRequest", "not a ConfigMap with metadata.name");
    std::string name = cm["metadata"]["name"];
    if (configmaps_.contains(ns + "/" + name))
      return answer_status(res, 409, "AlreadyExists", "configmaps \"" + name + "\" already exists", {{"name", name}, {"kind", "configmaps"}});
    cm["metadata"]["namespace"] = ns;
    cm["metadata"]["uid"] = "uid-cm-" + name;
    bump(cm);
    configmaps_[ns + "/" + name] = cm;
    answer(res, 201, cm);
  });
  server_->Put(R"(/api/v1/namespaces/([^/]+)/configmaps/([^/]+))", [this, cm_not_found](const httplib::Request& req,
                                                                                       httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    std::string key = std::string(req.matches[1]) + "/" + std::string(req.matches[2]);
    auto it = configmaps_.find(key);
    if (it == configmaps_.end()) return cm_not_found(res, req.matches[2]);
    json cm = json::parse(req.body, nullptr, false);
    if (!cm.is_object() || cm.value("kind", "") != "ConfigMap") return answer_status(res, 400, "BadRequest", "not a ConfigMap");
    std::string rv = cm.contains("metadata") ? cm["metadata"].value("resourceVersion", "") : "";
    if (!rv.empty() && rv != it->second["metadata"]["resourceVersion"].get<std::string>())
      return answer_status(res, 409, "Conflict",
                           "Operation cannot be fulfilled on configmaps \"" + std::string(req.matches[2]) +
                               "\": the object has been modified; please apply your changes to the latest version and try again");
    cm["metadata"]["uid"] = it->second["metadata"]["uid"];
    cm["metadata"]["namespace"] = std::string(req.matches[1]);
    bump(cm);
    it->second = cm;
    answer(res, 200, cm);
  });
  server_->Patch(R"(/api/v1/namespaces/([^/]+)/configmaps/([^/]+))", [this, cm_not_found](const httplib::Request& req,
                                                                                         httplib::Response& res) {
    std::lock_guard lock(mu_);
    keep_body(req);
    if (req.get_header_value("Content-Type") != "application/merge-patch+json")
      return answer_status(res, 415, "UnsupportedMediaType", "the body of the request was in an unknown format");
    auto it = configmaps_.find(std::string(req.matches[1]) + "/" + std::string(req.matches[2]));
    if (it == configmaps_.end()) return cm_not_found(res, req.matches[2]);
    json patch = json::parse(req.body, nullptr, false);
    if (!patch.is_object()) return answer_status(res, 400, "BadRequest", "the patch is not a JSON object");
    it->second.merge_patch(patch);
    bump(it->second);
    answer(res, 200, it->second);
  });
}

void FakeApiServer::watch(const httplib::Request& req, httplib::Response& res, const std::string& kind) {
  std::string selector = req.get_param_value("fieldSelector");
  std::string name = selector.starts_with("metadata.name=") ? selector.substr(14) : std::string();
  std::string rv_text = req.get_param_value("resourceVersion");
  int timeout_seconds = req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds")) : 60;
  bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";

  struct State {
    unsigned long long cursor = 0;
    std::string pending;  // lines to send first
    std::chrono::steady_clock::time_point deadline;
  };
  auto state = std::make_shared<State>();
  state->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  {
    std::lock_guard lock(mu_);
    if (rv_text.empty() || rv_text == "0") {
      // From "now": the current object as ADDED first.
      state->cursor = rv_;
      auto added = [&](const json& object) {
        if (name.empty() || object["metadata"]["name"] == name)
          state->pending += json({{"type", "ADDED"}, {"object", object}}).dump() + "\n";
      };
      if (kind == "Node")
        for (const auto& [n, node] : nodes_) added(node);
      if (kind == "Pod")
        for (const auto& [key, pod] : pods_) added(pod.object);
    } else {
      unsigned long long from = std::stoull(rv_text);
      if (from < oldest_rv_) {
        json error = {{"type", "ERROR"},
                      {"object", status_object(410, "Expired", "too old resource version: " + rv_text + " (" +
                                                                   std::to_string(oldest_rv_) + ")")}};
        res.set_content(error.dump() + "\n", "application/json");
        return;
      }
      state->cursor = from;
    }
  }
  if (options_.end_watches_at_once) {
    res.set_content("", "application/json");
    return;
  }
  res.set_chunked_content_provider("application/json", [this, state, name, kind, bookmarks](size_t, httplib::DataSink& sink) {
    std::string out;
    bool finished = false;
    {
      std::unique_lock lock(mu_);
      out = std::move(state->pending);
      state->pending.clear();
      if (out.empty()) changed_.wait_for(lock, 20ms);
      if (state->cursor < oldest_rv_) {
        // Compacted past what this watch sent: the API server ends such a watch with 410.
        out += json({{"type", "ERROR"}, {"object", status_object(410, "Expired", "too old resource version")}}).dump() + "\n";
        if (!sink.write(out.data(), out.size())) return false;
        sink.done();
        return true;
      }
      for (const auto& entry : history_) {
        if (entry.rv <= state->cursor) continue;
        if (entry.kind == kind && (name.empty() || entry.name == name)) out += entry.line;
        state->cursor = entry.rv;
      }
      finished = closing_ || std::chrono::steady_clock::now() >= state->deadline;
      if (finished && bookmarks && !closing_) {
        json bookmark = {{"type", "BOOKMARK"},
                         {"object", {{"kind", kind}, {"apiVersion", "v1"},
                                     {"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}};
        out += bookmark.dump() + "\n";
      }
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (finished) sink.done();
    return true;
  });
}

}  // namespace tessera::kube::testing
