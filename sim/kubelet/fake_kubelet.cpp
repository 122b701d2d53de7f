#include "kubelet/fake_kubelet.hpp"

#include <grpcpp/grpcpp.h>

#include <filesystem>

#include "plugin/proto/deviceplugin_v1beta1.grpc.pb.h"
#include "plugin/proto/podresources_v1.grpc.pb.h"

namespace tessera::sim {

namespace api = ::v1beta1;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<api::DevicePlugin::Stub> dial(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // The socket can appear a moment before its server listens: retry fast, not after gRPC's 1 s backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  return api::DevicePlugin::NewStub(grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args));
}

}  // namespace

class FakeKubelet::Impl final : public api::Registration::Service {
 public:
  explicit Impl(std::string dir) : dir_(std::move(dir)) {}

  grpc::Status Register(grpc::ServerContext*, const api::RegisterRequest* req, api::Empty*) override {
    if (req->version() != "v1beta1")
      return {grpc::StatusCode::INVALID_ARGUMENT, "Unsupported API version " + req->version()};
    std::lock_guard lock(mutex_);
    registrations_.push_back({req->version(), req->endpoint(), req->resource_name(),
                              req->options().get_preferred_allocation_available()});
    endpoints_[req->resource_name()] = req->endpoint();
    stubs_.erase(req->endpoint());  // the plugin may have restarted its server
    // A new registration replaces the resource's stream, as the kubelet's device manager does.
    if (auto it = watches_.find(req->resource_name()); it != watches_.end()) it->second->ctx.TryCancel();
    auto w = std::make_shared<Watch>();
    watches_[req->resource_name()] = w;
    threads_.emplace_back([this, w, resource = req->resource_name(), socket = dir_ + "/" + req->endpoint()] {
      watch(w, resource, socket);
    });
    changed_.notify_all();
    return grpc::Status::OK;
  }

  struct Watch {
    grpc::ClientContext ctx;
  };

  void watch(const std::shared_ptr<Watch>& w, const std::string& resource, const std::string& socket) {
    auto stub = dial(socket);
    w->ctx.set_wait_for_ready(true);
    auto reader = stub->ListAndWatch(&w->ctx, api::Empty{});
    api::ListAndWatchResponse response;
    while (reader->Read(&response)) {
      std::vector<AdvertisedDevice> list;
      for (const auto& d : response.devices()) list.push_back({d.id(), d.health()});
      std::lock_guard lock(mutex_);
      devices_[resource] = std::move(list);
      changed_.notify_all();
    }
    reader->Finish();
  }

  void stop_watches() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      for (auto& [r, w] : watches_) w->ctx.TryCancel();
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    std::lock_guard lock(mutex_);
    watches_.clear();
  }

  std::string dir_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<Registration> registrations_;
  std::map<std::string, std::string> endpoints_;
  std::map<std::string, std::vector<AdvertisedDevice>> devices_;
  std::map<std::string, std::shared_ptr<Watch>> watches_;
  std::vector<std::thread> threads_;
  std::unique_ptr<grpc::Server> server_;
  // What pod-resources List reports: the ids per resource of each named container.
  std::map<ContainerRef, std::map<std::string, std::vector<std::string>>> assigned_;
  std::unique_ptr<::v1::PodResourcesLister::Service> pod_resources_;
  std::unique_ptr<grpc::Server> pod_resources_server_;
  std::string pod_resources_socket_;
  // One client per plugin endpoint, kept like the kubelet's device manager keeps its connection.
  std::map<std::string, std::shared_ptr<api::DevicePlugin::Stub>> stubs_;

  std::shared_ptr<api::DevicePlugin::Stub> stub_for(const std::string& resource, Error& error) {
    std::lock_guard lock(mutex_);
    auto it = endpoints_.find(resource);
    if (it == endpoints_.end()) {
      error = {Errc::not_found, "no plugin registered " + resource};
      return nullptr;
    }
    auto& stub = stubs_[it->second];
    if (!stub) stub = dial(dir_ + "/" + it->second);
    return stub;
  }
};

namespace {

// List from the recorded allocations, one PodResources per pod. Like a 1.20
// kubelet, GetAllocatableResources is left to the base: UNIMPLEMENTED.
class PodResourcesLister final : public ::v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesLister(FakeKubelet::Impl& kubelet) : kubelet_(kubelet) {}

  grpc::Status List(grpc::ServerContext*, const ::v1::ListPodResourcesRequest*,
                    ::v1::ListPodResourcesResponse* response) override {
    std::lock_guard lock(kubelet_.mutex_);
    ::v1::PodResources* pod = nullptr;
    for (const auto& [ref, resources] : kubelet_.assigned_) {  // ordered: a pod's containers are adjacent
      if (!pod || pod->namespace_() != ref.pod_namespace || pod->name() != ref.pod) {
        pod = response->add_pod_resources();
        pod->set_namespace_(ref.pod_namespace);
        pod->set_name(ref.pod);
      }
      auto* container = pod->add_containers();
      container->set_name(ref.container);
      for (const auto& [resource, ids] : resources) {
        auto* devices = container->add_devices();
        devices->set_resource_name(resource);
        for (const auto& id : ids) devices->add_device_ids(id);
      }
    }
    return grpc::Status::OK;
  }

 private:
  FakeKubelet::Impl& kubelet_;
};

}  // namespace

FakeKubelet::FakeKubelet(std::string dir) : impl_(std::make_unique<Impl>(std::move(dir))) {}

FakeKubelet::~FakeKubelet() { stop(); }

Result<void> FakeKubelet::start(bool clear_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(impl_->dir_, ec);
  if (clear_dir) {
    for (const auto& e : fs::directory_iterator(impl_->dir_, ec))
      if (e.is_socket(ec)) fs::remove(e.path(), ec);
  }
  std::string socket = impl_->dir_ + "/kubelet.sock";
  fs::remove(socket, ec);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(impl_.get());
  impl_->server_ = builder.BuildAndStart();
  if (!impl_->server_) return fail(Errc::io, "fake kubelet cannot listen on " + socket);
  return {};
}

void FakeKubelet::stop() {
  if (impl_->server_) {
    impl_->server_->Shutdown(std::chrono::system_clock::now() + 1s);
    impl_->server_->Wait();
    impl_->server_.reset();
  }
  if (impl_->pod_resources_server_) {
    impl_->pod_resources_server_->Shutdown(std::chrono::system_clock::now() + 1s);
    impl_->pod_resources_server_->Wait();
    impl_->pod_resources_server_.reset();
    std::error_code ec;
    std::filesystem::remove(impl_->pod_resources_socket_, ec);
  }
  impl_->stop_watches();
  {
    std::lock_guard lock(impl_->mutex_);
    impl_->stubs_.clear();
  }
  std::error_code ec;
  std::filesystem::remove(impl_->dir_ + "/kubelet.sock", ec);
}

std::vector<Registration> FakeKubelet::registrations() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->registrations_;
}

size_t FakeKubelet::registration_count() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->registrations_.size();
}

std::vector<AdvertisedDevice> FakeKubelet::devices(const std::string& resource) const {
  std::lock_guard lock(impl_->mutex_);
  auto it = impl_->devices_.find(resource);
  return it == impl_->devices_.end() ? std::vector<AdvertisedDevice>{} : it->second;
}

size_t FakeKubelet::healthy_count(const std::string& resource) const {
  size_t n = 0;
  for (const auto& d : devices(resource)) n += d.health == "Healthy";
  return n;
}

bool FakeKubelet::wait_for(const std::string& resource,
                           const std::function<bool(const std::vector<AdvertisedDevice>&)>& pred,
                           std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex_);
  return impl_->changed_.wait_for(lock, timeout, [&] {
    auto it = impl_->devices_.find(resource);
    return pred(it == impl_->devices_.end() ? std::vector<AdvertisedDevice>{} : it->second);
  });
}

bool FakeKubelet::wait_for_registrations(size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex_);
  return impl_->changed_.wait_for(lock, timeout, [&] { return impl_->registrations_.size() >= count; });
}

Result<Allocation> FakeKubelet::allocate(const std::string& resource, const std::vector<std::string>& ids) {
  Error error;
  auto stub = impl_->stub_for(resource, error);
  if (!stub) return unexpected(error);
  api::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : ids) c->add_devices_ids(id);
  api::AllocateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  auto status = stub->Allocate(&ctx, req, &resp);
  if (!status.ok()) return fail(Errc::invalid_argument, status.error_message());
  if (resp.container_responses_size() != 1) return fail(Errc::internal, "Allocate answered for the wrong number of containers");
  Allocation out;
  const auto& r = resp.container_responses(0);
  out.envs.insert(r.envs().begin(), r.envs().end());
  out.annotations.insert(r.annotations().begin(), r.annotations().end());
  for (const auto& m : r.mounts()) out.mounts.emplace_back(m.host_path(), m.container_path());
  for (const auto& c : r.cdi_devices()) out.cdi_devices.push_back(c.name());
  for (const auto& d : r.devices()) out.devices.emplace_back(d.host_path(), d.container_path());
  return out;
}

Result<Allocation> FakeKubelet::allocate(const ContainerRef& container, const std::string& resource,
                                        const std::vector<std::string>& ids) {
  auto a = allocate(resource, ids);
  if (a) {
    std::lock_guard lock(impl_->mutex_);
    auto& held = impl_->assigned_[container][resource];
    held.insert(held.end(), ids.begin(), ids.end());
  }
  return a;
}

void FakeKubelet::remove_pod(const std::string& pod_namespace, const std::string& pod) {
  std::lock_guard lock(impl_->mutex_);
  std::erase_if(impl_->assigned_,
                [&](const auto& kv) { return kv.first.pod_namespace == pod_namespace && kv.first.pod == pod; });
}

Result<void> FakeKubelet::serve_pod_resources(const std::string& socket) {
  namespace fs = std::filesystem;
  if (impl_->pod_resources_server_) return fail(Errc::conflict, "fake kubelet already serves pod-resources");
  std::error_code ec;
  fs::create_directories(fs::path(socket).parent_path(), ec);
  fs::remove(socket, ec);
  impl_->pod_resources_ = std::make_unique<PodResourcesLister>(*impl_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(impl_->pod_resources_.get());
  impl_->pod_resources_server_ = builder.BuildAndStart();
  if (!impl_->pod_resources_server_) return fail(Errc::io, "fake kubelet cannot listen on " + socket);
  impl_->pod_resources_socket_ = socket;
  return {};
}

Result<std::vector<std::string>> FakeKubelet::preferred(const std::string& resource,
                                                        const std::vector<std::string>& available,
                                                        const std::vector<std::string>& must_include, int size) {
  Error error;
  auto stub = impl_->stub_for(resource, error);
  if (!stub) return unexpected(error);
  api::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : available) c->add_available_deviceids(id);
  for (const auto& id : must_include) c->add_must_include_deviceids(id);
  c->set_allocation_size(size);
  api::PreferredAllocationResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  auto status = stub->GetPreferredAllocation(&ctx, req, &resp);
  if (!status.ok()) return fail(Errc::invalid_argument, status.error_message());
  std::vector<std::string> out;
  for (const auto& id : resp.container_responses(0).deviceids()) out.push_back(id);
  return out;
}

}  // namespace tessera::sim
