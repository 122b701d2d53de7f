// The DRA driver's face to the kubelet: the plugin-registration service on a
// socket in the kubelet's plugins_registry directory (the kubelet finds it
// there, asks GetInfo and answers NotifyRegistrationStatus), and the DRA
// service (v1.DRAPlugin: NodePrepareResources, NodeUnprepareResources) on
// the socket that GetInfo names. Both are the kubelet's published APIs
// (k8s.io/kubelet pkg/apis/pluginregistration/v1, pkg/apis/dra/v1); the
// protos are tessera's own, in dra/proto.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "dra/driver.hpp"

namespace grpc {
class Server;
}

namespace tessera::dra {

inline constexpr const char* kDraService = "v1.DRAPlugin";  // k8s.io/kubelet dra/v1 DRAPluginService
inline constexpr const char* kDraPluginType = "DRAPlugin";  // pluginregistration/v1 DRAPlugin

struct KubeletPluginOptions {
  std::string driver = sharing::dra::kDefaultDriver;
  // <kubelet dir>/plugins_registry/<driver>-reg.sock
  std::string registration_socket;
  // <kubelet dir>/plugins/<driver>/dra.sock
  std::string dra_socket;
};

class KubeletPlugin {
 public:
  // Removes stale sockets, serves the DRA service first and registration
  // second (the kubelet dials the DRA socket as soon as it registers).
  [[nodiscard]] static Result<std::unique_ptr<KubeletPlugin>> start(KubeletPluginOptions options, Driver& driver);
  ~KubeletPlugin();
  KubeletPlugin(const KubeletPlugin&) = delete;
  KubeletPlugin& operator=(const KubeletPlugin&) = delete;

  // Whether the kubelet said it registered us, and what it said last.
  bool registered() const { return registered_.load(); }
  void stop();

 private:
  class DraService;
  class RegistrationService;
  KubeletPlugin(KubeletPluginOptions options, Driver& driver);

  KubeletPluginOptions options_;
  Driver& driver_;
  std::atomic<bool> registered_{false};
  std::unique_ptr<DraService> dra_;
  std::unique_ptr<RegistrationService> registration_;
  std::unique_ptr<grpc::Server> dra_server_;
  std::unique_ptr<grpc::Server> registration_server_;
};

}  // namespace tessera::dra
