#include "dra/driver.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iterator>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <thread>

#include "core/process.hpp"
#include "core/text.hpp"
#include "cuda_quota/env.h"
#include "mig/mig_plan.hpp"
#include "nvml/device.hpp"
#include "nvml/inventory.hpp"
#include "plugin/ledger_dir.hpp"
#include "reconciler/mig_apply.hpp"
#include "reconciler/node_state.hpp"
#include "sharing/cdi.hpp"

namespace tessera::dra {
namespace {

namespace sd = sharing::dra;
using nlohmann::json;

// MIG mode changes without a GPU reset from Hopper on; NVIDIA's DRA driver
// enables MIG at prepare only there (A100 must already be in MIG mode:
// dra-driver-nvidia-gpu PR #1018).
bool switches_without_reset(const GpuModel* m) {
  return m && (m->architecture == "Hopper" || m->architecture == "Blackwell");
}

// NVML's "00000000:07:00.0" as Kubernetes' resource.kubernetes.io/pciBusID
// writes it: "0000:07:00.0" (a 16-bit domain, lower case).
std::string pci_bus_id(std::string nvml) {
  for (auto& c : nvml) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto colon = nvml.find(':');
  if (colon != std::string::npos && colon > 4) nvml.erase(0, colon - 4);
  return nvml;
}

// A PCI device's place in the machine, from sysfs, as Kubernetes' standard
// attributes describe it (k8s.io/dynamic-resource-allocation/deviceattribute):
// /sys/bus/pci/devices/<bdf> links (relatively) to
// /sys/devices/pci<domain>:<bus>/.../<bdf>, whose first component is the
// PCIe root complex; its numa_node file holds the NUMA node, -1 for none.
// What cannot be read is left out, as NVIDIA's driver leaves it out.
struct PciPlace {
  std::string root;
  std::optional<int64_t> numa;
};
PciPlace pci_place(const std::string& sysfs, const std::string& bdf) {
  namespace fs = std::filesystem;
  PciPlace out;
  // Extended BDF: "0000:07:00.0", lower-case hex.
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (sysfs.empty() || bdf.size() != 12 || bdf[4] != ':' || bdf[7] != ':' || bdf[10] != '.') return out;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
    if (!hex(bdf[i])) return out;
  const fs::path link = fs::path(sysfs) / "bus" / "pci" / "devices" / bdf;
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  if (!ec && target.is_relative()) {
    const fs::path resolved = (fs::path("bus/pci/devices") / target).lexically_normal();
    auto it = resolved.begin();
    if (it != resolved.end() && *it == "devices" && ++it != resolved.end() && it->string().starts_with("pci") &&
        resolved.filename() == bdf)
      out.root = it->string();
  }
  std::ifstream numa(link / "numa_node");
  int64_t node = -1;
  if (numa >> node && node >= 0) out.numa = node;
  return out;
}

std::optional<uint32_t> profile_index(const GpuModel& m, const std::string& name) {
  const auto* p = m.profile(name);
  if (!p) return std::nullopt;
  return static_cast<uint32_t>(p - m.profiles.data());
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The kernel's boot id from `path` (one line, a UUID); empty when it cannot
// be read.
std::string read_boot_id(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path);
  std::string id;
  if (!in || !std::getline(in, id)) return {};
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
  return id.size() <= 64 ? id : std::string();
}

std::string spec_file_name(const DriverOptions& o, const std::string& uid) {
  return o.cdi.names.vendor + "-" + o.cdi_class + "_" + uid + ".json";
}

std::string ledger_key(const std::string& uid) { return "dra-" + uid; }

}  // namespace

Driver::Driver(const nvml::Session& session, DriverOptions options, ClaimSource& claims)
    : session_(session),
      options_(std::move(options)),
      claims_(claims),
      file_(options_.state_dir + "/checkpoint.json"),
      health_(options_.health) {}

Result<std::unique_ptr<Driver>> Driver::start(const nvml::Session& session, DriverOptions options, ClaimSource& claims) {
  if (options.node.empty()) return fail(Errc::invalid_argument, "the DRA driver needs its node's name");
  if (options.state_dir.empty()) return fail(Errc::invalid_argument, "the DRA driver needs a state directory");
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir, ec);
  if (ec) return fail(Errc::io, "cannot create the DRA state directory " + options.state_dir + ": " + ec.message());
  std::unique_ptr<Driver> d(new Driver(session, std::move(options), claims));
  std::lock_guard lock(d->mutex_);
  auto cp = d->file_.load();
  if (!cp) return unexpected(cp.error());
  if (!cp->node.empty() && cp->node != d->options_.node)
    return fail(Errc::conflict, "the DRA checkpoint " + d->file_.path() + " is node " + cp->node + "'s, not " +
                                    d->options_.node + "'s (a state directory copied between nodes?)");
  if (!cp->driver.empty() && cp->driver != d->options_.driver)
    return fail(Errc::conflict, "the DRA checkpoint " + d->file_.path() + " is driver " + cp->driver + "'s, not " +
                                    d->options_.driver + "'s");
  d->checkpoint_ = std::move(*cp);
  d->checkpoint_.node = d->options_.node;
  d->checkpoint_.driver = d->options_.driver;
  if (auto r = d->refresh_locked(); !r) return unexpected(r.error());
  const std::string boot = read_boot_id(d->options_.boot_id_file);
  if (boot.empty())
    spdlog::warn("cannot read the boot id from {}: a reboot will not be noticed, and claims prepared before one "
                 "would be answered from the checkpoint", d->options_.boot_id_file);
  else if (!d->checkpoint_.boot_id.empty() && d->checkpoint_.boot_id != boot)
    d->forget_previous_boot_locked(d->checkpoint_.boot_id, boot);
  if (!boot.empty()) d->checkpoint_.boot_id = boot;
  if (auto r = d->adopt_locked(); !r) return unexpected(r.error());
  d->sync_mps_locked();  // the daemons of claims prepared before a restart
  if (auto r = d->sync_timeslices_locked(); !r)  // a level a crash left behind; retried with the next claim
    spdlog::warn("{}", r.error().message);
  return d;
}

void Driver::on_change(std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  listeners_.push_back(std::move(callback));
}

Checkpoint Driver::checkpoint() const {
  std::lock_guard lock(mutex_);
  return checkpoint_;
}

void Driver::changed_locked() {
  ++version_;
  pending_notify_ = true;
}

const Driver::GpuNow* Driver::gpu_by_uuid(const std::string& uuid) const {
  for (const auto& g : gpus_)
    if (g.gpu.uuid == uuid) return &g;
  return nullptr;
}

Result<void> Driver::save_locked() { return file_.save(checkpoint_); }

// ---- What the GPUs hold -----------------------------------------------------

std::map<uint32_t, sd::Gpu::ReportedProfile> Driver::reported_profiles_locked(const sd::Gpu& gpu) {
  if (auto known = reported_profiles_.find(gpu.uuid); known != reported_profiles_.end()) return known->second;
  auto device = session_.device(gpu.index);
  auto infos = device ? device->gpu_instance_profiles() : unexpected(device.error());
  if (!infos) {  // asked again at each refresh (the catalog's figures meanwhile); said once per GPU
    const bool first = warned_profiles_.insert(gpu.uuid).second;
    spdlog::log(first ? spdlog::level::warn : spdlog::level::debug,
                "GPU {}: cannot read its MIG profiles through NVML ({}); the catalog's memory, multiprocessors and "
                "engines are published until it can",
                gpu.uuid, infos.error().message());
    return {};
  }
  warned_profiles_.erase(gpu.uuid);
  std::map<uint32_t, sd::Gpu::ReportedProfile> out;
  for (const auto& info : *infos)
    for (uint32_t pi = 0; pi < gpu.model->profiles.size(); ++pi) {
      const auto& p = gpu.model->profiles[pi];
      if (p.profile_id != info.id) continue;
      sd::Gpu::ReportedProfile& r = out[pi];
      r.multiprocessors = info.multiprocessor_count;
      r.engines = info.engines;
      if (info.multiprocessor_count != p.sm_count && info.multiprocessor_count != 0)
        spdlog::info("GPU {}: its driver reports {} with {} multiprocessors where the catalog says {}; published as "
                     "the driver says",
                     gpu.uuid, p.name, info.multiprocessor_count, p.sm_count);
      if (info.memory_mib == 0) {  // read once per GPU, so said once
        spdlog::warn("GPU {}: its driver reports {} with 0 MiB of memory; the catalog's {} MiB is published", gpu.uuid,
                     p.name, p.memory_mib);
        continue;
      }
      r.memory_mib = info.memory_mib;
      if (info.memory_mib != p.memory_mib)
        spdlog::info("GPU {}: its driver reports {} as {} MiB where the catalog says {} MiB; published as the driver says",
                     gpu.uuid, p.name, info.memory_mib, p.memory_mib);
    }
  reported_profiles_[gpu.uuid] = out;
  return out;
}

Result<void> Driver::refresh_locked() {
  auto inv = nvml::collect_inventory(session_);
  if (!inv) return fail(Errc::io, "cannot read the GPUs through NVML: " + inv.error().message());
  auto node = reconciler::read_node_state(session_, *inv);  // one read of the GPUs for both
  if (!node) return unexpected(node.error());
  std::vector<GpuNow> gpus;
  for (const auto& g : *node) {
    GpuNow now;
    sd::Gpu& x = now.gpu;
    x.index = g.state.index;
    x.minor = g.state.index;
    x.uuid = g.state.uuid;
    x.model = g.state.model;
    x.product_name = g.name;
    x.driver_version = inv->driver_version;
    x.cuda_driver_version = inv->cuda_version;
    x.mig_enabled = g.state.mig_enabled;
    x.mig_mode_switchable = options_.switch_mig_mode && switches_without_reset(g.state.model);
    const nvml::GpuRecord* rec = nullptr;
    for (const auto& r : inv->gpus)
      if (r.index == g.state.index) rec = &r;
    if (rec) {
      x.minor = rec->minor.value_or(rec->index);
      x.pci_bus_id = pci_bus_id(rec->pci.bus_id);
      const auto place = pci_place(options_.sysfs, x.pci_bus_id);
      x.pcie_root = place.root;
      x.numa_node = place.numa;
      x.memory_bytes = rec->memory.total;
      if (x.product_name.empty()) x.product_name = rec->name;
      x.architecture = rec->architecture;
      x.compute_capability = rec->compute_capability;
      x.brand = rec->brand;
    }
    if (x.memory_bytes == 0 && x.model) x.memory_bytes = x.model->memory_mib << 20;
    if (x.model && x.mig_enabled) x.reported_profiles = reported_profiles_locked(x);
    if (!x.model && x.mig_enabled && warned_uncatalogued_.insert(x.uuid).second)
      spdlog::warn("GPU {} ({}): MIG is on and the GPU catalog lacks this model, so neither the GPU nor its MIG "
                   "devices are published (turn MIG off to serve it whole; `tessera catalog` lists the models)",
                   x.uuid, x.product_name);
    for (const auto& inst : g.state.instances) {
      Present p{inst.placed, inst.gi_id, 0, inst.uuid};
      if (rec)
        for (const auto& m : rec->mig_devices)
          if (m.gpu_instance_id == inst.gi_id) p.ci_id = m.compute_instance_id;
      now.present.push_back(p);
    }
    gpus.push_back(std::move(now));
  }
  gpus_ = std::move(gpus);
  files_.reset();  // read again when a spec is next written
  // Instances the checkpoint names learn their ids and UUIDs from NVML.
  for (auto& [name, inst] : checkpoint_.instances) {
    const auto* g = gpu_by_uuid(inst.gpu_uuid);
    if (!g || !g->gpu.model) continue;
    auto pi = profile_index(*g->gpu.model, inst.profile);
    for (const auto& p : g->present)
      if (pi && p.placed == PlacedInstance{*pi, inst.start}) {
        if (!inst.uuid.empty() && !p.uuid.empty() && p.uuid != inst.uuid) continue;  // another's, made in its place
        inst.gi_id = p.gi_id;
        inst.ci_id = p.ci_id;
        if (!p.uuid.empty()) inst.uuid = p.uuid;
      }
  }
  apply_health_locked();
  changed_locked();
  return {};
}

Result<sharing::DriverFiles> Driver::driver_files_locked() {
  if (files_) return *files_;
  // What CDI needs of the inventory: each GPU's index and minor, and its MIG
  // devices' instance ids (their capability nodes).
  sharing::Inventory inv;
  for (const auto& g : gpus_) {
    sharing::Gpu x;
    x.index = g.gpu.index;
    x.uuid = g.gpu.uuid;
    x.minor = g.gpu.minor;
    x.mig_enabled = g.gpu.mig_enabled;
    for (const auto& p : g.present) {
      sharing::MigDevice m;
      m.uuid = p.uuid;
      m.gi_id = p.gi_id;
      m.ci_id = p.ci_id;
      m.start = p.placed.start;
      x.mig_devices.push_back(m);
    }
    inv.gpus.push_back(std::move(x));
  }
  auto files = plugin::read_driver_files(options_.cdi, inv);
  if (!files) return unexpected(files.error());
  files_ = std::move(*files);
  return *files_;
}

void Driver::apply_health_locked() {
  for (auto& g : gpus_) {
    g.gpu.taints.clear();
    g.gpu.instance_taints.clear();
    sharing::Device whole;
    whole.gpu_uuid = g.gpu.uuid;
    whole.physical_uuid = g.gpu.uuid;
    whole.gpu_index = g.gpu.index;
    auto xid_taint = [&](const std::string& key) {
      auto it = last_xid_.find(key);
      return sd::Taint{options_.driver + "/xid", it == last_xid_.end() ? "" : std::to_string(it->second), "NoSchedule"};
    };
    if (lost_.contains(g.gpu.uuid)) {
      // Fallen off the bus: what runs there is gone too (NoExecute).
      g.gpu.taints.push_back({options_.driver + "/gpu-lost", "", "NoExecute"});
      continue;
    }
    if (!health_.healthy(whole)) {
      g.gpu.taints.push_back(xid_taint(g.gpu.uuid));
      continue;
    }
    for (const auto& p : g.present) {
      sharing::Device mig = whole;
      mig.is_mig = true;
      mig.gi_id = p.gi_id;
      mig.ci_id = p.ci_id;
      mig.physical_uuid = p.uuid;
      if (!health_.healthy(mig)) g.gpu.instance_taints[p.placed] = {xid_taint(g.gpu.uuid + "/" + std::to_string(p.gi_id))};
    }
  }
}

Result<void> Driver::refresh() {
  {
    std::lock_guard lock(mutex_);
    if (auto r = refresh_locked(); !r) return r;
  }
  notify();
  return {};
}

void Driver::notify() {
  std::vector<std::function<void()>> listeners;
  {
    std::lock_guard lock(mutex_);
    if (!pending_notify_) return;
    pending_notify_ = false;
    listeners = listeners_;
  }
  for (auto& l : listeners) l();
}

void Driver::record_health(const sharing::HealthEvent& event) {
  {
    std::lock_guard lock(mutex_);
    if (!health_.record(event)) return;
    if (event.kind == sharing::HealthEvent::Kind::xid && event.xid == 79) lost_.insert(event.gpu_uuid);
    if (event.kind == sharing::HealthEvent::Kind::xid) {
      std::string key = event.gpu_uuid;
      if (event.gi_id && *event.gi_id != ~0u) key += "/" + std::to_string(*event.gi_id);
      last_xid_[key] = event.xid;
    }
    spdlog::warn("GPU {}: {} {}: its devices are tainted until it recovers", event.gpu_uuid,
                 event.kind == sharing::HealthEvent::Kind::xid ? "XID" : "error", event.xid);
    apply_health_locked();
    changed_locked();
  }
  notify();
}

void Driver::recover_health() {
  {
    std::lock_guard lock(mutex_);
    auto probe = [&](const std::string& uuid) {
      for (const auto& g : gpus_)
        if (g.gpu.uuid == uuid) {
          auto dev = session_.device(g.gpu.index);
          return dev && dev->uuid().has_value();
        }
      return false;
    };
    if (!health_.recover(sharing::Clock::now(), probe)) return;
    for (auto it = lost_.begin(); it != lost_.end();) {
      sharing::Device whole;
      whole.gpu_uuid = *it;
      whole.physical_uuid = *it;
      it = health_.healthy(whole) ? lost_.erase(it) : std::next(it);
    }
    spdlog::info("devices recovered: their taints are removed");
    apply_health_locked();
    changed_locked();
  }
  notify();
}

std::vector<sd::Taken> Driver::taken_locked() const {
  std::vector<sd::Taken> out(gpus_.size());
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const auto& g = gpus_[i].gpu;
    if (g.model)
      for (const auto& [name, inst] : checkpoint_.instances)
        if (inst.gpu_uuid == g.uuid)
          if (auto pi = profile_index(*g.model, inst.profile)) out[i].push_back({*pi, inst.start});
    for (const auto& [uid, claim] : checkpoint_.claims)
      for (const auto& d : claim.devices)
        if (d.gpu_uuid == g.uuid && d.device == "gpu-" + std::to_string(g.minor)) {
          out[i].push_back({sd::kWholeGpuProfile, 0});
          break;
        }
  }
  return out;
}

std::vector<sd::Taken> Driver::fixed_locked() const {
  std::vector<sd::Taken> out(gpus_.size());
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const auto& g = gpus_[i];
    if (!g.gpu.model) continue;
    for (const auto& p : g.present) {
      bool ours = false;
      for (const auto& [name, inst] : checkpoint_.instances)
        if (inst.gpu_uuid == g.gpu.uuid && profile_index(*g.gpu.model, inst.profile) == p.placed.profile &&
            inst.start == p.placed.start)
          ours = true;
      if (!ours) out[i].push_back(p.placed);
    }
  }
  return out;
}

std::vector<sd::Taken> Driver::withdrawn_locked() const {
  std::vector<sd::Taken> out(gpus_.size());
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const auto& g = gpus_[i].gpu;
    if (!g.model) continue;
    for (const auto& [name, inst] : checkpoint_.instances)
      if (inst.gpu_uuid == g.uuid && inst.state == CheckpointInstance::State::destroying)
        if (auto pi = profile_index(*g.model, inst.profile)) out[i].push_back({*pi, inst.start});
  }
  return out;
}

// What holds slices the scheduler must not give out: instances tessera did
// not cut (offered as they are) and `withdrawn` (withdrawn_locked: not offered).
std::vector<sd::Taken> Driver::held_locked(const std::vector<sd::Taken>& withdrawn) const {
  auto held = fixed_locked();
  for (size_t i = 0; i < held.size(); ++i) held[i].insert(held[i].end(), withdrawn[i].begin(), withdrawn[i].end());
  return held;
}

std::vector<sd::Device> Driver::devices_locked() const {
  std::vector<sd::Gpu> gpus;
  for (const auto& g : gpus_) gpus.push_back(g.gpu);
  sd::PoolOptions po;
  po.order = options_.order;
  po.memory_shares = options_.memory_shares;
  const auto withdrawn = withdrawn_locked();
  auto out = sd::devices(gpus, taken_locked(), po, held_locked(withdrawn));
  std::erase_if(out, [&](const sd::Device& d) {
    const auto& w = withdrawn[d.gpu];
    return d.mig && d.fixed && std::find(w.begin(), w.end(), *d.mig) != w.end();
  });
  return out;
}

PoolState Driver::pool() const {
  std::lock_guard lock(mutex_);
  PoolState out;
  const auto held = held_locked(withdrawn_locked());
  for (size_t i = 0; i < gpus_.size(); ++i)
    if (auto set = sd::counter_set(gpus_[i].gpu, held[i])) out.counter_sets.push_back(std::move(*set));
  out.devices = devices_locked();
  out.version = version_;
  return out;
}

// ---- Start: adopt, finish, report -----------------------------------------

Result<void> Driver::adopt_locked() {
  std::vector<std::string> names;
  for (const auto& [name, inst] : checkpoint_.instances) names.push_back(name);
  for (const auto& name : names) {
    auto& inst = checkpoint_.instances.at(name);
    const auto* g = gpu_by_uuid(inst.gpu_uuid);
    std::optional<uint32_t> pi = g && g->gpu.model ? profile_index(*g->gpu.model, inst.profile) : std::nullopt;
    bool present = false;
    if (pi)
      for (const auto& p : g->present)
        present = present || (p.placed == PlacedInstance{*pi, inst.start} &&
                               (inst.uuid.empty() || p.uuid.empty() || p.uuid == inst.uuid));
    if (!g || !pi) {
      start_report_.push_back("checkpoint: " + name + " is on GPU " + inst.gpu_uuid +
                              ", which this node no longer has; forgotten");
      checkpoint_.instances.erase(name);
      continue;
    }
    switch (inst.state) {
      case CheckpointInstance::State::ready:
        if (present) {
          start_report_.push_back("adopted " + name + " (" + inst.uuid + ") for claims " + join(inst.users));
        } else {
          start_report_.push_back("checkpoint: " + name + " (claims " + join(inst.users) +
                                  ") is no longer on the GPU: someone destroyed it");
          checkpoint_.instances.erase(name);
        }
        break;
      case CheckpointInstance::State::creating:
        // Its claim's prepare was cut short: undone with that claim below.
        start_report_.push_back("checkpoint: " + name + " was being created for " + join(inst.users) +
                                (present ? " and exists" : " and does not exist"));
        break;
      case CheckpointInstance::State::destroying:
        if (auto r = destroy_instance_locked(name); !r) {
          start_report_.push_back("checkpoint: " + name + " was being destroyed and still cannot be: " + r.error().message);
        } else {
          start_report_.push_back("finished destroying " + name);
        }
        break;
    }
  }
  // A claim whose prepare or unprepare was cut short (the driver killed
  // between a change and its record) was never handed to a container: undo
  // it now rather than leave what it cut to a retry that may never come.
  std::vector<std::pair<std::string, std::string>> unfinished;  // uid, "ns/name"
  for (const auto& [uid, c] : checkpoint_.claims)
    if (c.state != CheckpointClaim::State::prepared) unfinished.emplace_back(uid, c.claim_namespace + "/" + c.name);
  for (const auto& [uid, name] : unfinished) {
    if (auto r = release_locked(uid); !r)
      start_report_.push_back("checkpoint: claim " + name + " was cut short and cannot be undone yet (retried at its "
                              "next prepare or unprepare): " + r.error().message);
    else
      start_report_.push_back("checkpoint: claim " + name + " was cut short; what it had made is undone");
  }
  // An instance recorded for claims the checkpoint no longer holds (damaged by hand) goes too.
  std::vector<std::string> orphans;
  for (const auto& [name, inst] : checkpoint_.instances)
    if (std::none_of(inst.users.begin(), inst.users.end(), [&](const std::string& u) { return checkpoint_.claims.contains(u); }))
      orphans.push_back(name);
  for (const auto& name : orphans) {
    if (auto r = destroy_instance_locked(name); !r)
      start_report_.push_back("checkpoint: " + name + " belongs to no claim and cannot be destroyed yet: " + r.error().message);
    else
      start_report_.push_back("destroyed " + name + ", which belongs to no claim");
  }
  const auto fixed = fixed_locked();
  for (size_t i = 0; i < gpus_.size(); ++i)
    for (const auto& f : fixed[i])
      start_report_.push_back("GPU " + std::to_string(gpus_[i].gpu.index) + ": " +
                              gpus_[i].gpu.model->profiles[f.profile].name + "@" + std::to_string(f.start) +
                              " was not cut by tessera: served as it is, its slices out of the counters");
  for (const auto& line : start_report_) spdlog::info("DRA start: {}", line);
  return save_locked();
}

// ---- Prepare and unprepare ------------------------------------------------

namespace {

// Seconds; the last bucket is +Inf. Prepare's targets (a share under 5 ms,
// a MIG cut under 50 ms) fall between bounds.
constexpr double kLatencyBounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void Driver::Latency::observe(double seconds) {
  static_assert(std::size(kLatencyBounds) == kLatencyBuckets);
  for (size_t i = 0; i < std::size(kLatencyBounds); ++i)
    if (seconds <= kLatencyBounds[i]) ++buckets[i];
  ++count;
  sum += seconds;
}

std::map<std::string, PrepareOutcome> Driver::prepare(const std::vector<ClaimRef>& claims) {
  std::map<std::string, PrepareOutcome> out;
  {
    std::unique_lock lock(mutex_);
    for (const auto& ref : claims) {
      const auto start = std::chrono::steady_clock::now();
      out[ref.uid] = prepare_one(ref, lock);
      counts_.prepare.observe(seconds_since(start));
      ++(out[ref.uid].error.empty() ? counts_.prepared : counts_.prepare_failed);
      if (!out[ref.uid].error.empty())
        spdlog::warn("prepare {}/{} ({}): {}", ref.claim_namespace, ref.name, ref.uid, out[ref.uid].error);
    }
  }
  notify();
  return out;
}

std::map<std::string, std::string> Driver::unprepare(const std::vector<ClaimRef>& claims) {
  std::map<std::string, std::string> out;
  {
    std::lock_guard lock(mutex_);
    for (const auto& ref : claims) {
      const auto start = std::chrono::steady_clock::now();
      out[ref.uid] = unprepare_one(ref);
      counts_.unprepare.observe(seconds_since(start));
      ++(out[ref.uid].empty() ? counts_.unprepared : counts_.unprepare_failed);
      if (!out[ref.uid].empty())
        spdlog::warn("unprepare {}/{} ({}): {}", ref.claim_namespace, ref.name, ref.uid, out[ref.uid]);
    }
  }
  notify();
  return out;
}

std::string Driver::metrics_text() const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  auto counter = [&](const char* name, const char* help, const char* label, const char* v1, uint64_t n1, const char* v2,
                     uint64_t n2) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n";
    out << name << "{" << label << "=\"" << v1 << "\"} " << n1 << "\n" << name << "{" << label << "=\"" << v2 << "\"} " << n2
        << "\n";
  };
  auto histogram = [&](const char* name, const char* help, const Latency& l) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (size_t i = 0; i < std::size(kLatencyBounds); ++i)
      out << name << "_bucket{le=\"" << kLatencyBounds[i] << "\"} " << l.buckets[i] << "\n";
    out << name << "_bucket{le=\"+Inf\"} " << l.count << "\n" << name << "_sum " << l.sum << "\n" << name << "_count "
        << l.count << "\n";
  };
  auto gauge = [&](const char* name, const char* help, uint64_t v) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n" << name << " " << v << "\n";
  };
  counter("tessera_dra_prepare_claims_total", "Claims the kubelet asked this driver to prepare, by result.", "result", "ok",
          counts_.prepared, "error", counts_.prepare_failed);
  counter("tessera_dra_unprepare_claims_total", "Claims the kubelet asked this driver to unprepare, by result.", "result",
          "ok", counts_.unprepared, "error", counts_.unprepare_failed);
  histogram("tessera_dra_prepare_seconds", "Time to prepare one claim (MIG cut, CDI spec, MPS and time-slice settings).",
            counts_.prepare);
  histogram("tessera_dra_unprepare_seconds", "Time to unprepare one claim.", counts_.unprepare);
  gauge("tessera_dra_prepared_claims", "Claims prepared on this node now (the checkpoint's).", checkpoint_.claims.size());
  gauge("tessera_dra_mig_instances", "MIG instances this driver cut and holds now.", checkpoint_.instances.size());
  out << "# HELP tessera_dra_mig_instances_total MIG instances this driver cut and destroyed since it started.\n"
         "# TYPE tessera_dra_mig_instances_total counter\n"
      << "tessera_dra_mig_instances_total{action=\"cut\"} " << counts_.instances_cut << "\n"
      << "tessera_dra_mig_instances_total{action=\"destroyed\"} " << counts_.instances_destroyed << "\n";
  return out.str();
}

namespace {

PrepareOutcome from_checkpoint(const CheckpointClaim& claim) {
  PrepareOutcome out;
  for (const auto& d : claim.devices) out.devices.push_back({d.requests, d.pool, d.device, d.cdi_ids, d.share_id});
  return out;
}

PrepareOutcome failed(std::string why) { return {{}, std::move(why)}; }

}  // namespace

PrepareOutcome Driver::prepare_one(const ClaimRef& ref, std::unique_lock<std::mutex>& lock) {
  if (ref.uid.empty()) return failed("the kubelet named a claim without a UID");
  const std::string label = "claim " + ref.claim_namespace + "/" + ref.name;
  if (in_flight_.contains(ref.uid)) return failed(label + ": an earlier prepare of it is still running; try again");
  if (auto it = checkpoint_.claims.find(ref.uid); it != checkpoint_.claims.end()) {
    std::string gone;
    if (it->second.state == CheckpointClaim::State::prepared) {
      if (still_prepared_locked(ref.uid, it->second, gone)) return from_checkpoint(it->second);
      spdlog::warn("{}: prepared before, but {}: prepared again", label, gone);
    }
    // An earlier attempt was cut short, or what it made is gone: undo what
    // is left, then start over.
    if (auto r = release_locked(ref.uid); !r)
      return failed(label + ": " + (gone.empty() ? "an earlier attempt left state that" : gone + ", and what is left of it") +
                    " cannot be undone: " + r.error().message);
  }
  // The API server is asked without the driver's lock (its answer may take
  // seconds): other claims, health and the pool go on meanwhile. The claim
  // is in flight, so nothing else prepares or undoes it; nothing of it is in
  // the checkpoint yet.
  in_flight_.insert(ref.uid);
  lock.unlock();
  auto object = claims_.get_claim(ref.claim_namespace, ref.name);
  lock.lock();
  in_flight_.erase(ref.uid);
  if (!object) return failed(label + ": cannot read the ResourceClaim: " + object.error().message);
  auto alloc = read_allocation(*object, options_.driver, options_.node, ref.uid);
  if (!alloc) return failed(alloc.error().message);
  if (alloc->devices.empty())
    return failed(label + ": its allocation holds no device of driver " + options_.driver + " in pool " + options_.node);

  struct Step {
    const AllocatedDevice* alloc = nullptr;
    sd::Device device;
    size_t gpu = 0;  // index into gpus_ (which a refresh rebuilds, in the same order)
    bool create = false;    // cut the MIG instance
    bool join = false;      // share an instance this driver cut for other claims
    std::optional<bool> set_mig_mode;
    // Admin access to a MIG placement nobody cut: nothing is cut for an
    // admin, who gets the GPU's own device nodes instead (what NVML needs to
    // watch the whole GPU).
    bool admin_whole_gpu = false;
  };
  // Checked against the GPUs as last read; when a step cuts an instance or
  // changes MIG mode (or the check fails: the last read may be stale), read
  // them again and check again: another writer may have changed them.
  std::vector<Step> steps;
  auto plan = [&]() -> std::optional<std::string> {
    steps.clear();
    auto fail_plan = [](std::string why) -> std::optional<std::string> { return why; };
    const auto offered = devices_locked();
    std::map<std::string, MigLayout> layout;  // per GPU UUID: what is on it plus what this claim cuts
    for (const auto& g : gpus_)
      for (const auto& p : g.present) layout[g.gpu.uuid].push_back(p.placed);
    auto users_of = [&](const std::string& device) {
      std::vector<std::string> users;
      for (const auto& [uid, c] : checkpoint_.claims)
        for (const auto& d : c.devices)
          if (d.device == device && !d.admin) users.push_back(c.claim_namespace + "/" + c.name);
      return users;
    };
    for (const auto& a : alloc->devices) {
      auto it = std::find_if(offered.begin(), offered.end(), [&](const sd::Device& d) { return d.name == a.device; });
      if (it == offered.end()) {
        // A placement that overlaps an instance someone else cut is no longer offered.
        for (const auto& g : gpus_) {
          if (!g.gpu.model) continue;
          for (const auto& d : sd::devices({g.gpu}, {{}}, {}))
            if (d.name == a.device && d.mig) {
              MigLayout now;
              for (const auto& p : g.present) now.push_back(p.placed);
              return fail_plan(label + ": " + a.device + " no longer fits GPU " + std::to_string(g.gpu.index) +
                            ", which now holds " + describe_layout(*g.gpu.model, now) + " (another writer changed it)");
            }
        }
        return fail_plan(label + ": device " + a.device + " is not one this node offers");
      }
      Step s{&a, *it, it->gpu, false, false, std::nullopt, false};
      const auto& g = gpus_[s.gpu].gpu;
      const bool is_mig = s.device.mig.has_value();
      if (a.admin) {
        // Admin access: the device as it is, beside any ordinary claim, with
        // no config applied (no MPS daemon, interval or quota), nothing cut
        // and MIG mode left alone.
        const bool cut = !is_mig || s.device.fixed ||
                         std::any_of(gpus_[s.gpu].present.begin(), gpus_[s.gpu].present.end(),
                                     [&](const Present& p) { return p.placed == *s.device.mig; });
        s.admin_whole_gpu = !cut;
        steps.push_back(std::move(s));
        continue;
      }
      if (a.config) {
        if (a.config->kind == DeviceConfig::Kind::gpu && is_mig)
          return fail_plan(label + ": a GpuConfig cannot configure the MIG device " + a.device + " (use MigDeviceConfig)");
        if (a.config->kind == DeviceConfig::Kind::mig && !is_mig)
          return fail_plan(label + ": a MigDeviceConfig cannot configure the whole GPU " + a.device + " (use GpuConfig)");
        if (const auto want = a.config->sharing.timeslice) {
          if (options_.nvidia_smi.empty())
            return fail_plan(label + ": the config asks for the time-slice interval " +
                             std::string(kTimeSliceIntervals[*want]) + ", but this driver sets none (--nvidia-smi is empty)");
          for (const auto& [uid, c] : checkpoint_.claims)
            for (const auto& d : c.devices)
              if (d.gpu_uuid == g.uuid && d.timeslice && *d.timeslice != *want &&
                  c.state != CheckpointClaim::State::unpreparing)
                return fail_plan(label + ": asks for the time-slice interval " + std::string(kTimeSliceIntervals[*want]) +
                                 " on GPU " + std::to_string(g.index) + ", which runs " +
                                 std::string(kTimeSliceIntervals[*d.timeslice]) + " for claim " + c.claim_namespace +
                                 "/" + c.name + " (the interval is the whole GPU's: give its claims one interval)");
        }
        if (a.config->sharing.strategy == SharingConfig::Strategy::mps && !options_.daemons)
          return fail_plan(label + ": the config asks for MPS, but this driver runs no MPS daemons (start tessera dra " +
                           "with --mps-host SOCKET, tessera mps-host's, or --mps-control PROGRAM)");
      }
      const uint64_t capacity = s.device.capacity.count("memory") ? s.device.capacity.at("memory") : 0;
      if (a.memory_bytes && *a.memory_bytes > capacity)
        return fail_plan(label + ": asks for " + std::to_string(*a.memory_bytes >> 20) + " MiB of " + a.device +
                      ", which has " + std::to_string(capacity >> 20) + " MiB");
      const auto users = users_of(a.device);
      if (!users.empty() && !s.device.allow_multiple_allocations)
        return fail_plan(label + ": device " + a.device + " is already prepared for " + join(users) +
                      " and is not shareable (the scheduler's view of the pool is stale)");
      if (is_mig && !s.device.fixed) {
        if (auto inst = checkpoint_.instances.find(a.device); inst != checkpoint_.instances.end()) {
          if (inst->second.state != CheckpointInstance::State::ready)
            return fail_plan(label + ": device " + a.device + " is being created or destroyed for another claim; try again");
          s.join = true;
        } else if (std::none_of(steps.begin(), steps.end(), [&](const Step& o) { return o.create && o.device.name == a.device; })) {
          auto& l = layout[g.uuid];
          l.push_back(*s.device.mig);
          if (auto ok = check_layout(*g.model, l); !ok) {
            l.pop_back();
            return fail_plan(label + ": " + a.device + " no longer fits GPU " + std::to_string(g.index) + ", which now holds " +
                          describe_layout(*g.model, l) + " (" + ok.error().message + "; another writer changed it)");
          }
          if (!g.mig_enabled) {
            if (!g.mig_mode_switchable)
              return fail_plan(label + ": GPU " + std::to_string(g.index) + " has MIG mode off and cannot turn it on without a reset");
            s.set_mig_mode = true;
          }
          s.create = true;
        }
      } else if (!is_mig && g.mig_enabled) {
        if (!gpus_[s.gpu].present.empty())
          return fail_plan(label + ": GPU " + std::to_string(g.index) + " is in MIG mode with instances on it; it cannot be had whole");
        if (!g.mig_mode_switchable)
          return fail_plan(label + ": GPU " + std::to_string(g.index) + " is in MIG mode and cannot leave it without a reset");
        s.set_mig_mode = false;
      }
      steps.push_back(std::move(s));
    }
    // A container reaches one MPS control daemon (CUDA_MPS_PIPE_DIRECTORY is
    // one directory), and each device has its own: a claim with MPS on several
    // devices would mount them all at one path and reach only one.
    std::vector<std::string> mps_devices;
    for (const auto& st : steps)
      if (!st.alloc->admin && st.alloc->config && st.alloc->config->sharing.strategy == SharingConfig::Strategy::mps)
        mps_devices.push_back(st.alloc->device);
    if (mps_devices.size() > 1)
      return fail_plan(label + ": an MPS client connects to one control daemon, and each GPU or MIG device has its own: "
                               "the claim asks for MPS on " + std::to_string(mps_devices.size()) + " devices (" +
                       join(mps_devices) + "); give each device a claim of its own");
    // Multi-user MPS (-M) needs Volta or newer, which NVIDIA's driver checks on every GPU of the daemon
    // [dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/mps_capability.go, PR #1153]. A device's daemon
    // starts in one mode: a claim asking the other mode than the claims it serves already would
    // restart it under their clients, so it waits for them to go.
    for (const auto& st : steps) {
      if (st.alloc->admin || !st.alloc->config || st.alloc->config->sharing.strategy != SharingConfig::Strategy::mps)
        continue;
      const bool multi = st.alloc->config->sharing.multi_user;
      for (const auto& [other_uid, other] : checkpoint_.claims) {
        if (other_uid == ref.uid) continue;
        for (const auto& d : other.devices)
          if (d.mps && d.device == st.device.name && d.mps_multi_user != multi)
            return fail_plan(label + ": the MPS daemon of " + st.device.name + " serves claim " + other.claim_namespace +
                             "/" + other.name + " in " + (d.mps_multi_user ? "multi-user" : "single-user") +
                             " mode; this claim asks multiUser: " + (multi ? "true" : "false") +
                             ", which needs a new daemon: it can be prepared once that claim is gone");
      }
      if (!multi) continue;
      const auto& g = gpus_[st.gpu].gpu;
      const std::string cc = !g.compute_capability.empty() ? g.compute_capability
                             : g.model                      ? g.model->compute_capability
                                                            : "";
      const int major = cc.empty() ? 0 : std::atoi(cc.c_str());
      if (major < 7)
        return fail_plan(label + ": multiUser MPS needs compute capability 7.0 (Volta) or newer; GPU " +
                         std::to_string(g.index) + " has " + (cc.empty() ? "none the driver or the catalog reports" : cc));
    }
    return std::nullopt;
  };
  auto problem = plan();
  const bool changes_gpus = std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.create || s.set_mig_mode; });
  if (problem || changes_gpus) {
    if (auto r = refresh_locked(); !r) return failed(label + ": " + r.error().message);
    problem = plan();
  }
  if (problem) return failed(*problem);

  // ---- Record the intent, then change.
  CheckpointClaim record{ref.claim_namespace, ref.name, CheckpointClaim::State::preparing, {}};
  for (const auto& s : steps) {
    CheckpointDevice d;
    // A device can serve several requests of one claim only through
    // separate results; each result is its own entry.
    d.requests = {s.alloc->request};
    d.pool = s.alloc->pool;
    d.device = s.device.name;
    d.gpu_uuid = gpus_[s.gpu].gpu.uuid;
    d.share_id = s.alloc->share_id;
    d.admin = s.alloc->admin;
    if (!d.admin) d.memory_bytes = s.alloc->memory_bytes;
    if (!d.admin && s.alloc->config && s.alloc->config->sharing.strategy == SharingConfig::Strategy::time_slicing)
      d.timeslice = s.alloc->config->sharing.timeslice;
    record.devices.push_back(std::move(d));
    if (s.create) {
      CheckpointInstance inst;
      inst.gpu_uuid = gpus_[s.gpu].gpu.uuid;
      inst.profile = gpus_[s.gpu].gpu.model->profiles[s.device.mig->profile].name;
      inst.start = s.device.mig->start;
      inst.state = CheckpointInstance::State::creating;
      inst.users = {ref.uid};
      checkpoint_.instances[s.device.name] = std::move(inst);
    } else if (s.join) {
      checkpoint_.instances[s.device.name].users.push_back(ref.uid);
    }
  }
  checkpoint_.claims[ref.uid] = record;
  std::vector<std::pair<uint32_t, bool>> mode_switched;  // GPU index, the MIG mode it had before this prepare
  auto undo = [&](const std::string& why) {
    std::string msg = label + ": " + why;
    if (auto r = release_locked(ref.uid); !r) msg += "; undoing it failed too (retried at the next prepare): " + r.error().message;
    // MIG mode back as it was where this prepare switched it, unless another
    // claim has come to use the GPU in its new mode meanwhile.
    for (const auto& [index, was] : mode_switched) {
      const GpuNow* g = nullptr;
      for (const auto& x : gpus_)
        if (x.gpu.index == index) g = &x;
      if (!g || !g->gpu.model) continue;
      const bool used = std::any_of(checkpoint_.claims.begin(), checkpoint_.claims.end(), [&](const auto& c) {
        return std::any_of(c.second.devices.begin(), c.second.devices.end(),
                           [&](const CheckpointDevice& d) { return d.gpu_uuid == g->gpu.uuid; });
      });
      if (used) continue;
      mig::Operation back{mig::OpKind::set_mig_mode, index, was, 0, 0, 0, ""};
      if (auto r = reconciler::run_operation(session_, *g->gpu.model, back); !r)
        msg += "; GPU " + std::to_string(index) + " stays in MIG mode " + (was ? "off" : "on") + ": " + r.error().message;
    }
    if (!mode_switched.empty())
      if (auto r = refresh_locked(); !r) msg += "; " + r.error().message;
    changed_locked();
    return failed(msg);
  };
  if (auto r = save_locked(); !r) {
    // Nothing changed on the GPUs: forget the intent in memory too.
    for (const auto& s : steps) {
      if (s.create) checkpoint_.instances.erase(s.device.name);
      if (s.join) std::erase(checkpoint_.instances[s.device.name].users, ref.uid);
    }
    checkpoint_.claims.erase(ref.uid);
    return failed(label + ": " + r.error().message);
  }
  changed_locked();

  for (const auto& s : steps) {
    const sd::Gpu g = gpus_[s.gpu].gpu;
    if (s.set_mig_mode) {
      mig::Operation op{mig::OpKind::set_mig_mode, g.index, *s.set_mig_mode, 0, 0, 0, ""};
      if (auto r = reconciler::run_operation(session_, *g.model, op); !r)
        return undo("cannot turn MIG mode " + std::string(*s.set_mig_mode ? "on" : "off") + " on GPU " +
                    std::to_string(g.index) + ": " +
                    (r.error().message == "pending-reset" ? "the change waits for a GPU reset" : r.error().message));
      if (std::none_of(mode_switched.begin(), mode_switched.end(), [&](const auto& m) { return m.first == g.index; }))
        mode_switched.emplace_back(g.index, !*s.set_mig_mode);
    }
    if (!s.create) continue;
    mig::Operation create{mig::OpKind::create_gpu_instance, g.index, false, s.device.mig->profile, s.device.mig->start, 0, ""};
    auto gi = reconciler::run_operation(session_, *g.model, create);
    if (!gi) return undo("cannot create " + describe_layout(*g.model, std::vector{*s.device.mig}) + " on GPU " +
                         std::to_string(g.index) + ": " + gi.error().message);
    checkpoint_.instances[s.device.name].gi_id = *gi;
    if (auto r = save_locked(); !r) return undo(r.error().message);
    mig::Operation ci{mig::OpKind::create_compute_instance, g.index, false, s.device.mig->profile, s.device.mig->start, *gi, ""};
    if (auto r = reconciler::run_operation(session_, *g.model, ci); !r)
      return undo("cannot create the compute instance of " + s.device.name + ": " + r.error().message);
  }
  if (auto r = refresh_locked(); !r) return undo(r.error().message);
  for (const auto& s : steps)
    if (s.create) {
      auto& inst = checkpoint_.instances[s.device.name];
      if (inst.uuid.empty()) return undo(s.device.name + " was created but NVML shows no MIG device for it");
      inst.state = CheckpointInstance::State::ready;
      ++counts_.instances_cut;
    }

  if (auto r = sync_timeslices_locked(); !r) return undo(r.error().message);

  // ---- The claim's CDI spec and quota files.
  auto files = driver_files_locked();
  if (!files) return undo(files.error().message);
  std::vector<sharing::ClaimCdiDevice> cdi_devices;
  std::vector<sharing::QuotaDevice> shares;
  auto& rec = checkpoint_.claims[ref.uid];
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    sharing::ClaimCdiDevice cd;
    cd.name = s.device.name;
    const GpuNow& now = gpus_[s.gpu];
    cd.device.gpu_index = now.gpu.index;
    cd.device.gpu_uuid = now.gpu.uuid;
    cd.device.physical_uuid = now.gpu.uuid;
    if (s.device.mig && !s.admin_whole_gpu) {
      cd.device.is_mig = true;
      for (const auto& p : now.present)
        if (p.placed == *s.device.mig) {
          cd.device.gi_id = p.gi_id;
          cd.device.ci_id = p.ci_id;
          cd.device.physical_uuid = p.uuid;
        }
    }
    rec.devices[i].uuid = cd.device.physical_uuid;
    rec.devices[i].mps =
        !s.alloc->admin && s.alloc->config && s.alloc->config->sharing.strategy == SharingConfig::Strategy::mps;
    if (rec.devices[i].mps) {
      // NVIDIA's MpsConfig: a per-device limit (by UUID or by index among the
      // claim's devices) over the default; a memory share's size otherwise.
      const auto& sharing = s.alloc->config->sharing;
      auto& d = rec.devices[i];
      d.mps_pinned_bytes = sharing.pinned_memory_limit;
      if (auto it = sharing.per_device_pinned_memory_limit.find(d.uuid); it != sharing.per_device_pinned_memory_limit.end())
        d.mps_pinned_bytes = it->second;
      else if (auto ix = sharing.per_device_pinned_memory_limit.find(std::to_string(i));
               ix != sharing.per_device_pinned_memory_limit.end())
        d.mps_pinned_bytes = ix->second;
      if (!d.mps_pinned_bytes && d.memory_bytes) d.mps_pinned_bytes = d.memory_bytes;
      d.mps_thread_percentage = sharing.active_thread_percentage;
      d.mps_multi_user = sharing.multi_user;
    }
    if (s.device.allow_multiple_allocations && options_.quota.inject && !s.alloc->admin) {
      const uint64_t capacity = s.device.capacity.count("memory") ? s.device.capacity.at("memory") : 0;
      // Memory shares: the default is the whole device; in the other modes nothing, and a claim
      // that holds no memory is not held to any (it shares by time slicing or MPS alone).
      const bool whole = options_.shares.kind == sharing::dra::SharesMode::Kind::memory;
      const uint64_t held = s.alloc->memory_bytes.value_or(whole ? capacity : 0);
      if (held > 0) shares.push_back({cd.device.physical_uuid, held, capacity, options_.quota.context_bytes});
    }
    cdi_devices.push_back(std::move(cd));
  }
  // MPS: the device's control daemon up before the spec names its pipe.
  if (std::any_of(rec.devices.begin(), rec.devices.end(), [](const CheckpointDevice& d) { return d.mps; })) {
    if (auto r = save_locked(); !r) return undo(r.error().message);
    sync_mps_locked();
    const auto deadline = std::chrono::steady_clock::now() + options_.mps_start_timeout;
    std::vector<std::pair<std::string, std::string>> waits;  // device, UUID
    for (const auto& d : rec.devices)
      if (d.mps) waits.emplace_back(d.device, d.uuid);
    for (const auto& [device, uuid] : waits) {
      while (!options_.daemons->up().contains(uuid)) {
        if (std::chrono::steady_clock::now() >= deadline) {
          std::string why;
          for (const auto& st : options_.daemons->status())
            if (st.spec.uuid == uuid) why = st.error;
          return undo("the MPS control daemon of " + device + " (" + uuid + ", " + options_.daemons->where() +
                      ") did not come up within " + std::to_string(options_.mps_start_timeout.count() / 1000) + " s" +
                      (why.empty() ? "" : ": " + why));
        }
        // Other claims, health and the pool go on meanwhile: the claim is
        // "preparing" in the checkpoint and in flight here, so nothing else
        // undoes it; the GPUs are read again in the same order.
        in_flight_.insert(ref.uid);
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        lock.lock();
        in_flight_.erase(ref.uid);
      }
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      const auto& d = rec.devices[i];
      if (!d.mps) continue;
      auto& edits = cdi_devices[i].edits;
      const std::string base = options_.mps_root + "/" + d.uuid;
      // The client's pipe directory (its daemon's) and /dev/shm, where MPS
      // clients and servers meet (the device plugin's layout, docs/design-mps.md).
      edits.env.push_back("CUDA_MPS_PIPE_DIRECTORY=/mps/pipe");
      edits.mounts.push_back({base + "/pipe", "/mps/pipe", true});  // read-only: connect, never bind a daemon there
      edits.mounts.push_back({options_.mps_root + "/shm", "/dev/shm", false});
      // The daemon holds the limits (sync_mps_locked); the client's own
      // variables say them too (a client can only lower what its server gives).
      if (d.mps_pinned_bytes)
        edits.env.push_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=" + std::to_string(*d.mps_pinned_bytes >> 20) + "M");
      if (d.mps_thread_percentage)
        edits.env.push_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + std::to_string(*d.mps_thread_percentage));
    }
  }
  if (!shares.empty()) {
    // The claim's memory quota: a limits file the container cannot change
    // (read-only), its ledger beside it (cuda_quota/env.h).
    std::string root = options_.quota.ledger_root;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    const std::string key = ledger_key(ref.uid);
    const std::string dir = root + "/" + key;
    // The same files, made the same way, as the device plugin's Allocate.
    if (auto r = plugin::prepare_quota_files(dir, key, shares); !r) return undo(r.error().message);
    const std::string ledger = dir + "/" TESSERA_LEDGER_FILE_NAME;
    if (options_.quota.preload != sharing::Preload::env)
      if (auto r = plugin::ensure_preload_file(root + "/" TESSERA_PRELOAD_FILE_NAME, TESSERA_CONTAINER_LIBRARY_PATH "\n"); !r)
        return undo(r.error().message);
    for (auto& cd : cdi_devices) {
      bool shared = std::any_of(shares.begin(), shares.end(), [&](const auto& sh) { return sh.uuid == cd.device.physical_uuid; });
      if (!shared) continue;
      cd.edits.env.push_back(std::string(TESSERA_ENV_LIMITS_FILE) + "=" TESSERA_CONTAINER_LIMITS_FILE);
      cd.edits.mounts.push_back({dir + "/" TESSERA_LIMITS_FILE_NAME, TESSERA_CONTAINER_LIMITS_FILE, true});
      cd.edits.mounts.push_back({ledger, TESSERA_CONTAINER_LEDGER_FILE, false});
      cd.edits.mounts.push_back({options_.quota.library_dir, TESSERA_CONTAINER_LIBRARY_DIR, true});
      if (options_.quota.preload != sharing::Preload::env)
        cd.edits.mounts.push_back({root + "/" TESSERA_PRELOAD_FILE_NAME, TESSERA_CONTAINER_PRELOAD_FILE, true});
      if (options_.quota.preload != sharing::Preload::file)
        cd.edits.env.push_back("LD_PRELOAD=" TESSERA_CONTAINER_LIBRARY_PATH);
      // NVIDIA's toolkit's own hook, where the node has it, sets the same limit; it caps every
      // GPU of the container, so only where the claim's devices are all shares.
      if (auto mib = sharing::nvidia_memory_limit_mib(shares); mib && shares.size() == cdi_devices.size())
        cd.edits.env.push_back(std::string(sharing::kNvidiaMemoryLimitEnv) + "=" + std::to_string(*mib));
      // The driver backend: the runtime's hook has the driver hold the
      // container's cgroup to the quota where it can (whole GPUs, R615+).
      if (options_.quota.memory_hook.enabled())
        for (auto& h : sharing::memory_hooks(options_.quota.memory_hook, dir + "/" TESSERA_LIMITS_FILE_NAME))
          cd.edits.hooks.push_back(std::move(h));
      break;  // one set of mounts per container: the first shared device carries them
    }
  }
  auto spec = sharing::claim_cdi_spec(ref.uid, cdi_devices, *files, options_.cdi.names.vendor, options_.cdi_class);
  if (!spec) return undo(spec.error().message);
  if (auto r = plugin::write_cdi_spec(*spec, options_.cdi); !r) return undo(r.error().message);
  for (size_t i = 0; i < steps.size(); ++i)
    rec.devices[i].cdi_ids = {spec->kind + "=" + spec->devices[i].name};
  rec.state = CheckpointClaim::State::prepared;
  if (auto r = save_locked(); !r) return undo(r.error().message);
  changed_locked();
  spdlog::info("prepared {} ({}): {}", label, ref.uid, [&] {
    std::vector<std::string> names;
    for (const auto& d : rec.devices) names.push_back(d.device + (d.memory_bytes ? " (" + std::to_string(*d.memory_bytes >> 20) + " MiB)" : ""));
    return join(names);
  }());
  return from_checkpoint(rec);
}

std::string Driver::unprepare_one(const ClaimRef& ref) {
  if (in_flight_.contains(ref.uid))
    return "claim " + ref.claim_namespace + "/" + ref.name + ": its prepare is still running; try again";
  if (!checkpoint_.claims.contains(ref.uid)) return "";  // never prepared here, or already undone
  if (auto r = release_locked(ref.uid); !r)
    return "claim " + ref.claim_namespace + "/" + ref.name + ": " + r.error().message;
  spdlog::info("unprepared claim {}/{} ({})", ref.claim_namespace, ref.name, ref.uid);
  return "";
}

void Driver::forget_previous_boot_locked(const std::string& before, const std::string& now) {
  start_report_.push_back("the node rebooted since the checkpoint was written (boot " + before + ", now " + now +
                          "): its " + std::to_string(checkpoint_.claims.size()) +
                          " claim(s) are prepared again when the kubelet asks (their MIG instances, CDI specs and "
                          "MPS daemons did not survive it)");
  checkpoint_.timeslices.clear();  // every GPU's interval is its default again
  std::vector<std::pair<std::string, std::string>> claims;  // uid, "ns/name"
  for (auto& [uid, c] : checkpoint_.claims) {
    c.state = CheckpointClaim::State::unpreparing;
    claims.emplace_back(uid, c.claim_namespace + "/" + c.name);
  }
  for (const auto& [uid, name] : claims)
    if (auto r = release_locked(uid); !r)
      start_report_.push_back("claim " + name + " of the previous boot cannot be cleaned up yet (retried at its next "
                              "prepare or unprepare): " + r.error().message);
}

bool Driver::still_prepared_locked(const std::string& uid, const CheckpointClaim& claim, std::string& why) {
  const bool has_cdi = std::any_of(claim.devices.begin(), claim.devices.end(),
                                   [](const CheckpointDevice& d) { return !d.cdi_ids.empty(); });
  const std::string spec = options_.cdi.spec_dir + "/" + spec_file_name(options_, uid);
  struct stat st{};
  if (has_cdi && ::stat(spec.c_str(), &st) != 0) {
    why = "its CDI spec " + spec + " is gone";
    return false;
  }
  bool refreshed = false;
  for (const auto& [name, inst] : checkpoint_.instances) {
    if (std::find(inst.users.begin(), inst.users.end(), uid) == inst.users.end()) continue;
    if (!refreshed) {
      if (auto r = refresh_locked(); !r) return true;  // cannot tell: answered as recorded
      refreshed = true;
    }
    const GpuNow* g = gpu_by_uuid(inst.gpu_uuid);
    const bool present = g && std::any_of(g->present.begin(), g->present.end(), [&](const Present& p) {
      return p.gi_id == inst.gi_id && (inst.uuid.empty() || p.uuid == inst.uuid);
    });
    if (!present) {
      why = "its MIG instance " + name + (inst.uuid.empty() ? "" : " (" + inst.uuid + ")") + " is gone";
      return false;
    }
  }
  return true;
}

Result<void> Driver::release_locked(const std::string& uid) {
  auto it = checkpoint_.claims.find(uid);
  if (it == checkpoint_.claims.end()) return {};
  it->second.state = CheckpointClaim::State::unpreparing;
  if (auto r = save_locked(); !r) return r;
  std::vector<std::string> errors;
  std::vector<std::string> devices;
  for (const auto& d : it->second.devices) devices.push_back(d.device);
  // Instances promised to this claim alone (also ones whose create was cut short).
  for (auto& [name, inst] : checkpoint_.instances)
    if (std::find(inst.users.begin(), inst.users.end(), uid) != inst.users.end() &&
        std::find(devices.begin(), devices.end(), name) == devices.end())
      devices.push_back(name);
  for (const auto& name : devices) {
    auto inst = checkpoint_.instances.find(name);
    if (inst == checkpoint_.instances.end()) continue;
    std::erase(inst->second.users, uid);
    if (!inst->second.users.empty()) continue;
    if (auto r = destroy_instance_locked(name); !r) errors.push_back(r.error().message);
  }
  if (auto r = sync_timeslices_locked(); !r) errors.push_back(r.error().message);  // this claim is unpreparing: not counted
  if (auto r = plugin::remove_cdi_spec(spec_file_name(options_, uid), options_.cdi); !r) errors.push_back(r.error().message);
  std::error_code ec;
  std::string root = options_.quota.ledger_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  std::filesystem::remove_all(root + "/" + ledger_key(uid), ec);
  if (ec) errors.push_back("cannot remove " + root + "/" + ledger_key(uid) + ": " + ec.message());
  changed_locked();
  if (!errors.empty()) {
    if (auto r = save_locked(); !r) errors.push_back(r.error().message);
    return fail(Errc::io, join(errors, "; "));
  }
  const bool had_mps = std::any_of(it->second.devices.begin(), it->second.devices.end(),
                                   [](const CheckpointDevice& d) { return d.mps; });
  checkpoint_.claims.erase(uid);
  if (had_mps) sync_mps_locked();
  return save_locked();
}

void Driver::sync_mps_locked() {
  if (!options_.daemons) return;
  // One daemon per device. It holds the claims' limits as its defaults
  // (set_default_device_pinned_mem_limit, set_default_active_thread_percentage,
  // as NVIDIA's DRA driver sets them), so a client cannot raise them by its
  // own environment. Claims sharing one device's daemon: the largest of
  // their limits (a device with one claim, NVIDIA's layout: exactly its own),
  // each client's variables lowering it to its claim's.
  std::map<std::string, mps::DaemonSpec> wanted;  // by device UUID
  std::map<std::string, bool> unlimited;          // a claim there asks for no thread limit
  // A daemon is multi-user (-M) when any of its claims asks for it: with one claim per daemon
  // (NVIDIA's layout) exactly that claim's wish; clients of one user are served either way.
  for (const auto& [uid, claim] : checkpoint_.claims)
    for (const auto& d : claim.devices) {
      if (!d.mps || d.uuid.empty()) continue;
      auto [it, first] = wanted.try_emplace(d.uuid);
      mps::DaemonSpec& spec = it->second;
      if (first) {
        spec.uuid = d.uuid;
        spec.resource = options_.driver + " " + d.device;
        // Short on purpose: <pipe>/control must fit a unix socket path.
        spec.dirs = {options_.mps_root + "/" + d.uuid + "/pipe", options_.mps_root + "/" + d.uuid + "/log"};
        spec.active_thread_percentage = 0;
      }
      const uint64_t mib = d.mps_pinned_bytes ? std::max<uint64_t>(*d.mps_pinned_bytes >> 20, 1) : 0;
      if (first || (spec.pinned_mem_limit_mib != 0 && (mib == 0 || mib > spec.pinned_mem_limit_mib)))
        spec.pinned_mem_limit_mib = mib;  // 0 (no limit) wins: a claim without one must not be capped
      spec.multi_user = spec.multi_user || d.mps_multi_user;
      if (!d.mps_thread_percentage) unlimited[d.uuid] = true;
      else spec.active_thread_percentage = std::max(spec.active_thread_percentage, *d.mps_thread_percentage);
    }
  std::vector<mps::DaemonSpec> specs;
  for (auto& [uuid, spec] : wanted) {
    if (unlimited[uuid] || spec.active_thread_percentage == 0) spec.active_thread_percentage = 100;
    specs.push_back(std::move(spec));
  }
  options_.daemons->want(std::move(specs));
}

Result<void> Driver::sync_timeslices_locked() {
  std::map<std::string, uint32_t> wanted;  // by GPU UUID
  for (const auto& [uid, claim] : checkpoint_.claims) {
    if (claim.state == CheckpointClaim::State::unpreparing) continue;
    for (const auto& d : claim.devices)
      if (d.timeslice) wanted[d.gpu_uuid] = *d.timeslice;
  }
  if (wanted.empty() && checkpoint_.timeslices.empty()) return {};  // the common case: nothing to run
  // NVML's directory on the tool's library path: nvidia-smi links libnvidia-ml.so.1,
  // which a driver root mounted into a container keeps off the usual path.
  std::vector<std::string> env;
  const std::string& nvml = session_.library().path();
  if (const auto slash = nvml.rfind('/'); slash != std::string::npos) {
    env = environment_with({"LD_LIBRARY_PATH"}, {path_with_first("LD_LIBRARY_PATH", nvml.substr(0, slash))});
  } else {
    env = environment_with({}, {});
  }
  auto set = [&](const std::string& uuid, uint32_t level) -> Result<void> {
    const std::vector<std::string> args = {"compute-policy", "-i", uuid, "--set-timeslice", std::to_string(level)};
    const std::string what = options_.nvidia_smi + " " + join(args, " ");
    auto done = run_program(options_.nvidia_smi, args, env, options_.nvidia_smi_timeout);
    if (!done) return fail(done.error().code, "cannot set the time-slice interval of GPU " + uuid + ": " + done.error().message);
    if (done->status != 0)
      return fail(Errc::io, "cannot set the time-slice interval of GPU " + uuid + ": `" + what + "` exited with status " +
                                std::to_string(done->status) + ": " + excerpt(done->output, 200));
    spdlog::info("GPU {}: time-slice interval {} (`{}`)", uuid, kTimeSliceIntervals[level], what);
    return {};
  };
  std::vector<std::string> errors;
  bool changed = false;
  for (const auto& [uuid, level] : wanted) {
    if (auto have = checkpoint_.timeslices.find(uuid); have != checkpoint_.timeslices.end() && have->second == level)
      continue;
    checkpoint_.timeslices[uuid] = level;  // first the record, so that a crash after the change still puts it back
    changed = true;
    if (auto r = save_locked(); !r) return r;
    if (auto r = set(uuid, level); !r) errors.push_back(r.error().message);
  }
  for (auto it = checkpoint_.timeslices.begin(); it != checkpoint_.timeslices.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    if (it->second != 0)
      if (auto r = set(it->first, 0); !r) {
        errors.push_back(r.error().message);
        ++it;
        continue;
      }
    it = checkpoint_.timeslices.erase(it);
    changed = true;
  }
  if (changed)
    if (auto r = save_locked(); !r) errors.push_back(r.error().message);
  if (!errors.empty()) return fail(Errc::io, join(errors, "; "));
  return {};
}

Result<void> Driver::destroy_instance_locked(const std::string& name) {
  auto& inst = checkpoint_.instances.at(name);
  inst.state = CheckpointInstance::State::destroying;
  if (auto r = save_locked(); !r) return r;
  if (auto r = refresh_locked(); !r) return r;
  const GpuNow* g = gpu_by_uuid(inst.gpu_uuid);
  if (g && g->gpu.model) {
    auto pi = profile_index(*g->gpu.model, inst.profile);
    for (const auto& p : g->present) {
      if (!pi || p.placed != PlacedInstance{*pi, inst.start}) continue;
      // Destroyed by UUID: an instance someone else made at the same place
      // after ours went is theirs, and stays.
      if (!inst.uuid.empty() && !p.uuid.empty() && p.uuid != inst.uuid) {
        spdlog::warn("{}: the instance at its place is {}, not the {} tessera cut (someone destroyed that one and "
                     "made another): left alone", name, p.uuid, inst.uuid);
        continue;
      }
      mig::Operation cis{mig::OpKind::destroy_compute_instances, g->gpu.index, false, *pi, inst.start, p.gi_id, p.uuid};
      if (auto r = reconciler::run_operation(session_, *g->gpu.model, cis); !r)
        return fail(r.error().code, "cannot destroy the compute instances of " + name + ": " + r.error().message);
      mig::Operation gi{mig::OpKind::destroy_gpu_instance, g->gpu.index, false, *pi, inst.start, p.gi_id, p.uuid};
      if (auto r = reconciler::run_operation(session_, *g->gpu.model, gi); !r)
        return fail(r.error().code, "cannot destroy " + name + ": " + r.error().message);
    }
  }
  checkpoint_.instances.erase(name);
  ++counts_.instances_destroyed;
  if (auto r = save_locked(); !r) return r;
  return refresh_locked();
}

}  // namespace tessera::dra
