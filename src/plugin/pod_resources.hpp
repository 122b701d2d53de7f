// Which pod and container holds which device: a client of the kubelet's
// pod-resources API v1 (PodResourcesLister), served on
// <kubelet root-dir>/pod-resources/kubelet.sock.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace tessera::plugin {

inline constexpr const char* kDefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

// The device ids of one resource, as its device plugin advertised them.
struct ResourceDevices {
  std::string resource;  // e.g. nvidia.com/gpu
  std::vector<std::string> ids;
};

struct ContainerDevices {
  std::string name;
  std::vector<ResourceDevices> resources;  // empty for a container without devices
};

struct PodDevices {
  std::string pod_namespace;
  std::string name;
  std::vector<ContainerDevices> containers;
};

// Every pod the kubelet knows, with the devices of each container (List,
// Kubernetes 1.20 and later). Errors name the socket and say what went
// wrong: missing, not a socket, nothing accepting, no answer within
// `timeout`, or the kubelet's gRPC status and message.
[[nodiscard]] Result<std::vector<PodDevices>> list_pod_resources(const std::string& socket_path,
                                                                 std::chrono::milliseconds timeout);

// The devices the kubelet can allocate (GetAllocatableResources, Kubernetes
// 1.21 and later; Errc::unsupported from an older kubelet).
[[nodiscard]] Result<std::vector<ResourceDevices>> allocatable_devices(const std::string& socket_path,
                                                                       std::chrono::milliseconds timeout);

}  // namespace tessera::plugin
