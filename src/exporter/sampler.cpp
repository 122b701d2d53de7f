#include "exporter/sampler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/catalog.hpp"
#include "cuda_quota/driver_limits.hpp"
#include "cuda_quota/ledger.hpp"
#include "exporter/render.hpp"
#include "sharing/allocate.hpp"

namespace tessera::exporter {

using namespace nvml::abi;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t mib(uint64_t bytes) { return bytes >> 20; }

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool unsupported(const nvml::Error& e) {
  return e.code == NVML_ERROR_NOT_SUPPORTED || e.code == NVML_ERROR_FUNCTION_NOT_FOUND;
}

std::string subject_of(const DeviceLabels& l) {
  if (!l.device_uuid.empty()) return l.device_uuid;
  return "GPU " + std::to_string(l.gpu);
}

}  // namespace

struct Sampler::GpuCache {
  std::string uuid;
  DeviceLabels labels;  // the GPU's own
  bool gpm = false;
  bool profiles_read = false;
  std::map<uint32_t, std::string> profile_names;   // GPU-instance profile id -> "1g.10gb"
  std::map<std::string, DeviceLabels> mig_labels;  // MIG UUID -> its labels
  std::vector<DeviceLabels> last_mig;              // the MIG devices the last sample saw
};

struct Sampler::GpmPair {
  GpmPair(nvml::GpmSample first, nvml::GpmSample second) : a(std::move(first)), b(std::move(second)) {}
  nvml::GpmSample a, b;
  std::optional<nvml::Device> gpu;  // the GPU, or a MIG device's parent
  std::optional<uint32_t> gpu_instance;
  size_t index = 0;  // into Sample::devices
};

Sampler::Sampler(nvml::Session session, SamplerOptions options)
    : session_(std::move(session)), options_(std::move(options)) {
  auto half = options_.interval / 2;
  options_.gpm_window = std::clamp(options_.gpm_window, std::chrono::milliseconds(100),
                                   std::max(half, std::chrono::milliseconds(100)));
}

Sampler::~Sampler() { stop(); }

void Sampler::start(bool sample_now) {
  thread_ = std::thread([this, sample_now] {
    std::unique_lock lock(mu_);
    auto next = Clock::now() + (sample_now ? Clock::duration::zero() : options_.interval);
    while (!stopping_) {
      if (cv_.wait_until(lock, next, [this] { return stopping_; })) break;
      lock.unlock();
      next = Clock::now() + options_.interval;
      sample_once();
      lock.lock();
    }
  });
}

void Sampler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const std::string> Sampler::text() const {
  std::lock_guard lock(mu_);
  return text_;
}

std::shared_ptr<const Sample> Sampler::sample() const {
  std::lock_guard lock(mu_);
  return sample_;
}

void Sampler::report(const std::string& key, const std::string& problem) {
  auto it = problems_.find(key);
  if (problem.empty()) {
    if (it != problems_.end()) {
      spdlog::info("tessera exporter: {}: fine again", key);
      problems_.erase(it);
    }
    return;
  }
  if (it != problems_.end() && it->second == problem) return;
  spdlog::warn("tessera exporter: {}", problem);
  problems_[key] = problem;
}

void Sampler::failed(DeviceSample& d, const nvml::Error& e) {
  if (unsupported(e)) {
    spdlog::debug("tessera exporter: {}: {}", subject_of(d.labels), e.message());
    return;
  }
  d.up = false;
  if (e.code == NVML_ERROR_GPU_IS_LOST) lost_this_sample_.insert(d.labels.gpu);
  auto subject = subject_of(d.labels);
  device_errors_this_sample_.try_emplace(subject, subject + ": " + e.message() + "; its tessera_device_up is 0");
}

void Sampler::sample_once() {
  const auto began = Clock::now();
  device_errors_this_sample_.clear();
  lost_this_sample_.clear();
  auto out = std::make_shared<Sample>();
  auto attribution = fetch_attribution();

  std::vector<GpmPair*> gpm;
  Handles handles;
  auto count = session_.device_count();
  if (!count) {
    report("device list", "nvmlDeviceGetCount_v2: " + count.error().message() +
                              "; every device known so far shows tessera_device_up 0");
    for (auto& g : gpus_) {
      DeviceSample d;
      d.labels = g.labels;
      d.up = false;
      out->devices.push_back(d);
      for (const auto& m : g.last_mig) {
        DeviceSample md;
        md.labels = m;
        md.up = false;
        out->devices.push_back(md);
      }
    }
  } else {
    report("device list", "");
    gpus_.resize(*count);
    for (uint32_t i = 0; i < *count; ++i) collect_gpu(i, *out, gpm, handles);
    collect_gpm(*out, gpm, began);
    drain_events(handles, *out);
  }
  // A GPU that fell off the bus while it was being read shows nothing read
  // before it fell: one page never says a GPU is down and gives its fresh
  // temperature too. Its MIG devices go with it.
  for (auto& d : out->devices) {
    if (!lost_this_sample_.contains(d.labels.gpu)) continue;
    DeviceSample down;
    down.labels = std::move(d.labels);
    down.owner = std::move(d.owner);
    down.up = false;
    d = std::move(down);
  }
  for (auto& d : out->devices) {
    auto it = xids_.find(d.labels.device_uuid);
    if (it != xids_.end()) {
      d.last_xid = it->second.last;
      d.xid_counts = it->second.counts;
    }
  }
  // Xid counts of devices that are gone (a MIG layout changed, a GPU replaced)
  // are forgotten with them, so memory does not grow with every change.
  if (count)
    std::erase_if(xids_, [&](const auto& kv) {
      return std::ranges::none_of(out->devices, [&](const DeviceSample& d) { return d.labels.device_uuid == kv.first; });
    });
  // Devices that failed now are logged once; those that answer again say so.
  std::set<std::string> seen;
  for (const auto& [subject, message] : device_errors_this_sample_) {
    report("device " + subject, message);
    seen.insert("device " + subject);
  }
  for (auto it = problems_.begin(); it != problems_.end();) {
    if (it->first.starts_with("device ") && it->first != "device list" && !seen.contains(it->first)) {
      spdlog::info("tessera exporter: {}: answers again", it->first.substr(7));
      it = problems_.erase(it);
    } else {
      ++it;
    }
  }

  if (attribution) {
    for (auto& d : out->devices)
      if (auto it = attribution->devices.find(d.labels.device_uuid); it != attribution->devices.end())
        d.owner = it->second;
    attach_replicas(*attribution, *out);
  }

  std::shared_ptr<const Sample> previous = sample();
  if (count)
    out->last_success_unix = unix_now();
  else if (previous)
    out->last_success_unix = previous->last_success_unix;
  out->duration_seconds = std::chrono::duration<double>(Clock::now() - began).count();
  auto text = std::make_shared<const std::string>(render(*out, options_.version));
  std::lock_guard lock(mu_);
  sample_ = std::move(out);
  text_ = std::move(text);
}

void Sampler::collect_gpu(uint32_t index, Sample& out, std::vector<GpmPair*>& gpm,
                          Handles& handles) {
  GpuCache& cache = gpus_[index];
  DeviceSample d;
  d.labels = cache.labels;
  d.labels.gpu = index;
  d.labels.hostname = options_.hostname;  // known even for a GPU lost before it was ever read
  auto down_with_cached_migs = [&](const nvml::Error& e) {
    failed(d, e);
    d.up = false;
    out.devices.push_back(d);
    for (const auto& m : cache.last_mig) {
      DeviceSample md;
      md.labels = m;
      md.up = false;
      out.devices.push_back(md);
    }
  };
  auto dev = session_.device(index);
  if (!dev) return down_with_cached_migs(dev.error());
  auto uuid = dev->uuid();
  if (!uuid) {
    // Its events (an Xid 79 as it falls off the bus) still count on what it was.
    if (!cache.uuid.empty()) handles.emplace_back(*dev, cache.uuid);
    return down_with_cached_migs(uuid.error());
  }
  handles.emplace_back(*dev, *uuid);

  if (cache.uuid != *uuid) {  // a new GPU at this index (or the first sample): its identity, once
    cache = GpuCache{};
    cache.uuid = *uuid;
    DeviceLabels& l = cache.labels;
    l.gpu = index;
    l.uuid = l.device_uuid = *uuid;
    l.hostname = options_.hostname;
    DeviceSample probe;
    probe.labels = l;
    bool complete = true;
    if (auto v = dev->minor_number())
      l.device = "nvidia" + std::to_string(*v);
    else
      complete = false, failed(probe, v.error());
    if (auto v = dev->pci_info())
      l.pci_bus_id = v->bus_id;
    else
      complete = false, failed(probe, v.error());
    if (auto v = dev->name())
      l.model_name = *v;
    else
      complete = false, failed(probe, v.error());
    if (auto arch = dev->architecture(); arch && *arch >= NVML_DEVICE_ARCH_HOPPER && *arch != NVML_DEVICE_ARCH_UNKNOWN)
      if (auto s = dev->gpm_supported(); s && *s) cache.gpm = true;
    if (!complete) cache.uuid.clear();  // try the identity again next time
    d.up = probe.up;
  }
  d.labels = cache.labels;

  if (auto m = dev->memory_info()) {
    d.fb_total_mib = mib(m->total);
    d.fb_free_mib = mib(m->free);
    d.fb_used_mib = mib(m->used >= m->reserved ? m->used - m->reserved : m->used);
    if (session_.api().nvmlDeviceGetMemoryInfo_v2) d.fb_reserved_mib = mib(m->reserved);
  } else {
    failed(d, m.error());
  }
  if (auto v = dev->temperature_c())
    d.temperature_c = *v;
  else
    failed(d, v.error());
  if (auto v = dev->power_mw())
    d.power_w = *v / 1000.0;
  else
    failed(d, v.error());
  if (auto v = dev->clock_mhz(NVML_CLOCK_SM))
    d.sm_clock_mhz = *v;
  else
    failed(d, v.error());
  if (auto v = dev->clock_mhz(NVML_CLOCK_MEM))
    d.mem_clock_mhz = *v;
  else
    failed(d, v.error());
  if (auto v = dev->ecc_volatile()) {
    d.ecc_sbe_volatile = v->corrected;
    d.ecc_dbe_volatile = v->uncorrected;
  } else {
    failed(d, v.error());
  }

  auto want_gpm = [&](size_t at, std::optional<uint32_t> gi, const std::string& key) {
    auto& slot = gpm_pairs_[key];
    if (!slot) {
      auto a = session_.create_gpm_sample();
      auto b = session_.create_gpm_sample();
      if (!a || !b) {
        failed(out.devices[at], a ? b.error() : a.error());
        gpm_pairs_.erase(key);
        return;
      }
      slot = std::make_unique<GpmPair>(std::move(*a), std::move(*b));
    }
    slot->gpu = *dev;
    slot->gpu_instance = gi;
    slot->index = at;
    auto r = gi ? dev->gpm_mig_sample(*gi, slot->a) : dev->gpm_sample(slot->a);
    if (!r) return failed(out.devices[at], r.error());
    gpm.push_back(slot.get());
  };

  const size_t gpu_at = out.devices.size();
  out.devices.push_back(d);
  if (cache.gpm) want_gpm(gpu_at, std::nullopt, *uuid);

  cache.last_mig.clear();
  auto mode = dev->mig_mode();
  if (!mode) return failed(out.devices[gpu_at], mode.error());
  if (!mode->current) return;
  auto migs = dev->indexed_mig_devices();
  if (!migs) return failed(out.devices[gpu_at], migs.error());
  for (const auto& [mig_index, mig] : *migs) {
    DeviceSample md;
    md.labels = cache.labels;
    md.labels.mig = true;
    auto mig_uuid = mig.uuid();
    if (!mig_uuid) {
      md.labels.device_uuid.clear();
      failed(md, mig_uuid.error());
      failed(out.devices[gpu_at], mig_uuid.error());
      continue;
    }
    auto known = cache.mig_labels.find(*mig_uuid);
    if (known == cache.mig_labels.end()) {
      DeviceLabels l = cache.labels;
      l.mig = true;
      l.device_uuid = *mig_uuid;
      md.labels = l;
      auto gi = mig.gpu_instance_id();
      if (!gi) {
        failed(md, gi.error());
        out.devices.push_back(md);
        continue;
      }
      l.gpu_instance_id = *gi;
      if (!cache.profiles_read) {
        if (auto profiles = dev->gpu_instance_profiles()) {
          for (const auto& p : *profiles) {
            std::string n = p.name;
            if (n.starts_with("MIG ")) n = n.substr(4);
            if (!n.empty()) cache.profile_names[p.id] = n;
          }
          cache.profiles_read = true;
        }
      }
      std::string profile;
      if (auto instance = dev->gpu_instance_by_id(*gi)) {
        if (auto info = instance->info()) {
          if (auto it = cache.profile_names.find(info->profile_id); it != cache.profile_names.end())
            profile = it->second;
          else if (auto pci = dev->pci_info())
            if (const auto* model = Catalog::builtin().find_by_pci_id(pci->pci_device_id))
              if (const auto* p = model->profile_by_id(info->profile_id)) profile = p->name;
        }
      }
      if (profile.empty()) {  // named next time, not guessed
        md.labels = l;
        failed(md, nvml::Error{NVML_ERROR_UNKNOWN, "GPU instance profile", "GPU instance " + std::to_string(*gi)});
        out.devices.push_back(md);
        continue;
      }
      l.mig_profile = profile;
      known = cache.mig_labels.emplace(*mig_uuid, l).first;
    }
    md.labels = known->second;
    cache.last_mig.push_back(md.labels);
    if (auto m = mig.memory_info()) {
      md.fb_total_mib = mib(m->total);
      md.fb_free_mib = mib(m->free);
      md.fb_used_mib = mib(m->used >= m->reserved ? m->used - m->reserved : m->used);
    } else {
      failed(md, m.error());
    }
    const size_t at = out.devices.size();
    out.devices.push_back(md);
    if (cache.gpm) want_gpm(at, md.labels.gpu_instance_id, *mig_uuid);
  }
  // Forget the names of MIG devices that are gone.
  std::erase_if(cache.mig_labels, [&](const auto& kv) {
    return std::ranges::none_of(cache.last_mig, [&](const DeviceLabels& l) { return l.device_uuid == kv.first; });
  });
}

void Sampler::collect_gpm(Sample& out, const std::vector<GpmPair*>& gpm, Clock::time_point first) {
  if (gpm.empty()) return;
  // The second samples come a window after the first: sleep what is left of it.
  auto until = first + options_.gpm_window;
  {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, until, [this] { return stopping_; });
    if (stopping_) return;
  }
  for (GpmPair* p : gpm) {
    DeviceSample& d = out.devices[p->index];
    auto r = p->gpu_instance ? p->gpu->gpm_mig_sample(*p->gpu_instance, p->b) : p->gpu->gpm_sample(p->b);
    if (!r) {
      failed(d, r.error());
      continue;
    }
    auto m = session_.gpm_metrics(p->a, p->b);
    if (!m) {
      failed(d, m.error());
      continue;
    }
    auto ratio = [](std::optional<double> percent) -> std::optional<double> {
      if (!percent) return std::nullopt;
      return *percent / 100.0;
    };
    d.sm_active = ratio(m->sm_util);
    d.sm_occupancy = ratio(m->sm_occupancy);
    d.dram_active = ratio(m->dram_bw_util);
    d.gr_engine_active = ratio(m->graphics_util);
    d.tensor_active = ratio(m->tensor_util);
  }
  // Pairs of devices that are gone are freed.
  std::erase_if(gpm_pairs_, [&](const auto& kv) { return std::ranges::find(gpm, kv.second.get()) == gpm.end(); });
}

void Sampler::drain_events(const Handles& handles, Sample& out) {
  if (!events_) {
    auto set = session_.create_event_set();
    if (!set) {
      report("events", "nvmlEventSetCreate: " + set.error().message() + "; no Xid counts");
      return;
    }
    events_.emplace(std::move(*set));
    events_registered_.clear();
  }
  for (const auto& [h, uuid] : handles) {
    if (events_registered_.contains(uuid)) continue;
    if (auto r = events_->add(h, nvmlEventTypeXidCriticalError); !r)
      spdlog::debug("tessera exporter: {}: no Xid events: {}", uuid, r.error().message());
    events_registered_.insert(uuid);
  }
  for (int n = 0; n < 1024; ++n) {
    auto e = events_->wait(0);
    if (!e) {
      if (e.error().code == NVML_ERROR_TIMEOUT) {
        report("events", "");
        break;
      }
      report("events", "nvmlEventSetWait_v2: " + e.error().message() + "; the event set is made again next time");
      events_.reset();
      break;
    }
    if (e->type != nvmlEventTypeXidCriticalError) continue;
    auto gpu = std::ranges::find_if(handles, [&](const auto& h) { return h.first == e->device; });
    if (gpu == handles.end()) continue;
    std::string key = gpu->second;
    if (e->gpu_instance_id && *e->gpu_instance_id != NVML_INSTANCE_ID_NONE)
      for (const auto& d : out.devices)
        if (d.labels.mig && d.labels.uuid == key && d.labels.gpu_instance_id == *e->gpu_instance_id)
          key = d.labels.device_uuid;
    if (key.empty()) continue;
    auto& x = xids_[key];
    x.last = e->data;
    ++x.counts[e->data];
    spdlog::info("tessera exporter: {}: Xid {}", key, e->data);
  }
}

std::optional<Attribution> Sampler::fetch_attribution() {
  if (options_.pod_resources_socket.empty()) return std::nullopt;
  auto pods = plugin::list_pod_resources(options_.pod_resources_socket, options_.pod_resources_timeout);
  if (!pods) {
    report("pod-resources", "pod-resources: " + pods.error().message + "; series go out without pod labels");
    return std::nullopt;
  }
  report("pod-resources", "");
  return attribute(*pods, options_.resource_prefix);
}

void Sampler::attach_replicas(const Attribution& attribution, Sample& out) {
  if (options_.ledger_root.empty()) return;
  std::map<std::string, quota::Reading> readings;  // by ledger key: one read per container and resource
  std::map<std::string, std::vector<std::string>> held;  // by key: the UUIDs the driver holds (the memory hook's record)
  std::string record_problem;
  for (const auto& h : attribution.replicas) {
    auto device = std::ranges::find_if(out.devices, [&](const DeviceSample& d) { return d.labels.device_uuid == h.device_uuid; });
    if (device == out.devices.end()) continue;
    std::string key = sharing::ledger_key(h.resource, h.resource_ids);
    auto found = readings.find(key);
    if (found == readings.end()) {
      found = readings.emplace(key, quota::Reading{}).first;
      std::string dir = options_.ledger_root + "/" + key;
      if (!quota::read_ledger(dir.c_str(), found->second)) {
        // No ledger yet (no CUDA call in the container) is normal: said at debug level.
        spdlog::debug("tessera exporter: {}/{}/{}: {}", h.owner.pod_namespace, h.owner.pod, h.owner.container,
                      found->second.message);
        continue;
      }
      char why[256];
      quota::DriverLimits record;
      if (quota::read_driver_limits(dir.c_str(), record, why, sizeof why))
        for (uint32_t i = 0; i < record.count; ++i) held[key].emplace_back(record.devices[i].uuid);
      else if (why[0])
        record_problem = std::string("memory hook record ") + why + " (its replicas read as the library's)";
    }
    const quota::Reading& r = found->second;
    const auto& driver = held[key];
    auto driver_holds = [&](const char* uuid) { return std::ranges::find(driver, uuid) != driver.end(); };
    for (uint32_t i = 0; i < r.device_count; ++i)
      if (h.device_uuid == r.devices[i].uuid) {
        std::string ids;
        for (const auto& id : h.replica_ids) ids += (ids.empty() ? "" : ",") + id;
        out.replicas.push_back({device->labels, ids, h.owner, r.devices[i].charged, r.devices[i].quota,
                                driver_holds(r.devices[i].uuid)});
      }
  }
  report("driver-limits", record_problem);
}

}  // namespace tessera::exporter
