// The DRA driver's face to the kubelet: the plugin-registration service on a
// socket in the kubelet's plugins_registry directory (the kubelet finds it
// there, asks GetInfo and answers NotifyRegistrationStatus), and the DRA
// service (v1.DRAPlugin: NodePrepareResources, NodeUnprepareResources) on
// the socket that GetInfo names, with the device-health service beside it
// (v1alpha1.DRAResourceHealth: NodeWatchResources, KEP-4680, which the
// kubelet turns into the pods' allocatedResourcesStatus). All are the
// kubelet's published APIs (k8s.io/kubelet pkg/apis/pluginregistration/v1,
// pkg/apis/dra/v1, pkg/apis/dra-health/v1alpha1); the protos are tessera's
// own, in dra/proto.
#pragma once

#include <atomic>
#include <chrono>
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
  // How often the health stream repeats the whole list when nothing changes;
  // each device's health_check_timeout_seconds is three times this.
  std::chrono::seconds health_refresh{20};
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
  // Whether the kubelet can reach the plugin as it does: both sockets are where the kubelet looks,
  // the registration socket answers GetInfo with this driver's name and the DRA socket accepts a
  // connection, within `timeout` together (under the chart's 2 s probe timeout, so that the
  // probe gets the reason). "" when they do, else what is wrong (for /healthz: a socket removed
  // under the driver is never served again until it restarts).
  std::string self_check(std::chrono::milliseconds timeout = std::chrono::milliseconds(1500)) const;
  void stop();

 private:
  class DraService;
  class HealthService;
  class RegistrationService;
  KubeletPlugin(KubeletPluginOptions options, Driver& driver);

  KubeletPluginOptions options_;
  Driver& driver_;
  std::atomic<bool> registered_{false};
  std::unique_ptr<DraService> dra_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<RegistrationService> registration_;
  std::unique_ptr<grpc::Server> dra_server_;
  std::unique_ptr<grpc::Server> registration_server_;
};

}  // namespace tessera::dra
