#include "node.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace tessera::sim {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Activity, sm_util, sm_occupancy, dram_bw_util, graphics_util,
                                                tensor_util)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SimComputeInstance, uid, id, profile_id, start, size, uuid)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SimGpuInstance, uid, id, profile_id, start, size, activity,
                                                compute_instances)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SimMemoryLimit, name_space, soft, hard)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SimGpu, model, uuid, bus, minor, nvlink_peers, mig_current, mig_pending,
                                                gpu_util, memory_util, activity, gpu_instances, lost,
                                                reserved_mib, temperature_c, power_mw, sm_clock_mhz, mem_clock_mhz,
                                                ecc_corrected, ecc_uncorrected, memory_limits,
                                                compute_timeslice)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SimProcess, pid, gpu, gpu_instance, compute_instance, memory_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SimEvent, seq, gpu, type, data, gpu_instance, compute_instance)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SimFault, function, nth, times, calls, error, crash)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Node, seed, driver_version, cuda_version, gpus, processes, events,
                                                next_event_seq, next_uid, mig_uuids_issued, faults,
                                                privileged)

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// PCI buses of the GPUs of an 8-GPU HGX board, in index order (as nvidia-smi
// lists them on a DGX A100); more GPUs continue from 0xC0.
constexpr uint32_t kBuses[] = {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD};

}  // namespace

std::string make_uuid(const char* prefix, uint64_t seed, uint64_t salt, uint64_t index) {
  uint64_t state = seed * 0x100000001B3ULL ^ (salt << 32) ^ index;
  uint64_t a = splitmix64(state), b = splitmix64(state);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08x-%04x-%04x-%04x-%012llx", prefix, static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xFFFF), static_cast<unsigned>(a & 0xFFFF),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
  return buf;
}

std::string next_mig_uuid(Node& node) { return make_uuid("MIG", node.seed, 0x4D49, ++node.mig_uuids_issued); }

Result<Node> make_node(const NodeSpec& spec) {
  const hw::Gpu* model = hw::find_gpu(spec.gpu);
  if (!model) {
    std::string hint;
    for (const auto& n : hw::nearest_gpu_names(spec.gpu)) hint += (hint.empty() ? "" : ", ") + n;
    return fail(Errc::not_found, "unknown GPU model '" + spec.gpu + "' (nearest: " + hint + ")");
  }
  if (spec.count < 1 || spec.count > 16)
    return fail(Errc::invalid_argument, "GPU count " + std::to_string(spec.count) + " is outside 1..16");
  Node node;
  node.seed = spec.seed;
  node.privileged = spec.privileged;
  for (uint32_t i = 0; i < spec.count; ++i) {
    SimGpu g;
    g.model = model->name;
    g.uuid = make_uuid("GPU", spec.seed, 0x4750, i);
    g.bus = i < std::size(kBuses) ? kBuses[i] : 0xC0 + i;
    g.minor = i;
    g.mig_current = g.mig_pending = spec.mig;
    // About 0.6% of the memory, at least 256 MiB: 491 MiB on an 80 GB card,
    // in the range drivers report (hundreds of MiB).
    g.reserved_mib = std::max<uint64_t>(256, model->memory_mib * 6 / 1000);
    if (spec.nvlink_all)
      for (uint32_t j = 0; j < spec.count; ++j)
        if (j != i) g.nvlink_peers.push_back(j);
    node.gpus.push_back(std::move(g));
  }
  return node;
}

const hw::Gpu& model_of(const SimGpu& gpu) {
  // Node files are only made by make_node, so the model exists; a file edited
  // by hand to name another falls back to the first model rather than crash.
  const hw::Gpu* m = hw::find_gpu(gpu.model);
  return m ? *m : hw::gpus().front();
}

std::string to_json_text(const Node& node) { return nlohmann::json(node).dump(); }

Result<Node> node_from_json_text(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail(Errc::parse, "the node file is not valid JSON");
  try {
    return j.get<Node>();
  } catch (const nlohmann::json::exception& e) {
    return fail(Errc::parse, std::string("the node file does not describe a node: ") + e.what());
  }
}

void push_event(Node& node, uint32_t gpu, uint64_t type, uint64_t data, int64_t gi, int64_t ci) {
  node.events.push_back(SimEvent{node.next_event_seq++, gpu, type, data, gi, ci});
  constexpr size_t kKeep = 256;
  if (node.events.size() > kKeep)
    node.events.erase(node.events.begin(),
                      node.events.begin() + static_cast<std::ptrdiff_t>(node.events.size() - kKeep));
}

}  // namespace tessera::sim
