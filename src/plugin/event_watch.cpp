#include "plugin/event_watch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "nvml/device.hpp"

namespace tessera::plugin {

namespace abi = nvml::abi;

Result<std::unique_ptr<EventWatch>> EventWatch::start(const nvml::Session& session,
                                                      const std::vector<uint32_t>& gpu_indices, EventSinks sinks,
                                                      EventWatchOptions options) {
  auto set = session.create_event_set();
  if (!set) return unexpected(set.error().to_error());
  const auto wanted = abi::nvmlEventTypeXidCriticalError | abi::nvmlEventTypeDoubleBitEccError |
                      abi::nvmlEventTypeSingleBitEccError | abi::nvmlEventMigConfigChange;
  std::vector<Watched> gpus;
  for (uint32_t index : gpu_indices) {
    auto dev = session.device(index);
    if (!dev) {
      spdlog::warn("GPU {}: no events: {}", index, dev.error().message());
      continue;
    }
    auto uuid = dev->uuid();
    if (!uuid) {
      spdlog::warn("GPU {}: no events: {}", index, uuid.error().message());
      continue;
    }
    auto supported = dev->supported_event_types();
    // NVML refuses the whole mask when one bit is unsupported (nvmlDeviceRegisterEvents).
    auto types = supported ? (*supported & wanted) : wanted;
    if (auto added = set->add(*dev, types); !added) {
      spdlog::warn("GPU {}: no events: {}", index, added.error().message());
      continue;
    }
    gpus.push_back({dev->handle(), *uuid});
  }
  return std::unique_ptr<EventWatch>(new EventWatch(std::move(*set), std::move(gpus), std::move(sinks), options));
}

EventWatch::EventWatch(nvml::EventSet set, std::vector<Watched> gpus, EventSinks sinks, EventWatchOptions options)
    : set_(std::move(set)), gpus_(std::move(gpus)), sinks_(std::move(sinks)), options_(options) {
  thread_ = std::thread([this] { run(); });
}

EventWatch::~EventWatch() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool EventWatch::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mutex_);
  return !wake_.wait_for(lock, d, [&] { return stop_; });
}

void EventWatch::run() {
  auto backoff = options_.backoff_min;
  uint64_t failures_in_a_row = 0;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    auto ev = set_.wait(static_cast<unsigned int>(options_.wait_timeout.count()));
    if (!ev && ev.error().code != abi::NVML_ERROR_TIMEOUT) {
      if (failures_in_a_row++ == 0)
        spdlog::error("NVML event wait failed: {}; marking {} GPUs Unhealthy, retrying with backoff",
                      ev.error().message(), gpus_.size());
      // NVML does not say which GPU failed: every watched GPU is suspect. The
      // failure lasts until the next attempt, so no device can recover while
      // nothing watches its events.
      for (const auto& gpu : gpus_) {
        sharing::HealthEvent he;
        he.kind = sharing::HealthEvent::Kind::driver_error;
        he.gpu_uuid = gpu.uuid;
        he.at = sharing::Clock::now() + backoff;
        if (sinks_.health) sinks_.health(he);
      }
      if (!pause(backoff)) return;
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    if (failures_in_a_row > 0) {
      spdlog::info("NVML event wait works again after {} failed waits; devices recover once their GPU answers",
                   failures_in_a_row);
      failures_in_a_row = 0;
      backoff = options_.backoff_min;
    }
    if (!ev) continue;  // timeout: nothing happened
    if (ev->type == abi::nvmlEventMigConfigChange) {
      if (sinks_.mig_changed) sinks_.mig_changed();
      continue;
    }
    auto gpu = std::find_if(gpus_.begin(), gpus_.end(), [&](const Watched& w) { return w.handle == ev->device.handle(); });
    if (gpu == gpus_.end()) {
      spdlog::warn("event {:#x} (data {}) from a device this plugin does not watch", ev->type, ev->data);
      continue;
    }
    sharing::HealthEvent he;
    he.kind = ev->type == abi::nvmlEventTypeXidCriticalError    ? sharing::HealthEvent::Kind::xid
              : ev->type == abi::nvmlEventTypeDoubleBitEccError ? sharing::HealthEvent::Kind::double_bit_ecc
                                                                : sharing::HealthEvent::Kind::single_bit_ecc;
    he.xid = ev->data;
    he.gpu_uuid = gpu->uuid;
    he.gi_id = ev->gpu_instance_id;
    he.ci_id = ev->compute_instance_id;
    he.at = sharing::Clock::now();
    if (sinks_.health) sinks_.health(he);
  }
}

sharing::GpuProbe nvml_gpu_probe(const nvml::Session& session) {
  auto answering = std::make_shared<std::map<std::string, bool>>();
  auto mutex = std::make_shared<std::mutex>();
  return [&session, answering, mutex](const std::string& uuid) {
    std::string why;
    auto dev = session.device_by_uuid(uuid);
    if (!dev) {
      why = dev.error().message();
    } else if (auto id = dev->uuid(); !id) {
      why = id.error().message();
    } else if (auto mem = dev->memory_info(); !mem) {
      why = mem.error().message();
    }
    bool ok = why.empty();
    std::lock_guard lock(*mutex);
    auto it = answering->try_emplace(uuid, true).first;
    if (it->second != ok) {
      if (ok)
        spdlog::info("{} answers again", uuid);
      else
        spdlog::warn("{} does not answer ({}): its devices stay Unhealthy", uuid, why);
      it->second = ok;
    }
    return ok;
  };
}

}  // namespace tessera::plugin
