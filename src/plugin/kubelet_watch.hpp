// Watches the device-plugin directory for the kubelet's socket being
// created, which is how a kubelet restart shows: the plugin must register
// again at once (NVIDIA's plugin does the same with fsnotify).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/error.hpp"

namespace tessera::plugin {

class KubeletWatch {
 public:
  // Calls `on_created` from the watch thread each time kubelet.sock appears.
  [[nodiscard]] static Result<std::unique_ptr<KubeletWatch>> start(std::string dir, std::function<void()> on_created);
  ~KubeletWatch();
  KubeletWatch(const KubeletWatch&) = delete;
  KubeletWatch& operator=(const KubeletWatch&) = delete;

 private:
  KubeletWatch(int inotify_fd, int stop_fd, std::function<void()> on_created);
  void run();
  int inotify_fd_;
  int stop_fd_;
  std::function<void()> on_created_;
  std::thread thread_;
};

}  // namespace tessera::plugin
