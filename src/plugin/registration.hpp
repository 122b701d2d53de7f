// Registering a resource with the kubelet (Registration.Register).
#pragma once

#include <chrono>
#include <string>

#include "core/error.hpp"

namespace tessera::plugin {

inline constexpr const char* kApiVersion = "v1beta1";
inline constexpr const char* kKubeletSocket = "kubelet.sock";
inline constexpr const char* kDefaultKubeletDir = "/var/lib/kubelet/device-plugins";

// Errors name the socket and what went wrong: missing, not a socket, the
// kubelet refusing (its message), or no answer within `timeout`.
[[nodiscard]] Result<void> register_resource(const std::string& kubelet_socket, const std::string& endpoint,
                                             const std::string& resource,
                                             std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace tessera::plugin
