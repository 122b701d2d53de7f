// The node agent's view of its own Node through the API server: a thread
// that lists, then watches it (resuming from the last resourceVersion, listing
// again after 410 Expired, backing off from 1 s to 30 s while the API server
// is away), and hands each version of the Node to a callback. Also the
// ClusterApi the MIG controller uses, over the same credentials.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/mig_controller.hpp"
#include "kube/client.hpp"

namespace tessera::agent {

// What the agent reads off its Node.
struct NodeView {
  std::string uid;
  std::string resource_version;
  std::map<std::string, std::string> labels;
};

// Parses a Node object (labels, uid, resourceVersion).
NodeView node_view(const nlohmann::json& node);

// A watch stream that the server (or a proxy in front of it) ends sooner
// than `early` is reopened only after a delay, which starts at
// `reopen_initial` and doubles while streams keep ending early, up to
// `reopen_max`; one that lasted longer is reopened at once. So a proxy that
// closes every stream as soon as it opens costs a few requests a minute, not
// a tight loop.
struct NodeWatchOptions {
  std::chrono::milliseconds early{10000};
  std::chrono::milliseconds reopen_initial{250};
  std::chrono::milliseconds reopen_max{30000};
};

class NodeWatch {
 public:
  using Callback = std::function<void(const NodeView&)>;
  NodeWatch(std::unique_ptr<kube::Client> client, std::string node, Callback on_node, NodeWatchOptions options = {});
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;
  void stop();
  // Whether the last list or watch reached the API server.
  bool connected() const { return connected_; }

 private:
  void loop();
  std::unique_ptr<kube::Client> client_;
  std::string node_;
  Callback on_node_;
  NodeWatchOptions options_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

// The MIG controller's API calls about one Node, through kube::Client. The
// Node's uid (for Events) is set from the watch.
class KubeClusterApi : public ClusterApi {
 public:
  KubeClusterApi(std::unique_ptr<kube::Client> client, std::string node);
  Result<void> set_label(const std::string& key, const std::string& value) override;
  Result<Eviction> evict(const PodRef& pod) override;
  Result<void> event(const std::string& type, const std::string& reason, const std::string& message) override;
  // Sets and removes labels in one patch (nullopt removes).
  Result<void> patch_labels(const std::map<std::string, std::optional<std::string>>& labels);
  // The same for annotations (the layout annotation of `tessera node --publish-layout`).
  Result<void> patch_annotations(const std::map<std::string, std::optional<std::string>>& annotations);
  void set_node_uid(std::string uid);

 private:
  std::unique_ptr<kube::Client> client_;
  std::string node_;
  std::mutex mutex_;  // one request at a time on the client
  std::string uid_;
};

}  // namespace tessera::agent
