#include "dra/kubelet_plugin.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "dra/proto/dra_v1.grpc.pb.h"
#include "dra/proto/pluginregistration_v1.grpc.pb.h"

namespace tessera::dra {
namespace {

namespace api = k8s::io::kubelet::pkg::apis::dra::v1;
namespace reg = pluginregistration;

std::vector<ClaimRef> refs(const google::protobuf::RepeatedPtrField<api::Claim>& claims) {
  std::vector<ClaimRef> out;
  for (const auto& c : claims) out.push_back({c.uid(), c.namespace_(), c.name()});
  return out;
}

Result<void> make_parent(const std::string& socket) {
  std::error_code ec;
  const auto parent = std::filesystem::path(socket).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return fail(Errc::io, "cannot create " + parent.string() + ": " + ec.message());
  std::filesystem::remove(socket, ec);  // a stale socket from a previous run
  return {};
}

}  // namespace

class KubeletPlugin::DraService final : public api::DRAPlugin::Service {
 public:
  explicit DraService(Driver& driver) : driver_(driver) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*, const api::NodePrepareResourcesRequest* request,
                                    api::NodePrepareResourcesResponse* response) override {
    for (const auto& [uid, outcome] : driver_.prepare(refs(request->claims()))) {
      auto& r = (*response->mutable_claims())[uid];
      if (!outcome.error.empty()) {
        r.set_error(outcome.error);
        continue;
      }
      for (const auto& d : outcome.devices) {
        auto* dev = r.add_devices();
        for (const auto& req : d.requests) dev->add_request_names(req);
        dev->set_pool_name(d.pool);
        dev->set_device_name(d.device);
        for (const auto& id : d.cdi_ids) dev->add_cdi_device_ids(id);
        if (d.share_id) dev->set_share_id(*d.share_id);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const api::NodeUnprepareResourcesRequest* request,
                                      api::NodeUnprepareResourcesResponse* response) override {
    for (const auto& [uid, error] : driver_.unprepare(refs(request->claims())))
      (*response->mutable_claims())[uid].set_error(error);
    return grpc::Status::OK;
  }

 private:
  Driver& driver_;
};

class KubeletPlugin::RegistrationService final : public reg::Registration::Service {
 public:
  RegistrationService(const KubeletPluginOptions& options, std::atomic<bool>& registered)
      : options_(options), registered_(registered) {}

  grpc::Status GetInfo(grpc::ServerContext*, const reg::InfoRequest*, reg::PluginInfo* info) override {
    info->set_type(kDraPluginType);
    info->set_name(options_.driver);
    info->set_endpoint(options_.dra_socket);
    info->add_supported_versions(kDraService);
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const reg::RegistrationStatus* status,
                                        reg::RegistrationStatusResponse*) override {
    registered_ = status->plugin_registered();
    if (status->plugin_registered())
      spdlog::info("the kubelet registered DRA driver {} ({})", options_.driver, options_.dra_socket);
    else
      spdlog::error("the kubelet refused DRA driver {}: {}", options_.driver, status->error());
    return grpc::Status::OK;
  }

 private:
  const KubeletPluginOptions& options_;
  std::atomic<bool>& registered_;
};

KubeletPlugin::KubeletPlugin(KubeletPluginOptions options, Driver& driver) : options_(std::move(options)), driver_(driver) {}

Result<std::unique_ptr<KubeletPlugin>> KubeletPlugin::start(KubeletPluginOptions options, Driver& driver) {
  if (auto r = make_parent(options.dra_socket); !r) return unexpected(r.error());
  if (auto r = make_parent(options.registration_socket); !r) return unexpected(r.error());
  std::unique_ptr<KubeletPlugin> self(new KubeletPlugin(std::move(options), driver));
  self->dra_ = std::make_unique<DraService>(driver);
  self->registration_ = std::make_unique<RegistrationService>(self->options_, self->registered_);
  {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix://" + self->options_.dra_socket, grpc::InsecureServerCredentials());
    b.RegisterService(self->dra_.get());
    self->dra_server_ = b.BuildAndStart();
    if (!self->dra_server_) return fail(Errc::io, "cannot serve the DRA service on " + self->options_.dra_socket);
  }
  {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix://" + self->options_.registration_socket, grpc::InsecureServerCredentials());
    b.RegisterService(self->registration_.get());
    self->registration_server_ = b.BuildAndStart();
    if (!self->registration_server_)
      return fail(Errc::io, "cannot serve plugin registration on " + self->options_.registration_socket);
  }
  spdlog::info("DRA driver {} serving {} (registration {})", self->options_.driver, self->options_.dra_socket,
               self->options_.registration_socket);
  return self;
}

void KubeletPlugin::stop() {
  using namespace std::chrono_literals;
  std::error_code ec;
  // Registration first: the kubelet sees the socket go and stops calling.
  if (registration_server_) {
    registration_server_->Shutdown(std::chrono::system_clock::now() + 1s);
    registration_server_->Wait();
    registration_server_.reset();
    std::filesystem::remove(options_.registration_socket, ec);
  }
  if (dra_server_) {
    dra_server_->Shutdown(std::chrono::system_clock::now() + 2s);
    dra_server_->Wait();
    dra_server_.reset();
    std::filesystem::remove(options_.dra_socket, ec);
  }
}

KubeletPlugin::~KubeletPlugin() { stop(); }

}  // namespace tessera::dra
