#include "plugin/resource_server.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "cuda_quota/env.h"
#include "plugin/cdi_writer.hpp"
#include "plugin/ledger_dir.hpp"
#include "plugin/proto/deviceplugin_v1beta1.grpc.pb.h"

namespace tessera::plugin {
namespace {

namespace api = ::v1beta1;
using namespace std::chrono_literals;

grpc::Status to_status(const Error& e) {
  auto code = e.code == Errc::not_found ? grpc::StatusCode::NOT_FOUND
              : e.code == Errc::io      ? grpc::StatusCode::FAILED_PRECONDITION
                                        : grpc::StatusCode::INVALID_ARGUMENT;
  return {code, e.message};
}

void fill_devices(const Snapshot& s, const std::string& resource, api::ListAndWatchResponse& out) {
  const auto* r = s.resource(resource);
  if (!r) return;  // the resource went away (config reload): advertise nothing
  for (const auto& d : r->devices) {
    auto* dev = out.add_devices();
    dev->set_id(d.id);
    auto it = s.healthy.find(d.id);
    dev->set_health(it == s.healthy.end() || it->second ? "Healthy" : "Unhealthy");
  }
}

}  // namespace

class ResourceServer::Service final : public api::DevicePlugin::Service {
 public:
  Service(const ResourceServerOptions& options, std::shared_ptr<DeviceState> state)
      : options_(options), state_(std::move(state)) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const api::Empty*, api::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const api::Empty*,
                            grpc::ServerWriter<api::ListAndWatchResponse>* writer) override {
    auto snap = state_->snapshot();
    uint64_t sent = ~uint64_t{0};
    while (!ctx->IsCancelled() && !state_->stopping()) {
      if (snap->version != sent) {
        api::ListAndWatchResponse response;
        fill_devices(*snap, options_.resource, response);
        if (!writer->Write(response)) break;
        sent = snap->version;
      }
      // Wakes at once on a change; the timeout only bounds how late a cancel is seen.
      snap = state_->wait_for_change(sent, 200ms);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const api::PreferredAllocationRequest* request,
                                      api::PreferredAllocationResponse* response) override {
    auto snap = state_->snapshot();
    const auto* r = snap->resource(options_.resource);
    if (!r) return {grpc::StatusCode::UNAVAILABLE, options_.resource + " is no longer advertised"};
    for (const auto& c : request->container_requests()) {
      std::vector<std::string> available(c.available_deviceids().begin(), c.available_deviceids().end());
      std::vector<std::string> must(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
      if (c.allocation_size() < 0) return {grpc::StatusCode::INVALID_ARGUMENT, "allocation_size is negative"};
      auto chosen = sharing::preferred_allocation(*r, snap->inventory, available, must,
                                                  static_cast<size_t>(c.allocation_size()), snap->serving.policy);
      if (!chosen) return to_status(chosen.error());
      auto* out = response->add_container_responses();
      for (const auto& id : *chosen) out->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const api::AllocateRequest* request,
                        api::AllocateResponse* response) override {
    auto snap = state_->snapshot();
    const auto* r = snap->resource(options_.resource);
    if (!r) return {grpc::StatusCode::UNAVAILABLE, options_.resource + " is no longer advertised"};
    for (const auto& c : request->container_requests()) {
      std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      auto a = sharing::allocate(*r, ids, snap->serving.allocate, snap->serving.driver.get());
      if (!a) {
        spdlog::warn("Allocate {}: {}", options_.resource, a.error().message);
        return to_status(a.error());
      }
      // The node decides the quota: the limits file and the ledger exist
      // before the kubelet sees the mounts, so before any process of the
      // container does.
      if (!a->ledger_dir.empty())
        if (auto made = prepare_quota_files(a->ledger_dir, a->ledger_key, a->quota_devices); !made) {
          spdlog::error("Allocate {}: {}", options_.resource, made.error().message);
          return to_status(made.error());
        }
      if (!a->preload_file.empty())
        if (auto made = ensure_preload_file(a->preload_file, TESSERA_CONTAINER_LIBRARY_PATH "\n"); !made) {
          spdlog::error("Allocate {}: {}", options_.resource, made.error().message);
          return to_status(made.error());
        }
      // The container's own CDI device, whose hook has the driver hold its
      // quota: defined before the kubelet hands the runtime its name.
      if (a->quota_spec) {
        CdiOptions cdi;
        cdi.spec_dir = snap->serving.cdi_spec_dir;
        auto made = cdi.spec_dir.empty() ? Result<void>(fail(Errc::internal, "no CDI spec directory for the memory hook"))
                                         : write_cdi_spec(*a->quota_spec, cdi);
        if (!made) {
          spdlog::error("Allocate {}: {}", options_.resource, made.error().message);
          return to_status(made.error());
        }
      }
      auto* out = response->add_container_responses();
      for (const auto& [k, v] : a->envs) (*out->mutable_envs())[k] = v;
      for (const auto& [k, v] : a->annotations) (*out->mutable_annotations())[k] = v;
      for (const auto& m : a->mounts) {
        auto* mount = out->add_mounts();
        mount->set_host_path(m.host_path);
        mount->set_container_path(m.container_path);
        mount->set_read_only(m.read_only);
      }
      for (const auto& name : a->cdi_devices) out->add_cdi_devices()->set_name(name);
      for (const auto& n : a->devices) {
        auto* spec = out->add_devices();
        spec->set_container_path(n.path);
        spec->set_host_path(n.host_path);
        spec->set_permissions("rw");
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const api::PreStartContainerRequest*,
                                 api::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const ResourceServerOptions& options_;
  std::shared_ptr<DeviceState> state_;
};

std::string socket_name(const std::string& resource) {
  std::string name = resource;
  std::replace(name.begin(), name.end(), '/', '_');
  return "tessera-" + name + ".sock";
}

ResourceServer::ResourceServer(ResourceServerOptions options, std::shared_ptr<DeviceState> state)
    : options_(std::move(options)), state_(std::move(state)) {}

Result<std::unique_ptr<ResourceServer>> ResourceServer::start(ResourceServerOptions options,
                                                              std::shared_ptr<DeviceState> state) {
  std::error_code ec;
  std::filesystem::remove(options.socket_path, ec);  // a stale socket from a previous run
  std::unique_ptr<ResourceServer> self(new ResourceServer(std::move(options), std::move(state)));
  self->service_ = std::make_unique<Service>(self->options_, self->state_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + self->options_.socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(self->service_.get());
  self->server_ = builder.BuildAndStart();
  if (!self->server_)
    return fail(Errc::io, "cannot serve " + self->options_.resource + " on " + self->options_.socket_path);
  return self;
}

void ResourceServer::stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + 1s);
  server_->Wait();
  server_.reset();
  std::error_code ec;
  std::filesystem::remove(options_.socket_path, ec);
}

ResourceServer::~ResourceServer() { stop(); }

}  // namespace tessera::plugin
