// Driving a simulated node from outside, as the hardware and workloads would:
// creating the node, processes that hold memory, utilisation and GPM
// activity, Xid and ECC events, GPU resets, and planned faults. One C entry
// point taking a JSON request, so `tessera sim` and tests use the
// simulator's own code and the node file format stays private to it.
#include <dlfcn.h>
#include <cstdlib>
#include <cstring>
#include <set>
#include <nlohmann/json.hpp>

#include "driver.hpp"

using namespace tessera::sim;
using nlohmann::json;

namespace {

struct Failure {
  std::string message;
};

uint32_t gpu_index(const Node& node, const json& req) {
  uint32_t gpu = req.value("gpu", 0u);
  if (gpu >= node.gpus.size())
    throw Failure{"GPU " + std::to_string(gpu) + " does not exist (the node has " + std::to_string(node.gpus.size()) +
                  ")"};
  return gpu;
}

// Finds the MIG device with `uuid`: its GPU, GPU instance and compute instance.
bool find_mig(const Node& node, const std::string& uuid, uint32_t& gpu, const SimGpuInstance*& gi,
              const SimComputeInstance*& ci) {
  for (uint32_t g = 0; g < node.gpus.size(); ++g)
    for (const auto& i : node.gpus[g].gpu_instances)
      for (const auto& c : i.compute_instances)
        if (c.uuid == uuid) {
          gpu = g;
          gi = &i;
          ci = &c;
          return true;
        }
  return false;
}

void add_process(Node& node, const json& req) {
  SimProcess p;
  p.pid = req.at("pid").get<uint32_t>();
  p.memory_bytes = req.value("memory_bytes", uint64_t{0});
  uint64_t total = 0, used = 0;
  std::string mig = req.value("mig_device", std::string());
  if (!mig.empty()) {
    const SimGpuInstance* gi = nullptr;
    const SimComputeInstance* ci = nullptr;
    if (!find_mig(node, mig, p.gpu, gi, ci)) throw Failure{"no MIG device " + mig + " on this node"};
    p.gpu_instance = gi->id;
    p.compute_instance = ci->id;
    const hw::Gpu& model = model_of(node.gpus[p.gpu]);
    total = hw::profile_memory_mib(model, *model.profile_by_id(gi->profile_id), node.driver_version) * kMiB;
    for (const auto& q : node.processes)
      if (q.gpu == p.gpu && q.gpu_instance == gi->id) used += q.memory_bytes;
  } else {
    p.gpu = gpu_index(node, req);
    if (node.gpus[p.gpu].mig_current)
      throw Failure{"GPU " + std::to_string(p.gpu) + " is in MIG mode: a process runs on one of its MIG devices"};
    total = model_of(node.gpus[p.gpu]).memory_mib * kMiB;
    for (const auto& q : node.processes)
      if (q.gpu == p.gpu) used += q.memory_bytes;
  }
  if (used + p.memory_bytes > total)
    throw Failure{"out of memory: " + std::to_string(p.memory_bytes) + " bytes wanted, " +
                  std::to_string(total - used) + " free"};
  for (const auto& q : node.processes)
    if (q.pid == p.pid && q.gpu == p.gpu) throw Failure{"process " + std::to_string(p.pid) + " already runs there"};
  node.processes.push_back(p);
}

void remove_process(Node& node, const json& req) {
  uint32_t pid = req.at("pid").get<uint32_t>();
  auto before = node.processes.size();
  std::erase_if(node.processes, [&](const SimProcess& p) { return p.pid == pid; });
  if (node.processes.size() == before) throw Failure{"no simulated process " + std::to_string(pid)};
}

void set_activity(Node& node, const json& req) {
  uint32_t gpu = gpu_index(node, req);
  auto& g = node.gpus[gpu];
  Activity* activity = &g.activity;
  if (req.contains("gpu_instance")) {
    uint32_t id = req["gpu_instance"].get<uint32_t>();
    activity = nullptr;
    for (auto& gi : g.gpu_instances)
      if (gi.id == id) activity = &gi.activity;
    if (!activity) throw Failure{"GPU " + std::to_string(gpu) + " has no GPU instance " + std::to_string(id)};
  } else {
    g.gpu_util = req.value("gpu_util", g.gpu_util);
    g.memory_util = req.value("memory_util", g.memory_util);
    g.temperature_c = req.value("temperature_c", g.temperature_c);
    g.power_mw = req.value("power_mw", g.power_mw);
    g.sm_clock_mhz = req.value("sm_clock_mhz", g.sm_clock_mhz);
    g.mem_clock_mhz = req.value("mem_clock_mhz", g.mem_clock_mhz);
  }
  for (const char* key : {"temperature_c", "power_mw", "sm_clock_mhz", "mem_clock_mhz"})
    if (req.contains(key) && req.contains("gpu_instance"))
      throw Failure{std::string(key) + " belongs to the whole GPU, not a GPU instance"};
  for (const char* key :
       {"gpu_util", "memory_util", "sm_util", "sm_occupancy", "dram_bw_util", "graphics_util", "tensor_util"})
    if (req.contains(key) && (req[key].get<double>() < 0 || req[key].get<double>() > 100))
      throw Failure{std::string(key) + " must be a percentage, 0 to 100"};
  activity->sm_util = req.value("sm_util", activity->sm_util);
  activity->sm_occupancy = req.value("sm_occupancy", activity->sm_occupancy);
  activity->dram_bw_util = req.value("dram_bw_util", activity->dram_bw_util);
  activity->graphics_util = req.value("graphics_util", activity->graphics_util);
  activity->tensor_util = req.value("tensor_util", activity->tensor_util);
}

void add_event(Node& node, const json& req) {
  uint32_t gpu = gpu_index(node, req);
  std::string kind = req.at("kind").get<std::string>();
  int64_t gi = req.value("gpu_instance", int64_t{-1}), ci = req.value("compute_instance", int64_t{-1});
  if (kind == "xid")
    push_event(node, gpu, nvmlEventTypeXidCriticalError, req.at("xid").get<uint64_t>(), gi, ci);
  else if (kind == "ecc-single") {
    push_event(node, gpu, nvmlEventTypeSingleBitEccError, 0, gi, ci);
    ++node.gpus[gpu].ecc_corrected;
  } else if (kind == "ecc-double") {
    push_event(node, gpu, nvmlEventTypeDoubleBitEccError, 0, gi, ci);
    ++node.gpus[gpu].ecc_uncorrected;
  }
  else if (kind == "lost") {
    // Fallen off the bus: XID 79, then silence; calls on it fail until a reset.
    push_event(node, gpu, nvmlEventTypeXidCriticalError, 79, -1, -1);
    node.gpus[gpu].lost = true;
  } else
    throw Failure{"unknown event kind '" + kind + "' (xid, ecc-single, ecc-double, lost)"};
}

void add_fault(Node& node, const json& req) {
  SimFault f;
  f.function = req.at("function").get<std::string>();
  if (!f.function.starts_with("nvml")) throw Failure{"'" + f.function + "' is not an NVML function"};
  // A fault on a function this library does not export would never fire: its
  // own exports (the map keeps everything else local) say which exist.
  Dl_info self{};
  void* own = dladdr(reinterpret_cast<void*>(&add_fault), &self) && self.dli_fname
                  ? dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD)
                  : nullptr;
  const bool exported = own && dlsym(own, f.function.c_str());
  if (own) dlclose(own);
  if (!exported)
    throw Failure{"'" + f.function + "' is not an NVML function this simulator implements, so the fault would never "
                  "fire (check the name and its _v2/_v3 suffix)"};
  f.crash = req.value("crash", false);
  // The calls that change the node (driver.cpp's mutate): a crash there leaves the change made.
  static const std::set<std::string> kChanging = {
      "nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlDeviceCreateGpuInstanceWithPlacement",
      "nvmlGpuInstanceDestroy", "nvmlGpuInstanceCreateComputeInstance", "nvmlComputeInstanceDestroy"};
  if (f.crash && !kChanging.contains(f.function))
    throw Failure{"--crash needs a call that changes the node (nvmlDeviceSetMigMode, nvmlDeviceCreateGpuInstance[WithPlacement], "
                  "nvmlGpuInstanceDestroy, nvmlGpuInstanceCreateComputeInstance, nvmlComputeInstanceDestroy), not '" +
                  f.function + "'"};
  f.error = req.value("error", 999);
  f.nth = req.value("nth", 1u);
  f.times = req.value("times", 1u);
  if (f.nth < 1 || f.times < 1) throw Failure{"--nth and --times count from 1"};
  node.faults.push_back(f);
}

json handle(const json& req) {
  std::string op = req.at("op").get<std::string>();
  if (op == "calls") {  // this process's NVML calls so far, by entry point
    auto& d = driver();
    std::lock_guard lock(d.mu);
    return {{"calls", d.calls}};
  }
  std::string dir = req.at("dir").get<std::string>();
  if (op == "create") {
    NodeSpec spec;
    spec.gpu = req.at("gpu").get<std::string>();
    spec.count = req.value("count", 1u);
    spec.nvlink_all = req.value("nvlink_all", false);
    spec.mig = req.value("mig", false);
    spec.seed = req.value("seed", uint64_t{1});
    spec.privileged = req.value("privileged", true);
    auto node = make_node(spec);
    if (!node) throw Failure{node.error().message};
    if (req.contains("driver_version")) node->driver_version = req["driver_version"].get<std::string>();
    if (auto r = NodeStore::create(dir, *node); !r) throw Failure{r.error().message};
    return json::parse(to_json_text(*node));
  }
  auto store = NodeStore::open(dir);
  if (!store) throw Failure{store.error().message};
  if (op == "show") {
    auto node = (*store)->read();
    if (!node) throw Failure{node.error().message};
    return json::parse(to_json_text(**node));
  }
  std::string failure;
  auto written = (*store)->update([&](Node& node) {
    try {
      if (op == "process")
        add_process(node, req);
      else if (op == "end-process")
        remove_process(node, req);
      else if (op == "activity")
        set_activity(node, req);
      else if (op == "event")
        add_event(node, req);
      else if (op == "fault")
        add_fault(node, req);
      else if (op == "reboot")
        reboot_node(node);
      else if (op == "reset") {
        uint32_t gpu = gpu_index(node, req);
        if (reset_gpu(node, gpu) != NVML_SUCCESS)
          throw Failure{"GPU " + std::to_string(gpu) +
                        " is in use (processes, or MIG instances with MIG being disabled)"};
      } else
        throw Failure{"unknown operation '" + op + "'"};
    } catch (const Failure& f) {
      failure = f.message;
      return false;
    }
    return true;
  });
  if (!written) throw Failure{written.error().message};
  if (!failure.empty()) throw Failure{failure};
  return json::object();
}

char* to_c_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

}  // namespace

// Runs one request ({"op": ..., "dir": ..., ...}); returns 0 and the result
// as JSON in *reply, or 1 and {"error": "..."}. Free *reply with tesseraSimFree.
TESSERA_SIM_EXPORT int tesseraSimControl(const char* request, char** reply) {
  json out;
  int rc = 0;
  try {
    out = handle(json::parse(request ? request : ""));
  } catch (const Failure& f) {
    out = {{"error", f.message}};
    rc = 1;
  } catch (const json::exception& e) {
    out = {{"error", std::string("bad request: ") + e.what()}};
    rc = 1;
  }
  if (reply) *reply = to_c_string(out.dump());
  return rc;
}

TESSERA_SIM_EXPORT void tesseraSimFree(char* reply) { std::free(reply); }
