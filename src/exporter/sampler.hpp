// The exporter's one sampler: on an interval it reads every GPU and MIG
// device through NVML (framebuffer, GPM activity from two samples a window
// apart, sensors, ECC counts, Xid events), asks the kubelet's pod-resources
// API who holds what, reads shared replicas' quota ledgers, and renders the
// result once. Scrapes take the rendered text and never call NVML.
//
// Failures stay local: a device whose NVML call fails is logged and shown
// with tessera_device_up 0 while the others keep flowing; an absent or
// hanging pod-resources socket costs at most its deadline and the pod
// labels; an unreadable ledger costs that replica's series. Each distinct
// problem is logged when it appears and when it goes away, not every interval.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exporter/attribution.hpp"
#include "exporter/sample.hpp"
#include "nvml/session.hpp"

namespace tessera::exporter {

struct SamplerOptions {
  std::chrono::milliseconds interval{10000};
  // Time between a GPM pair's samples: at least 100 ms (NVIDIA's advice), at
  // most half the interval.
  std::chrono::milliseconds gpm_window{1000};
  std::string pod_resources_socket;  // empty: no pod labels, no replica series
  std::chrono::milliseconds pod_resources_timeout{1000};
  std::string resource_prefix = "nvidia.com/";
  std::string ledger_root;  // empty: no replica memory series
  std::string hostname;     // the Hostname label; empty leaves it out
  std::string version;      // tessera_exporter_info{version}
};

class Sampler {
 public:
  Sampler(nvml::Session session, SamplerOptions options);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Starts the thread: a sample at once (or after one interval when
  // `sample_now` is false), then one per interval.
  void start(bool sample_now = true);
  // Stops and joins the thread; idempotent.
  void stop();
  // One sample on the calling thread (what the thread runs; for tests and
  // benchmarks without the thread).
  void sample_once();

  // The last sample rendered, and the sample itself; null before the first.
  std::shared_ptr<const std::string> text() const;
  std::shared_ptr<const Sample> sample() const;

 private:
  struct GpuCache;
  struct XidState {
    std::optional<uint64_t> last;
    std::map<uint64_t, uint64_t> counts;
  };
  struct GpmPair;
  using Handles = std::vector<std::pair<nvml::Device, std::string>>;  // this sample's GPUs and their UUIDs

  void collect_gpu(uint32_t index, Sample& out, std::vector<GpmPair*>& gpm, Handles& handles);
  void collect_gpm(Sample& out, const std::vector<GpmPair*>& gpm, std::chrono::steady_clock::time_point first);
  void drain_events(const Handles& handles, Sample& out);
  std::optional<Attribution> fetch_attribution();
  void attach_replicas(const Attribution& attribution, Sample& out);
  // Records an NVML failure for `d`: unsupported calls just leave a value out;
  // anything else marks it down and is logged once per distinct message.
  void failed(DeviceSample& d, const nvml::Error& e);
  void report(const std::string& key, const std::string& problem);  // "" when fine again

  nvml::Session session_;
  SamplerOptions options_;
  std::vector<GpuCache> gpus_;
  std::map<std::string, std::unique_ptr<GpmPair>> gpm_pairs_;  // by device UUID
  std::map<std::string, XidState> xids_;                       // by device UUID
  std::optional<nvml::EventSet> events_;
  std::set<std::string> events_registered_;
  std::map<std::string, std::string> problems_;  // what is currently wrong, by subject
  std::map<std::string, std::string> device_errors_this_sample_;
  std::set<uint32_t> lost_this_sample_;  // GPU indices that answered NVML_ERROR_GPU_IS_LOST

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  std::shared_ptr<const std::string> text_;
  std::shared_ptr<const Sample> sample_;
};

}  // namespace tessera::exporter
