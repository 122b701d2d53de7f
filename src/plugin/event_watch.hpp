// The plugin's NVML event loop, on a thread of its own: XID and ECC events
// become health events; MIG configuration changes ask for a fresh inventory
// at once (destroyed MIG devices leave ListAndWatch within a second); a
// failed wait (GPU_IS_LOST, UNKNOWN, an unloaded driver...) marks every
// watched GPU Unhealthy, is logged once per change of state, and is retried
// with exponential backoff, never in a busy loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "nvml/session.hpp"
#include "sharing/health.hpp"

namespace tessera::plugin {

struct EventWatchOptions {
  std::chrono::milliseconds wait_timeout{200};  // one nvmlEventSetWait; bounds how long stop() takes
  std::chrono::milliseconds backoff_min{250};   // after the first failed wait
  std::chrono::milliseconds backoff_max{10000};
};

struct EventSinks {
  std::function<void(const sharing::HealthEvent&)> health;  // XID, ECC and driver errors
  std::function<void()> mig_changed;                       // a GPU or compute instance came or went
};

class EventWatch {
 public:
  // Registers XID, ECC and MIG-change events of `gpu_indices` (the types each
  // GPU supports) and starts the thread. Fails only when no event set can be
  // made at all.
  [[nodiscard]] static Result<std::unique_ptr<EventWatch>> start(const nvml::Session& session,
                                                                 const std::vector<uint32_t>& gpu_indices,
                                                                 EventSinks sinks, EventWatchOptions options = {});
  ~EventWatch();  // stops and joins
  EventWatch(const EventWatch&) = delete;
  EventWatch& operator=(const EventWatch&) = delete;

 private:
  // A watched GPU: its handle, and its UUID read once at the start (a GPU
  // that fell off the bus can no longer say it).
  struct Watched {
    nvml::abi::nvmlDevice_t handle;
    std::string uuid;
  };
  EventWatch(nvml::EventSet set, std::vector<Watched> gpus, EventSinks sinks, EventWatchOptions options);
  void run();
  // Sleeps `d` unless stopped first; false when stopped.
  bool pause(std::chrono::milliseconds d);

  nvml::EventSet set_;
  std::vector<Watched> gpus_;
  EventSinks sinks_;
  EventWatchOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// A probe for earned recovery: the GPU answers when its UUID and memory can
// be read through NVML. Logs once each time a GPU stops or starts answering.
sharing::GpuProbe nvml_gpu_probe(const nvml::Session& session);

}  // namespace tessera::plugin
