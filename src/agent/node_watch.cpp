#include "agent/node_watch.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

namespace tessera::agent {
namespace {

Error api_error(const kube::ApiError& e) {
  return Error{e.status == 0 ? Errc::io : Errc::conflict, e.message};
}

}  // namespace

NodeView node_view(const nlohmann::json& node) {
  NodeView v;
  const auto& meta = node.value("metadata", nlohmann::json::object());
  v.uid = meta.value("uid", "");
  v.resource_version = meta.value("resourceVersion", "");
  if (auto it = meta.find("labels"); it != meta.end() && it->is_object())
    for (const auto& [k, val] : it->items())
      if (val.is_string()) v.labels[k] = val.get<std::string>();
  return v;
}

NodeWatch::NodeWatch(std::unique_ptr<kube::Client> client, std::string node, Callback on_node,
                     NodeWatchOptions options)
    : client_(std::move(client)), node_(std::move(node)), on_node_(std::move(on_node)), options_(options) {
  thread_ = std::thread([this] { loop(); });
}

NodeWatch::~NodeWatch() { stop(); }

void NodeWatch::stop() {
  if (stopping_.exchange(true)) return;
  client_->stop();
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeWatch::loop() {
  using namespace std::chrono_literals;
  auto backoff = 1s;
  bool logged = false;  // one warning per outage
  auto wait = [&](std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, d, [&] { return stopping_.load(); });
  };
  // How long before a watch that ended early is opened again (NodeWatchOptions).
  auto reopen_delay = options_.reopen_initial;
  auto ended = [&](std::chrono::steady_clock::time_point opened) {
    if (std::chrono::steady_clock::now() - opened >= options_.early) {
      reopen_delay = options_.reopen_initial;
      return;
    }
    spdlog::debug("the watch of Node {} ended early; opening it again in {} ms", node_, reopen_delay.count());
    wait(reopen_delay);
    reopen_delay = std::min(reopen_delay * 2, options_.reopen_max);
  };
  while (!stopping_) {
    auto node = client_->get_node(node_);
    if (!node) {
      connected_ = false;
      if (node.error().status == 404) {
        // Not an outage: a wrong --node-name or NODE_NAME. Said on every try.
        spdlog::error("the API server has no Node named {} (check --node-name or NODE_NAME; trying again in {} s)",
                      node_, backoff.count());
      } else if (!logged) {
        spdlog::warn("cannot read Node {}: {} (trying again, backing off up to 30 s)", node_, node.error().message);
      }
      logged = true;
      wait(backoff);
      backoff = std::min(backoff * 2, std::chrono::seconds(30));
      continue;
    }
    if (logged) spdlog::info("the API server answers again: watching Node {}", node_);
    logged = false;
    connected_ = true;
    backoff = 1s;
    auto view = node_view(*node);
    std::string version = view.resource_version;
    on_node_(view);
    // Watch from there until the server ends it; resume, or list again.
    while (!stopping_) {
      const auto opened = std::chrono::steady_clock::now();
      auto resumed = client_->watch_node(node_, version, [&](const kube::NodeEvent& e) {
        if (e.object && (e.type == "ADDED" || e.type == "MODIFIED")) {
          auto v = node_view(*e.object);
          on_node_(v);
        }
        return !stopping_.load();
      });
      if (!resumed) {
        if (resumed.error().status != 410 && !stopping_) {
          spdlog::warn("the watch of Node {} ended: {} (listing again)", node_, resumed.error().message);
          connected_ = false;
          wait(backoff);
          backoff = std::min(backoff * 2, std::chrono::seconds(30));
        } else if (!stopping_) {
          ended(opened);  // 410 at once, again and again, must not spin either
        }
        break;
      }
      if (!resumed->empty()) version = *resumed;
      if (!stopping_) ended(opened);
    }
  }
}

KubeClusterApi::KubeClusterApi(std::unique_ptr<kube::Client> client, std::string node)
    : client_(std::move(client)), node_(std::move(node)) {}

void KubeClusterApi::set_node_uid(std::string uid) {
  std::lock_guard lock(mutex_);
  uid_ = std::move(uid);
}

Result<void> KubeClusterApi::patch_labels(const std::map<std::string, std::optional<std::string>>& labels) {
  std::lock_guard lock(mutex_);
  auto r = client_->patch_node_labels(node_, labels);
  if (!r) return unexpected(api_error(r.error()));
  return {};
}

Result<void> KubeClusterApi::patch_annotations(const std::map<std::string, std::optional<std::string>>& annotations) {
  std::lock_guard lock(mutex_);
  nlohmann::json a = nlohmann::json::object();
  for (const auto& [k, v] : annotations) a[k] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  nlohmann::json patch = {{"metadata", {{"annotations", a}}}};
  auto r = client_->request("PATCH", "/api/v1/nodes/" + kube::escape_path_segment(node_), patch.dump(),
                            "application/merge-patch+json");
  if (!r) return unexpected(api_error(r.error()));
  return {};
}

Result<void> KubeClusterApi::set_label(const std::string& key, const std::string& value) {
  return patch_labels({{key, value}});
}

Result<Eviction> KubeClusterApi::evict(const PodRef& pod) {
  std::lock_guard lock(mutex_);
  auto r = client_->evict_pod(pod.pod_namespace, pod.name);
  if (!r) return unexpected(api_error(r.error()));
  switch (*r) {
    case kube::EvictionResult::evicted: return Eviction::evicted;
    case kube::EvictionResult::gone: return Eviction::gone;
    case kube::EvictionResult::blocked: return Eviction::blocked;
  }
  return Eviction::blocked;
}

Result<void> KubeClusterApi::event(const std::string& type, const std::string& reason, const std::string& message) {
  std::lock_guard lock(mutex_);
  auto r = client_->create_node_event(node_, uid_, type, reason, message);
  if (!r) return unexpected(api_error(r.error()));
  return {};
}

}  // namespace tessera::agent
