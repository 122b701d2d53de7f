#include "sharing/allocate.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/text.hpp"
#include "cuda_quota/driver_limits.hpp"
#include "cuda_quota/env.h"

namespace tessera::sharing {
namespace {

std::string sanitize_for_path(const std::string& resource) {
  std::string out = resource;
  std::replace(out.begin(), out.end(), '/', '_');
  return out;
}

size_t nvlink_score(const Inventory& inv, const std::vector<uint32_t>& gpus) {
  size_t score = 0;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j)
      for (const auto& g : inv.gpus)
        if (g.index == gpus[i] && std::count(g.nvlink_peers.begin(), g.nvlink_peers.end(), gpus[j])) ++score;
  return score;
}

// Whole GPUs: pick `size` ids maximising NVLink pairs among them.
std::vector<std::string> best_connected(const Resource& r, const Inventory& inv, std::vector<std::string> candidates,
                                        const std::vector<std::string>& must, size_t size) {
  auto gpu_of = [&](const std::string& id) { return r.find(id)->gpu_index; };
  std::vector<std::string> chosen = must;
  std::erase_if(candidates, [&](const std::string& c) { return std::count(must.begin(), must.end(), c) > 0; });
  std::sort(candidates.begin(), candidates.end(), [&](const auto& a, const auto& b) { return gpu_of(a) < gpu_of(b); });
  size_t need = size - chosen.size();
  auto indices = [&](const std::vector<std::string>& ids) {
    std::vector<uint32_t> out;
    for (const auto& id : ids) out.push_back(gpu_of(id));
    return out;
  };
  if (candidates.size() <= 16) {
    // Exhaustive over combinations (at most C(16,8) = 12870).
    std::vector<bool> pick(candidates.size(), false);
    std::fill(pick.begin(), pick.begin() + static_cast<long>(need), true);
    std::vector<std::string> best;
    size_t best_score = 0;
    bool first = true;
    do {
      std::vector<std::string> set = chosen;
      for (size_t i = 0; i < candidates.size(); ++i)
        if (pick[i]) set.push_back(candidates[i]);
      size_t s = nvlink_score(inv, indices(set));
      if (first || s > best_score) {
        best = set;
        best_score = s;
        first = false;
      }
    } while (std::prev_permutation(pick.begin(), pick.end()));
    return best;
  }
  while (chosen.size() < size) {
    size_t best_i = 0, best_s = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      auto set = indices(chosen);
      set.push_back(gpu_of(candidates[i]));
      size_t s = nvlink_score(inv, set);
      if (i == 0 || s > best_s) { best_i = i; best_s = s; }
    }
    chosen.push_back(candidates[best_i]);
    candidates.erase(candidates.begin() + static_cast<long>(best_i));
  }
  return chosen;
}

}  // namespace

std::string ledger_key(const std::string& resource, std::span<const std::string> ids) {
  std::vector<std::string> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64: offset basis
  auto mix = [&hash](const std::string& bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 0x100000001b3ull;  // FNV prime
    }
  };
  mix(resource);
  for (const auto& id : sorted) mix("\n" + id);
  std::string prefix = resource.substr(0, 48);
  for (auto& c : prefix)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      c = '_';
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return prefix + "-" + hex;
}

AllocateSettings settings_from(const config::DevicePluginConfig& config) {
  AllocateSettings s;
  s.id_strategy = config.plugin.device_id_strategy;
  s.list_strategy = config.plugin.device_list_strategy;
  s.mps_root = config.mps_root;
  s.cdi.annotation_prefix = config.plugin.cdi_annotation_prefix;
  s.pass_device_specs = config.plugin.pass_device_specs;
  return s;
}

MpsDaemon mps_daemon(const std::string& mps_root, const Resource& resource, const Device& device) {
  MpsDaemon d;
  d.resource = resource.name;
  d.uuid = device.physical_uuid;
  // Short on purpose: the daemon's socket, <pipe>/control, must fit a unix
  // socket path (108 bytes). A device has one daemon whatever its resource.
  const std::string base = mps_root + "/" + device.physical_uuid;
  d.pipe_dir = base + "/pipe";
  d.log_dir = base + "/log";
  d.replicas = device.replicas;
  d.client_bytes = device.memory_bytes;
  d.active_thread_percentage = 100 / std::max<uint32_t>(device.replicas, 1);
  return d;
}

std::vector<MpsDaemon> mps_daemons(const std::string& mps_root, std::span<const Resource> resources) {
  std::vector<MpsDaemon> out;
  std::set<std::string> seen;
  for (const auto& r : resources) {
    for (const auto& d : r.devices)  // only the devices an MPS entry replicates, not those served whole beside them
      if (d.sharing == SharingMode::mps && seen.insert(d.physical_uuid).second) out.push_back(mps_daemon(mps_root, r, d));
  }
  return out;
}

std::optional<uint64_t> nvidia_memory_limit_mib(std::span<const QuotaDevice> devices) {
  std::optional<uint64_t> mib;
  for (const auto& d : devices) {
    const uint64_t whole = quota::driver_limit_bytes(d.quota) >> 20;  // as tessera-memory-hook floors it
    if (d.uuid.starts_with("MIG-") || (mib && *mib != whole)) return std::nullopt;
    mib = whole;
  }
  if (mib == 0u) return std::nullopt;
  return mib;
}

Result<ContainerAllocation> allocate(const Resource& resource, std::span<const std::string> ids,
                                     const AllocateSettings& settings, const DriverFiles* driver) {
  if (ids.empty()) return fail(Errc::invalid_argument, resource.name + ": the request names no device");
  std::vector<const Device*> devices;
  std::set<std::string> seen;
  for (const auto& id : ids) {
    const Device* d = resource.find(id);
    if (!d) return fail(Errc::not_found, resource.name + ": unknown device id '" + id + "'");
    if (!seen.insert(id).second) return fail(Errc::invalid_argument, resource.name + ": device id '" + id + "' requested twice");
    devices.push_back(d);
  }
  // A whole GPU served beside the replicas of a sharing entry's `devices` is not shared.
  const bool shared = std::ranges::any_of(devices, [](const Device* d) { return d->sharing != SharingMode::none; });
  const bool mps = std::ranges::any_of(devices, [](const Device* d) { return d->sharing == SharingMode::mps; });
  if (resource.sharing != SharingMode::none && resource.fail_requests_greater_than_one && ids.size() > 1)
    // NVIDIA's wording (internal/plugin/server.go), so existing alerts keep matching.
    return fail(Errc::invalid_argument, resource.name + ": maximum request size for shared resources is 1 (asked for " +
                                            std::to_string(ids.size()) + ")");

  // Replicas of one physical device collapse into it; quotas add up.
  std::vector<std::string> visible;
  std::vector<std::string> uuids;  // the GPU or MIG UUID of each visible device
  std::vector<uint64_t> quota;
  std::vector<uint64_t> memory;  // the physical device's: its replicas' shares together
  std::vector<uint32_t> active_percent;
  for (const auto* d : devices) {
    std::string phys = settings.id_strategy == config::DeviceIdStrategy::uuid ? d->physical_uuid : d->index_id;
    auto it = std::find(visible.begin(), visible.end(), phys);
    if (it == visible.end()) {
      visible.push_back(phys);
      uuids.push_back(d->physical_uuid);
      quota.push_back(d->memory_bytes);
      memory.push_back(d->memory_bytes * std::max<uint32_t>(d->replicas, 1));
      active_percent.push_back(100 / d->replicas);
    } else {
      auto k = static_cast<size_t>(it - visible.begin());
      quota[k] += d->memory_bytes;
      active_percent[k] += 100 / d->replicas;
    }
  }

  ContainerAllocation out;
  for (auto strategy : settings.list_strategy) {
    switch (strategy) {
      case config::DeviceListStrategy::envvar:
        out.envs["NVIDIA_VISIBLE_DEVICES"] = join(visible, ",");
        break;
      case config::DeviceListStrategy::volume_mounts:
        out.envs["NVIDIA_VISIBLE_DEVICES"] = "/var/run/nvidia-container-devices";
        for (const auto& v : visible) out.mounts.push_back({"/dev/null", "/var/run/nvidia-container-devices/" + v, true});
        break;
      case config::DeviceListStrategy::cdi_annotations: {
        // One key per resource, so that a container holding two resources
        // gets two annotations (CDI pkg/cdi AnnotationKey: "<plugin>_<id>").
        std::vector<std::string> names;
        for (const auto* d : devices) names.push_back(cdi_name(*d, settings.id_strategy, settings.cdi));
        out.annotations[settings.cdi.annotation_prefix + "nvidia-device-plugin_" + sanitize_for_path(resource.name)] =
            join(names, ",");
        break;
      }
      case config::DeviceListStrategy::cdi_cri:
        for (const auto* d : devices) out.cdi_devices.push_back(cdi_name(*d, settings.id_strategy, settings.cdi));
        break;
    }
  }
  if (settings.pass_device_specs) {
    if (!driver)
      return fail(Errc::internal, resource.name + ": passDeviceSpecs is on, but the node's device nodes are not known");
    std::set<std::string> paths;
    auto add = [&](const DeviceNode& n) {
      if (paths.insert(n.path).second) out.devices.push_back(n);
    };
    for (const auto& n : control_nodes(*driver)) add(n);
    for (const auto* d : devices) {
      auto nodes = device_nodes(*d, *driver);
      if (!nodes) return fail(nodes.error().code, resource.name + ": " + nodes.error().message);
      for (const auto& n : *nodes) add(n);
    }
  }
  if (shared) {
    std::vector<QuotaDevice> held;
    for (size_t k = 0; k < visible.size(); ++k) {
      out.envs[TESSERA_ENV_MEMORY_LIMIT_PREFIX + std::to_string(k)] = std::to_string(quota[k]);
      held.push_back({uuids[k], quota[k], memory[k], 0});
    }
    if (auto mib = nvidia_memory_limit_mib(held)) out.envs[kNvidiaMemoryLimitEnv] = std::to_string(*mib);
  }
  if (mps) {
    // A client talks to one control daemon, and there is one per device.
    if (visible.size() > 1)
      return fail(Errc::invalid_argument, resource.name + ": an MPS client connects to one control daemon, and each " +
                                              "GPU or MIG device has its own: asked for shares of " +
                                              std::to_string(visible.size()) + " devices (" + join(uuids, ", ") + ")");
    std::string dir = sanitize_for_path(resource.name);
    const MpsDaemon daemon = mps_daemon(settings.mps_root, resource, *devices.front());
    out.envs["CUDA_MPS_PIPE_DIRECTORY"] = "/mps/" + dir + "/pipe";
    // Read-only: a client connects to the daemon's socket there, but no
    // process of the container can bind a daemon of its own in its place.
    out.mounts.push_back({daemon.pipe_dir, "/mps/" + dir + "/pipe", true});
    out.mounts.push_back({settings.mps_root + "/shm", "/dev/shm", false});
    // Per-client limits (CUDA MPS documentation: "<device>=<limit>" by ordinal
    // among the client's visible devices; active thread percentage as an integer).
    std::vector<std::string> limits;
    uint32_t percent = 100;
    for (size_t k = 0; k < visible.size(); ++k) {
      limits.push_back(std::to_string(k) + "=" + std::to_string(quota[k] >> 20) + "M");
      percent = std::min(percent, std::max<uint32_t>(active_percent[k], 1));
    }
    out.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = join(limits, ",");
    out.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(percent);
  }
  // The quota library: loaded by ld.so, told which CUDA device is device k
  // and where the container's ledger lives (src/cuda_quota/env.h).
  if (shared && settings.quota.inject) {
    for (size_t k = 0; k < visible.size(); ++k) out.envs[TESSERA_ENV_DEVICE_UUID_PREFIX + std::to_string(k)] = uuids[k];
    std::string key = ledger_key(resource.name, ids);
    out.envs[TESSERA_ENV_LIMITS_FILE] = TESSERA_CONTAINER_LIMITS_FILE;
    out.envs[TESSERA_ENV_LEDGER_DIR] = TESSERA_CONTAINER_LEDGER_DIR;
    out.envs[TESSERA_ENV_LEDGER_KEY] = key;
    if (settings.quota.preload != Preload::file) out.envs["LD_PRELOAD"] = TESSERA_CONTAINER_LIBRARY_PATH;
    std::string root = settings.quota.ledger_root;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (root == "/") root.clear();
    out.ledger_dir = root + "/" + key;
    out.ledger_key = key;
    for (size_t k = 0; k < visible.size(); ++k)
      out.quota_devices.push_back({uuids[k], quota[k], memory[k], settings.quota.context_bytes});
    // Single files, never the directory: a process of the container can
    // charge the ledger but not put another file in its place, and cannot
    // write the limits at all.
    out.mounts.push_back({settings.quota.library_dir, TESSERA_CONTAINER_LIBRARY_DIR, true});
    out.mounts.push_back({out.ledger_dir + "/" TESSERA_LEDGER_FILE_NAME, TESSERA_CONTAINER_LEDGER_FILE, false});
    out.mounts.push_back({out.ledger_dir + "/" TESSERA_LIMITS_FILE_NAME, TESSERA_CONTAINER_LIMITS_FILE, true});
    if (settings.quota.preload != Preload::env) {
      out.preload_file = root + "/" TESSERA_PRELOAD_FILE_NAME;
      out.mounts.push_back({out.preload_file, TESSERA_CONTAINER_PRELOAD_FILE, true});
    }
    // The driver backend rides on CDI: the runtime runs the hook only for a
    // CDI device, so only CDI strategies get one.
    const auto& strategies = settings.list_strategy;
    const bool cri = std::ranges::count(strategies, config::DeviceListStrategy::cdi_cri) > 0;
    const bool annotations = std::ranges::count(strategies, config::DeviceListStrategy::cdi_annotations) > 0;
    if (settings.quota.memory_hook.enabled() && (cri || annotations)) {
      out.quota_spec = quota_cdi_spec(key, out.ledger_dir + "/" TESSERA_LIMITS_FILE_NAME, settings.quota.memory_hook);
      if (cri) out.cdi_devices.push_back(quota_cdi_name(key));
      else
        out.annotations[settings.cdi.annotation_prefix + "tessera-quota_" + sanitize_for_path(resource.name)] =
            quota_cdi_name(key);
    }
  }
  return out;
}

Result<std::vector<std::string>> preferred_allocation(const Resource& resource, const Inventory& inventory,
                                                      std::span<const std::string> available,
                                                      std::span<const std::string> must_include, size_t size,
                                                      SharedPolicy policy) {
  for (const auto& id : available)
    if (!resource.find(id)) return fail(Errc::not_found, resource.name + ": unknown device id '" + id + "'");
  for (const auto& id : must_include)
    if (std::find(available.begin(), available.end(), id) == available.end())
      return fail(Errc::invalid_argument, resource.name + ": must-include device '" + id + "' is not available");
  if (size < must_include.size() || size > available.size())
    return fail(Errc::invalid_argument, resource.name + ": cannot choose " + std::to_string(size) + " of " +
                                            std::to_string(available.size()) + " available devices (" +
                                            std::to_string(must_include.size()) + " required)");
  std::vector<std::string> must(must_include.begin(), must_include.end());
  std::vector<std::string> avail(available.begin(), available.end());
  if (resource.sharing == SharingMode::none) return best_connected(resource, inventory, avail, must, size);

  // Replicas: how loaded is each physical device already?
  std::map<std::string, int> allocated;
  for (const auto& d : resource.devices) allocated[d.physical_uuid] += 1;
  for (const auto& id : avail) allocated[resource.find(id)->physical_uuid] -= 1;
  std::vector<std::string> chosen = must;
  for (const auto& id : must) allocated[resource.find(id)->physical_uuid] += 1;
  std::erase_if(avail, [&](const std::string& id) { return std::count(must.begin(), must.end(), id) > 0; });
  while (chosen.size() < size) {
    auto better = [&](const std::string& a, const std::string& b) {
      int la = allocated[resource.find(a)->physical_uuid], lb = allocated[resource.find(b)->physical_uuid];
      if (la != lb) return policy == SharedPolicy::distributed ? la < lb : la > lb;
      return a < b;
    };
    auto it = std::min_element(avail.begin(), avail.end(), better);
    allocated[resource.find(*it)->physical_uuid] += 1;
    chosen.push_back(*it);
    avail.erase(it);
  }
  return chosen;
}

}  // namespace tessera::sharing
