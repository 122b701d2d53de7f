// Shared by the pod-resources tests: a kubelet peer that has allocated devices
// to named containers through the real plugin and serves pod-resources v1,
// and sockets that are not gRPC servers.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "kubelet/fake_kubelet.hpp"
#include "plugin/plugin_manager.hpp"
#include "sharing/fixtures.hpp"
#include "support/run.hpp"

namespace tessera::plugin::testing {

// Two pods on the sharing tests' node (mixed MIG strategy):
//   ml/llm-0          server   nvidia.com/gpu          GPU-0000
//   ml/llm-0          sidecar  nvidia.com/mig-3g.40gb  MIG-c
//   default/embed-1   main     nvidia.com/mig-1g.20gb  MIG-a, MIG-b
struct AllocatedNode {
  tessera::testing::TempDir dir;
  std::string device_plugins = dir.path() + "/device-plugins";
  std::string pod_resources = dir.path() + "/pod-resources/kubelet.sock";
  sim::FakeKubelet kubelet{device_plugins};
  std::unique_ptr<PluginManager> plugin;

  AllocatedNode() {
    using namespace std::chrono_literals;
    EXPECT_TRUE(kubelet.start());
    EXPECT_TRUE(kubelet.serve_pod_resources(pod_resources));
    PluginOptions opts;
    opts.kubelet_dir = device_plugins;
    opts.config = sharing::testing::parse("version: v1\nflags: {migStrategy: mixed}\n");
    plugin = std::make_unique<PluginManager>(opts);
    EXPECT_TRUE(plugin->start(sharing::testing::two_gpu_node()));
    EXPECT_TRUE(kubelet.wait_for_registrations(3, 5s));
    give({"ml", "llm-0", "server"}, "nvidia.com/gpu", {"GPU-0000"});
    give({"ml", "llm-0", "sidecar"}, "nvidia.com/mig-3g.40gb", {"MIG-c"});
    give({"default", "embed-1", "main"}, "nvidia.com/mig-1g.20gb", {"MIG-a", "MIG-b"});
  }

  void give(const sim::ContainerRef& to, const std::string& resource, const std::vector<std::string>& ids) {
    auto a = kubelet.allocate(to, resource, ids);
    EXPECT_TRUE(a) << resource << ": " << (a ? "" : a.error().message);
  }
};

// A unix socket that listens but speaks no gRPC: with `hang_up` it accepts
// each connection and closes it at once, without it it never accepts.
class PlainSocket {
 public:
  PlainSocket(const std::string& path, bool hang_up) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
    EXPECT_EQ(listen(fd_, 16), 0);
    if (hang_up)
      acceptor_ = std::thread([this] {
        while (!stop_) {
          int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) close(c);
        }
      });
  }
  ~PlainSocket() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);  // wakes the blocked accept
    if (acceptor_.joinable()) acceptor_.join();
    close(fd_);
  }
  PlainSocket(const PlainSocket&) = delete;
  PlainSocket& operator=(const PlainSocket&) = delete;

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
};

}  // namespace tessera::plugin::testing
