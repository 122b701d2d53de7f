// One advertised resource, served to the kubelet on its own unix socket:
// the DevicePlugin service of the v1beta1 API.
#pragma once

#include <memory>
#include <string>

#include "core/error.hpp"
#include "plugin/device_state.hpp"
#include "sharing/allocate.hpp"

namespace grpc { class Server; }

namespace tessera::plugin {

// How it answers (settings, policy, the node's device nodes) comes with each
// snapshot of the DeviceState, so a reload changes it for every server.
struct ResourceServerOptions {
  std::string resource;     // nvidia.com/gpu
  std::string socket_path;  // <kubelet dir>/tessera-nvidia.com_gpu.sock
};

class ResourceServer {
 public:
  // Removes a stale socket file, listens, and serves until stop().
  [[nodiscard]] static Result<std::unique_ptr<ResourceServer>> start(ResourceServerOptions options,
                                                                     std::shared_ptr<DeviceState> state);
  ~ResourceServer();
  ResourceServer(const ResourceServer&) = delete;
  ResourceServer& operator=(const ResourceServer&) = delete;

  const ResourceServerOptions& options() const { return options_; }
  // Stops serving (ListAndWatch streams end) and removes the socket.
  void stop();

 private:
  class Service;
  ResourceServer(ResourceServerOptions options, std::shared_ptr<DeviceState> state);
  ResourceServerOptions options_;
  std::shared_ptr<DeviceState> state_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

// "nvidia.com/mig-1g.10gb" -> "tessera-nvidia.com_mig-1g.10gb.sock"
std::string socket_name(const std::string& resource);

}  // namespace tessera::plugin
