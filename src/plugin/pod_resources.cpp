#include "plugin/pod_resources.hpp"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "plugin/proto/podresources_v1.grpc.pb.h"

namespace tessera::plugin {
namespace {

namespace api = ::v1;

// The kubelet's own node e2e client allows 16 MiB answers (kubernetes
// test/e2e_node/util.go, defaultPodResourcesMaxSize); gRPC's default is 4 MiB.
constexpr int kMaxAnswerBytes = 16 << 20;

std::string_view code_name(grpc::StatusCode code) {
  // In the order of grpc::StatusCode's values, 0 to 16.
  static constexpr std::array<std::string_view, 17> names{
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  auto i = static_cast<size_t>(code);
  return i < names.size() ? names[i] : "UNKNOWN";
}

std::string format_timeout(std::chrono::milliseconds t) {
  auto ms = t.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

Result<std::unique_ptr<api::PodResourcesLister::Stub>> dial(const std::string& socket) {
  struct stat st {};
  if (stat(socket.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return fail(Errc::not_found,
                  socket + " does not exist: is the kubelet running with the pod-resources API? (v1 is served "
                           "since Kubernetes 1.20 on <root-dir>/pod-resources/kubelet.sock; with another "
                           "--root-dir, pass its socket)");
    return fail(Errc::io, "cannot reach " + socket + ": " + std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode)) return fail(Errc::invalid_argument, socket + " is not a socket");
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a fresh connection per call: the kubelet may have restarted
  args.SetMaxReceiveMessageSize(kMaxAnswerBytes);
  auto channel = grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args);
  return api::PodResourcesLister::NewStub(channel);
}

Error rpc_error(const std::string& socket, std::string_view method, const grpc::Status& status,
                std::chrono::milliseconds timeout) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return {Errc::io, "cannot connect to " + socket + ": " + status.error_message()};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {Errc::io, "no answer from " + socket + " within " + format_timeout(timeout) +
                            " (is it the kubelet's pod-resources socket?)"};
    case grpc::StatusCode::UNIMPLEMENTED:
      return {Errc::unsupported,
              socket + " does not implement v1.PodResourcesLister/" + std::string(method) +
                  (method == "List" ? " (the kubelet serves pod-resources v1 since Kubernetes 1.20)"
                                    : " (the kubelet serves it since Kubernetes 1.21)")};
    default:
      return {Errc::io, socket + ": " + std::string(method) + " failed: " + std::string(code_name(status.error_code())) +
                            ": " + status.error_message()};
  }
}

// A deadline bounds the whole call, connecting included; without
// wait_for_ready a refused connection fails at once instead of retrying.
void bound(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  ctx.set_wait_for_ready(false);
}

ResourceDevices from_proto(const api::ContainerDevices& d) {
  return {d.resource_name(), {d.device_ids().begin(), d.device_ids().end()}};
}

}  // namespace

Result<std::vector<PodDevices>> list_pod_resources(const std::string& socket_path, std::chrono::milliseconds timeout) {
  auto stub = dial(socket_path);
  if (!stub) return unexpected(stub.error());
  grpc::ClientContext ctx;
  bound(ctx, timeout);
  api::ListPodResourcesResponse response;
  if (auto status = (*stub)->List(&ctx, api::ListPodResourcesRequest{}, &response); !status.ok())
    return unexpected(rpc_error(socket_path, "List", status, timeout));
  std::vector<PodDevices> pods;
  pods.reserve(static_cast<size_t>(response.pod_resources_size()));
  for (const auto& p : response.pod_resources()) {
    PodDevices pod{p.namespace_(), p.name(), {}};
    for (const auto& c : p.containers()) {
      ContainerDevices container{c.name(), {}};
      for (const auto& d : c.devices()) container.resources.push_back(from_proto(d));
      pod.containers.push_back(std::move(container));
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

Result<std::vector<ResourceDevices>> allocatable_devices(const std::string& socket_path,
                                                         std::chrono::milliseconds timeout) {
  auto stub = dial(socket_path);
  if (!stub) return unexpected(stub.error());
  grpc::ClientContext ctx;
  bound(ctx, timeout);
  api::AllocatableResourcesResponse response;
  if (auto status = (*stub)->GetAllocatableResources(&ctx, api::AllocatableResourcesRequest{}, &response);
      !status.ok())
    return unexpected(rpc_error(socket_path, "GetAllocatableResources", status, timeout));
  std::vector<ResourceDevices> out;
  for (const auto& d : response.devices()) out.push_back(from_proto(d));
  return out;
}

}  // namespace tessera::plugin
