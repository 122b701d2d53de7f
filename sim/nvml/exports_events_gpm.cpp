// Simulated NVML: event sets (Xid, ECC, MIG changes) and GPM samples.
#include <chrono>
#include <thread>

#include "driver.hpp"

using namespace tessera::sim;
using namespace tessera::sim::compat;

namespace {

constexpr unsigned long long kSupportedEvents = nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |
                                                nvmlEventTypeXidCriticalError | nvmlEventMigConfigChange;

SimEventSet* as_event_set(Driver& d, nvmlEventSet_t set) {
  auto* s = reinterpret_cast<SimEventSet*>(set);
  return d.event_sets.count(s) ? s : nullptr;
}

SimGpmSample* as_sample(Driver& d, nvmlGpmSample_t sample) {
  auto* s = reinterpret_cast<SimGpmSample*>(sample);
  return d.gpm_samples.count(s) ? s : nullptr;
}

bool gpm_capable(const hw::Gpu& model) {
  return model.has_gpm();  // GPM: Hopper and newer (facts 1.2)
}

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return call("nvmlEventSetCreate", [&](Driver& d, const Node& node) {
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    auto* s = new SimEventSet();
    s->last_seq = node.next_event_seq - 1;  // only events from now on
    d.event_sets.insert(s);
    *set = reinterpret_cast<nvmlEventSet_t>(s);
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes) {
  return call("nvmlDeviceGetSupportedEventTypes", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!eventTypes) return NVML_ERROR_INVALID_ARGUMENT;
    *eventTypes = kSupportedEvents;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                                         nvmlEventSet_t set) {
  return call("nvmlDeviceRegisterEvents", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    auto* s = as_event_set(d, set);
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    // Any unsupported bit: nothing is registered (facts 1.4).
    if (eventTypes & ~kSupportedEvents) return NVML_ERROR_NOT_SUPPORTED;
    s->registered[gpu] |= eventTypes;
    return NVML_SUCCESS;
  });
}

namespace {

// Waits for the next registered event and hands it to `deliver`, which writes
// the caller's struct: the whole nvmlEventData_t for _v2, its first three
// fields for v1.
template <class Deliver>
nvmlReturn_t wait_event(const char* function, nvmlEventSet_t set, bool has_data, unsigned int timeoutms,
                        Deliver deliver) {
  // Polls the node (another process may inject the event), without holding
  // the driver's lock while sleeping.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
  for (;;) {
    bool found = false;
    Return r = call(function, [&](Driver& d, const Node& node) {
      auto* s = as_event_set(d, set);
      if (!s || !has_data) return NVML_ERROR_INVALID_ARGUMENT;
      for (const auto& e : node.events) {
        if (e.seq <= s->last_seq) continue;
        auto reg = s->registered.find(e.gpu);
        if (reg == s->registered.end() || !(reg->second & e.type)) continue;
        s->last_seq = e.seq;
        deliver(nvmlEventData_t{
            d.gpu_handle(e.gpu), e.type, e.data,
            e.gpu_instance < 0 ? NVML_INSTANCE_ID_NONE : static_cast<unsigned int>(e.gpu_instance),
            e.compute_instance < 0 ? NVML_INSTANCE_ID_NONE : static_cast<unsigned int>(e.compute_instance)});
        found = true;
        return NVML_SUCCESS;
      }
      return NVML_SUCCESS;
    });
    if (r != NVML_SUCCESS || found) return r;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(5), deadline - now));
  }
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  return wait_event("nvmlEventSetWait_v2", set, data != nullptr, timeoutms,
                    [&](const nvmlEventData_t& event) { *data = event; });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_v1_t* data, unsigned int timeoutms) {
  return wait_event("nvmlEventSetWait", set, data != nullptr, timeoutms, [&](const nvmlEventData_t& event) {
    *data = nvmlEventData_v1_t{event.device, event.eventType, event.eventData};
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  return call("nvmlEventSetFree", [&](Driver& d, const Node&) {
    auto* s = as_event_set(d, set);
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    d.event_sets.erase(s);
    delete s;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* gpmSupport) {
  return call("nvmlGpmQueryDeviceSupport", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!gpmSupport) return NVML_ERROR_INVALID_ARGUMENT;
    if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    gpmSupport->isSupportedDevice = gpm_capable(model_of(node.gpus[gpu])) ? 1 : 0;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* gpmSample) {
  return call("nvmlGpmSampleAlloc", [&](Driver& d, const Node&) {
    if (!gpmSample) return NVML_ERROR_INVALID_ARGUMENT;
    auto* s = new SimGpmSample();
    d.gpm_samples.insert(s);
    *gpmSample = reinterpret_cast<nvmlGpmSample_t>(s);
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample) {
  return call("nvmlGpmSampleFree", [&](Driver& d, const Node&) {
    auto* s = as_sample(d, gpmSample);
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    d.gpm_samples.erase(s);
    delete s;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample) {
  return call("nvmlGpmSampleGet", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    auto* s = as_sample(d, gpmSample);
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpm_capable(model_of(node.gpus[gpu]))) return NVML_ERROR_NOT_SUPPORTED;
    *s = SimGpmSample{kHandleMagic, true, gpu, -1, node.gpus[gpu].activity, now_ns()};
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                                    nvmlGpmSample_t gpmSample) {
  return call("nvmlGpmMigSampleGet", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;  // the parent GPU's handle (facts 1.2)
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    auto* s = as_sample(d, gpmSample);
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpm_capable(model_of(node.gpus[gpu]))) return NVML_ERROR_NOT_SUPPORTED;
    for (const auto& gi : node.gpus[gpu].gpu_instances)
      if (gi.id == gpuInstanceId) {
        *s = SimGpmSample{kHandleMagic, true, gpu, gi.id, gi.activity, now_ns()};
        return NVML_SUCCESS;
      }
    return NVML_ERROR_NOT_FOUND;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* metricsGet) {
  return call("nvmlGpmMetricsGet", [&](Driver& d, const Node&) {
    if (!metricsGet) return NVML_ERROR_INVALID_ARGUMENT;
    if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    auto* a = as_sample(d, metricsGet->sample1);
    auto* b = as_sample(d, metricsGet->sample2);
    if (!a || !b || !a->taken || !b->taken || metricsGet->numMetrics > kGpmMetricSlots)
      return NVML_ERROR_INVALID_ARGUMENT;
    if (a->gpu != b->gpu || a->gpu_instance != b->gpu_instance || b->taken_ns < a->taken_ns)
      return NVML_ERROR_INVALID_ARGUMENT;
    // The activity level is what was set when the later sample was taken:
    // the simulated counters advance at that rate over the interval.
    static char sm_util[] = "SM utilization", sm_occ[] = "SM occupancy", dram[] = "DRAM bandwidth utilization",
                graphics[] = "Graphics utilization", tensor[] = "Any tensor utilization", percent[] = "%";
    for (unsigned int i = 0; i < metricsGet->numMetrics; ++i) {
      auto& m = metricsGet->metrics[i];
      m.nvmlReturn = NVML_SUCCESS;
      m.metricInfo.unit = percent;
      switch (m.metricId) {
        case NVML_GPM_METRIC_SM_UTIL:
          m.value = b->activity.sm_util;
          m.metricInfo.shortName = m.metricInfo.longName = sm_util;
          break;
        case NVML_GPM_METRIC_SM_OCCUPANCY:
          m.value = b->activity.sm_occupancy;
          m.metricInfo.shortName = m.metricInfo.longName = sm_occ;
          break;
        case NVML_GPM_METRIC_DRAM_BW_UTIL:
          m.value = b->activity.dram_bw_util;
          m.metricInfo.shortName = m.metricInfo.longName = dram;
          break;
        case NVML_GPM_METRIC_GRAPHICS_UTIL:
          m.value = b->activity.graphics_util;
          m.metricInfo.shortName = m.metricInfo.longName = graphics;
          break;
        case NVML_GPM_METRIC_ANY_TENSOR_UTIL:
          m.value = b->activity.tensor_util;
          m.metricInfo.shortName = m.metricInfo.longName = tensor;
          break;
        default:
          m.value = 0;
          m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
          m.metricInfo = {};
          break;
      }
    }
    return NVML_SUCCESS;
  });
}
