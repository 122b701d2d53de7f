#include "dra/kubelet_plugin.hpp"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "dra/proto/dra_health_v1alpha1.grpc.pb.h"
#include "dra/proto/dra_v1.grpc.pb.h"
#include "dra/proto/pluginregistration_v1.grpc.pb.h"

namespace tessera::dra {
namespace {

namespace api = k8s::io::kubelet::pkg::apis::dra::v1;
namespace health = ::v1alpha1;
namespace reg = pluginregistration;

// A change count the driver bumps (through on_change, which outlives the
// plugin: hence shared) and the health streams wait on; stop() ends them.
class Signal {
 public:
  void bump() {
    std::lock_guard lock(mutex_);
    ++version_;
    cv_.notify_all();
  }
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    cv_.notify_all();
  }
  uint64_t version() {
    std::lock_guard lock(mutex_);
    return version_;
  }
  // Until the version differs from `seen`, stop(), or `until`; true when stopped.
  bool wait(uint64_t seen, std::chrono::steady_clock::time_point until) {
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, until, [&] { return stopped_ || version_ != seen; });
    return stopped_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t version_ = 0;
  bool stopped_ = false;
};

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

// Every device the driver publishes, with its health: unhealthy while it
// carries a taint (an XID, a lost GPU), healthy otherwise. The whole list goes
// out at once, again at every change and every health_refresh.
class KubeletPlugin::HealthService final : public health::DRAResourceHealth::Service {
 public:
  HealthService(Driver& driver, std::chrono::seconds refresh)
      : driver_(driver), refresh_(refresh), signal_(std::make_shared<Signal>()) {
    driver_.on_change([s = signal_] { s->bump(); });
  }
  void stop() { signal_->stop(); }

  grpc::Status NodeWatchResources(grpc::ServerContext* context, const health::NodeWatchResourcesRequest*,
                                  grpc::ServerWriter<health::NodeWatchResourcesResponse>* writer) override {
    using namespace std::chrono_literals;
    for (;;) {
      const uint64_t seen = signal_->version();
      if (!writer->Write(snapshot())) return grpc::Status::OK;  // the kubelet went
      const auto next = std::chrono::steady_clock::now() + refresh_;
      // A change, the refresh, a stop; the kubelet hanging up is looked at every second.
      while (std::chrono::steady_clock::now() < next && signal_->version() == seen) {
        if (signal_->wait(seen, std::min(next, std::chrono::steady_clock::now() + 1s))) return grpc::Status::OK;
        if (context->IsCancelled()) return grpc::Status::CANCELLED;
      }
    }
  }

 private:
  health::NodeWatchResourcesResponse snapshot() const {
    health::NodeWatchResourcesResponse out;
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (const auto& d : driver_.pool().devices) {
      auto* h = out.add_devices();
      h->mutable_device()->set_pool_name(driver_.pool_name());
      h->mutable_device()->set_device_name(d.name);
      std::string taints;
      for (const auto& t : d.taints)
        taints += (taints.empty() ? "" : ", ") + t.key + (t.value.empty() ? "" : "=" + t.value) + ":" + t.effect;
      h->set_health(taints.empty() ? health::HEALTHY : health::UNHEALTHY);
      if (!taints.empty()) h->set_message(("tainted " + taints).substr(0, 1024));
      h->set_last_updated_time(now);
      h->set_health_check_timeout_seconds(3 * refresh_.count());
    }
    return out;
  }

  Driver& driver_;
  std::chrono::seconds refresh_;
  std::shared_ptr<Signal> signal_;
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
  self->health_ = std::make_unique<HealthService>(driver, self->options_.health_refresh);
  self->registration_ = std::make_unique<RegistrationService>(self->options_, self->registered_);
  {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix://" + self->options_.dra_socket, grpc::InsecureServerCredentials());
    b.RegisterService(self->dra_.get());
    b.RegisterService(self->health_.get());
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
  if (health_) health_->stop();  // the open health streams end now, not at the deadline
  if (dra_server_) {
    dra_server_->Shutdown(std::chrono::system_clock::now() + 2s);
    dra_server_->Wait();
    dra_server_.reset();
    std::filesystem::remove(options_.dra_socket, ec);
  }
}

std::string KubeletPlugin::self_check(std::chrono::milliseconds timeout) const {
  for (const std::string* socket : {&options_.registration_socket, &options_.dra_socket}) {
    std::error_code ec;
    if (!std::filesystem::is_socket(*socket, ec)) return "the socket " + *socket + " is gone: the kubelet cannot reach the driver";
  }
  auto dial = [](const std::string& socket) { return grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()); };
  // Half the time each, so that a hung GetInfo is named as such.
  auto reg = pluginregistration::Registration::NewStub(dial(options_.registration_socket));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout / 2);
  pluginregistration::PluginInfo info;
  if (grpc::Status st = reg->GetInfo(&ctx, {}, &info); !st.ok())
    return "GetInfo on " + options_.registration_socket + " failed: " + st.error_message();
  if (info.name() != options_.driver)
    return "GetInfo on " + options_.registration_socket + " names " + info.name() + ", not " + options_.driver;
  if (!dial(options_.dra_socket)->WaitForConnected(std::chrono::system_clock::now() + timeout / 2))
    return "the DRA socket " + options_.dra_socket + " accepts no connection";
  return "";
}

KubeletPlugin::~KubeletPlugin() { stop(); }

}  // namespace tessera::dra
