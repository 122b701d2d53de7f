// A kubelet peer for tests and the demo: serves Registration on
// <dir>/kubelet.sock, records each registration, opens ListAndWatch on the
// plugin's socket and keeps the latest device list, and calls Allocate and
// GetPreferredAllocation the way the kubelet does; on request also serves the
// pod-resources API v1 on a second socket, reporting the allocations it made
// for named containers. Never linked into the product.
#pragma once

#include <chrono>
#include <compare>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace grpc { class Server; }

namespace tessera::sim {

struct AdvertisedDevice {
  std::string id;
  std::string health;
};

struct Registration {
  std::string version;
  std::string endpoint;
  std::string resource;
  bool preferred_allocation = false;
};

struct Allocation {
  std::map<std::string, std::string> envs;
  std::vector<std::pair<std::string, std::string>> mounts;  // host -> container
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;                      // qualified CDI names
  std::vector<std::pair<std::string, std::string>> devices;  // device specs: host -> container
};

// The container an allocation is for, as pod-resources List reports it.
struct ContainerRef {
  std::string pod_namespace;
  std::string pod;
  std::string container;
  auto operator<=>(const ContainerRef&) const = default;
};

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  // Serves kubelet.sock (removing a stale one). Like a real kubelet start,
  // `clear_dir` removes every other socket in the directory first.
  [[nodiscard]] Result<void> start(bool clear_dir = false);
  void stop();

  std::vector<Registration> registrations() const;
  size_t registration_count() const;
  // Latest ListAndWatch list of a resource (empty when none yet).
  std::vector<AdvertisedDevice> devices(const std::string& resource) const;
  size_t healthy_count(const std::string& resource) const;
  // Waits until `pred(devices)` holds for the resource, or the timeout passes.
  bool wait_for(const std::string& resource, const std::function<bool(const std::vector<AdvertisedDevice>&)>& pred,
                std::chrono::milliseconds timeout) const;
  bool wait_for_registrations(size_t count, std::chrono::milliseconds timeout) const;

  [[nodiscard]] Result<Allocation> allocate(const std::string& resource, const std::vector<std::string>& ids);
  // The same, for a named container: once the plugin accepts, pod-resources
  // List reports the ids as that container's (added to any it holds already).
  [[nodiscard]] Result<Allocation> allocate(const ContainerRef& container, const std::string& resource,
                                            const std::vector<std::string>& ids);

  // The pod is gone (deleted from the API, its containers stopped): its
  // devices are free again and pod-resources List no longer reports it.
  void remove_pod(const std::string& pod_namespace, const std::string& pod);

  // Serves PodResourcesLister on `socket` until stop(), as a 1.20 kubelet
  // does: List answers, GetAllocatableResources is UNIMPLEMENTED.
  [[nodiscard]] Result<void> serve_pod_resources(const std::string& socket);
  [[nodiscard]] Result<std::vector<std::string>> preferred(const std::string& resource,
                                                           const std::vector<std::string>& available,
                                                           const std::vector<std::string>& must_include, int size);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::sim
