#include "mig_engine.hpp"

#include <algorithm>
#include <map>

namespace tessera::sim {

using namespace nvml::abi;

namespace {

int profile_index(const hw::Gpu& model, uint32_t profile_id) {
  for (size_t i = 0; i < model.profiles.size(); ++i)
    if (model.profiles[i].profile_id == profile_id) return static_cast<int>(i);
  return -1;
}

template <class T>
uint32_t smallest_free_id(const std::vector<T>& items, uint32_t first) {
  for (uint32_t id = first;; ++id)
    if (std::none_of(items.begin(), items.end(), [&](const T& x) { return x.id == id; })) return id;
}

bool overlaps(uint32_t a_start, uint32_t a_size, uint32_t b_start, uint32_t b_size) {
  return a_start < b_start + b_size && b_start < a_start + a_size;
}

const hw::CiProfile* compute_profile(const hw::Gpu& model, const SimGpuInstance& gi, uint32_t profile_id) {
  const auto* gp = model.profile_by_id(gi.profile_id);
  if (!gp) return nullptr;
  for (const auto& cp : gp->compute_profiles)
    if (cp.profile_id == profile_id) return &cp;
  return nullptr;
}

// Where a compute instance of `cp` fits in `gi` now, if anywhere.
std::optional<Placement> free_compute_placement(const SimGpuInstance& gi, const hw::CiProfile& cp,
                                                uint32_t gi_slices) {
  uint32_t used = 0, same = 0;
  for (const auto& ci : gi.compute_instances) {
    used += ci.size;
    if (ci.profile_id == cp.profile_id) ++same;
  }
  if (same >= cp.max_count || used + cp.slices > gi_slices) return std::nullopt;
  for (const auto& p : cp.placements) {
    bool taken =
        std::any_of(gi.compute_instances.begin(), gi.compute_instances.end(),
                    [&](const SimComputeInstance& ci) { return overlaps(p.start, p.size, ci.start, ci.size); });
    if (!taken) return p;
  }
  return std::nullopt;
}

// The simulator's own reading of what a GPU holds, slice by slice: which
// memory slices are taken, how many compute slices, how many instances of
// each profile. Deliberately written apart from tessera's layout code
// (core/mig_layout), so a bug there cannot hide behind the simulator.
class SliceMap {
 public:
  SliceMap(const hw::Gpu& model, const SimGpu& gpu) : model_(model), taken_(model.memory_slices, false) {
    for (const auto& gi : gpu.gpu_instances) {
      const auto* p = model.profile_by_id(gi.profile_id);
      if (!p) continue;
      take(*p, gi.start);
    }
  }

  // Whether a new instance of `p` at `start` is allowed now. The hardware's
  // rules: a start the profile may take, free memory slices, enough compute
  // slices left, the profile's and the GPU's instance limits, and the GPU's
  // optical-flow engine, held whole by the instance of a media-engine
  // profile (MIG User Guide, "Supported MIG Profiles": one OFA per GPU, so an
  // A30's 1g.6gb+me and 2g.12gb+me never run together).
  bool fits(const hw::GiProfile& p, uint32_t start) const {
    if (ofas_used_ + p.engines.ofas > whole_gpu_ofas()) return false;
    bool allowed = std::any_of(p.placements.begin(), p.placements.end(),
                               [&](const Placement& pl) { return pl.start == start; });
    if (!allowed || start + p.memory_slices > taken_.size()) return false;
    for (uint32_t s = start; s < start + p.memory_slices; ++s)
      if (taken_[s]) return false;
    if (compute_used_ + p.slices > model_.compute_slices) return false;
    if (instances_ >= model_.max_instances) return false;
    auto it = count_.find(p.profile_id);
    return it == count_.end() || it->second < p.max_count;
  }

  // The first start, in the profile's placement order, that fits now.
  std::optional<uint32_t> first_fit(const hw::GiProfile& p) const {
    for (const auto& pl : p.placements)
      if (fits(p, pl.start)) return pl.start;
    return std::nullopt;
  }

  void take(const hw::GiProfile& p, uint32_t start) {
    for (uint32_t s = start; s < start + p.memory_slices && s < taken_.size(); ++s) taken_[s] = true;
    compute_used_ += p.slices;
    ++instances_;
    ++count_[p.profile_id];
    ofas_used_ += p.engines.ofas;
  }

 private:
  // The GPU's optical-flow engines: what the instance spanning all of its
  // compute slices holds (the whole GPU has them all).
  uint32_t whole_gpu_ofas() const {
    uint32_t total = 0;
    for (const auto& q : model_.profiles)
      if (q.slices == model_.compute_slices) total = std::max(total, q.engines.ofas);
    return total;
  }

  const hw::Gpu& model_;
  std::vector<bool> taken_;
  uint32_t ofas_used_ = 0;
  uint32_t compute_used_ = 0;
  uint32_t instances_ = 0;
  std::map<uint32_t, uint32_t> count_;
};

}  // namespace

SimGpuInstance* find_gpu_instance(Node& node, uint32_t gpu, uint64_t uid) {
  if (gpu >= node.gpus.size()) return nullptr;
  for (auto& gi : node.gpus[gpu].gpu_instances)
    if (gi.uid == uid) return &gi;
  return nullptr;
}

const SimGpuInstance* find_gpu_instance(const Node& node, uint32_t gpu, uint64_t uid) {
  return find_gpu_instance(const_cast<Node&>(node), gpu, uid);
}

ComputeRef find_compute_instance(const Node& node, uint32_t gpu, uint64_t uid) {
  if (gpu >= node.gpus.size()) return {};
  for (const auto& gi : node.gpus[gpu].gpu_instances)
    for (const auto& ci : gi.compute_instances)
      if (ci.uid == uid) return {&gi, &ci};
  return {};
}

Return create_gpu_instance(Node& node, uint32_t gpu, uint32_t profile_id, std::optional<Placement> placement,
                           uint64_t& uid) {
  if (gpu >= node.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  auto& g = node.gpus[gpu];
  if (!g.mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const auto& model = model_of(g);
  int index = profile_index(model, profile_id);
  if (index < 0) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& profile = model.profiles[static_cast<size_t>(index)];
  SliceMap slices(model, g);
  if (placement) {
    // A placement the profile can never take is the caller's mistake; one it
    // could take but that is occupied (or a full GPU) is a resource shortage.
    bool possible = std::any_of(profile.placements.begin(), profile.placements.end(),
                                [&](const Placement& pl) { return pl.start == placement->start; });
    if (placement->size != profile.memory_slices || !possible) return NVML_ERROR_INVALID_ARGUMENT;
    if (!slices.fits(profile, placement->start)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  } else {
    auto start = slices.first_fit(profile);
    if (!start) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    placement = Placement{*start, profile.memory_slices};
  }
  SimGpuInstance gi;
  gi.uid = node.next_uid++;
  gi.id = smallest_free_id(g.gpu_instances, 1);
  gi.profile_id = profile_id;
  gi.start = placement->start;
  gi.size = profile.memory_slices;
  uid = gi.uid;
  push_event(node, gpu, nvmlEventMigConfigChange, 0, gi.id);
  g.gpu_instances.push_back(std::move(gi));
  return NVML_SUCCESS;
}

Return destroy_gpu_instance(Node& node, uint32_t gpu, uint64_t uid) {
  auto* gi = find_gpu_instance(node, gpu, uid);
  if (!gi) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gi->compute_instances.empty() || has_processes(node, gpu, gi->id)) return NVML_ERROR_IN_USE;
  auto& list = node.gpus[gpu].gpu_instances;
  uint32_t id = gi->id;
  list.erase(std::remove_if(list.begin(), list.end(), [&](const SimGpuInstance& x) { return x.uid == uid; }),
             list.end());
  push_event(node, gpu, nvmlEventMigConfigChange, 0, id);
  return NVML_SUCCESS;
}

uint32_t remaining_capacity(const Node& node, uint32_t gpu, uint32_t profile_id) {
  if (gpu >= node.gpus.size() || !node.gpus[gpu].mig_current) return 0;
  const auto& model = model_of(node.gpus[gpu]);
  int index = profile_index(model, profile_id);
  if (index < 0) return 0;
  // How many more the driver would create one after another, each at its first free start.
  const auto& profile = model.profiles[static_cast<size_t>(index)];
  SliceMap slices(model, node.gpus[gpu]);
  uint32_t n = 0;
  while (auto start = slices.first_fit(profile)) {
    slices.take(profile, *start);
    ++n;
  }
  return n;
}

Return create_compute_instance(Node& node, uint32_t gpu, uint64_t gi_uid, uint32_t profile_id, uint64_t& uid) {
  auto* gi = find_gpu_instance(node, gpu, gi_uid);
  if (!gi) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& model = model_of(node.gpus[gpu]);
  const auto* cp = compute_profile(model, *gi, profile_id);
  if (!cp) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* gp = model.profile_by_id(gi->profile_id);
  auto where = free_compute_placement(*gi, *cp, gp->slices);
  if (!where) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  SimComputeInstance ci;
  ci.uid = node.next_uid++;
  ci.id = smallest_free_id(gi->compute_instances, 0);
  ci.profile_id = profile_id;
  ci.start = where->start;
  ci.size = cp->slices;
  ci.uuid = next_mig_uuid(node);
  uid = ci.uid;
  push_event(node, gpu, nvmlEventMigConfigChange, 0, gi->id, ci.id);
  gi->compute_instances.push_back(std::move(ci));
  return NVML_SUCCESS;
}

Return destroy_compute_instance(Node& node, uint32_t gpu, uint64_t ci_uid) {
  auto ref = find_compute_instance(node, gpu, ci_uid);
  if (!ref.ci) return NVML_ERROR_INVALID_ARGUMENT;
  if (has_processes(node, gpu, ref.gi->id, ref.ci->id)) return NVML_ERROR_IN_USE;
  auto* gi = find_gpu_instance(node, gpu, ref.gi->uid);
  uint32_t gi_id = gi->id, ci_id = ref.ci->id;
  auto& list = gi->compute_instances;
  list.erase(std::remove_if(list.begin(), list.end(), [&](const SimComputeInstance& x) { return x.uid == ci_uid; }),
             list.end());
  push_event(node, gpu, nvmlEventMigConfigChange, 0, gi_id, ci_id);
  return NVML_SUCCESS;
}

uint32_t remaining_compute_capacity(const Node& node, uint32_t gpu, uint64_t gi_uid, uint32_t profile_id) {
  const auto* gi = find_gpu_instance(node, gpu, gi_uid);
  if (!gi) return 0;
  const auto& model = model_of(node.gpus[gpu]);
  const auto* cp = compute_profile(model, *gi, profile_id);
  if (!cp) return 0;
  uint32_t slices = model.profile_by_id(gi->profile_id)->slices;
  SimGpuInstance trial = *gi;
  uint32_t n = 0;
  while (auto where = free_compute_placement(trial, *cp, slices)) {
    trial.compute_instances.push_back(SimComputeInstance{0, 1000 + n, cp->profile_id, where->start, cp->slices, ""});
    ++n;
  }
  return n;
}

Return set_mig_mode(Node& node, uint32_t gpu, bool enable, Return& activation) {
  if (gpu >= node.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  auto& g = node.gpus[gpu];
  if (!enable && !g.gpu_instances.empty()) return NVML_ERROR_IN_USE;
  g.mig_pending = enable;
  if (has_processes(node, gpu)) {
    activation = NVML_ERROR_IN_USE;  // stays pending until the GPU is idle and reset
    return NVML_SUCCESS;
  }
  g.mig_current = enable;
  activation = NVML_SUCCESS;
  return NVML_SUCCESS;
}

Return reset_gpu(Node& node, uint32_t gpu) {
  if (gpu >= node.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (has_processes(node, gpu)) return NVML_ERROR_IN_USE;
  auto& g = node.gpus[gpu];
  if (!g.mig_pending && !g.gpu_instances.empty()) return NVML_ERROR_IN_USE;
  g.lost = false;  // a reset brings a GPU that fell off the bus back
  g.mig_current = g.mig_pending;
  return NVML_SUCCESS;
}

void reboot_node(Node& node) {
  node.processes.clear();
  for (auto& g : node.gpus) {
    g.gpu_instances.clear();
    g.memory_limits.clear();
    g.compute_timeslice = 0;
    g.ecc_corrected = g.ecc_uncorrected = 0;
    g.lost = false;
    g.mig_current = g.mig_pending = false;
  }
}

bool has_processes(const Node& node, uint32_t gpu, int64_t gi, int64_t ci) {
  return std::any_of(node.processes.begin(), node.processes.end(), [&](const SimProcess& p) {
    return p.gpu == gpu && (gi < 0 || p.gpu_instance == gi) && (ci < 0 || p.compute_instance == ci);
  });
}

}  // namespace tessera::sim
