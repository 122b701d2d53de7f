#include "nvml/gpm.hpp"

#include <memory>

namespace tessera::nvml {

using namespace abi;

Result<GpmSample> GpmSample::allocate(const Api& api) {
  if (!api.nvmlGpmSampleAlloc || !api.nvmlGpmSampleFree)
    return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlGpmSampleAlloc", "driver before R520");
  nvmlGpmSample_t handle = nullptr;
  if (auto r = api.nvmlGpmSampleAlloc(&handle); r != NVML_SUCCESS) return fail(r, "nvmlGpmSampleAlloc");
  return GpmSample(&api, handle);
}

GpmSample& GpmSample::operator=(GpmSample&& o) noexcept {
  if (this != &o) {
    if (handle_) api_->nvmlGpmSampleFree(handle_);
    api_ = o.api_;
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

GpmSample::~GpmSample() {
  if (handle_) api_->nvmlGpmSampleFree(handle_);
}

Result<GpmMetrics> gpm_metrics(const Api& api, const GpmSample& earlier, const GpmSample& later) {
  if (!api.nvmlGpmMetricsGet) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlGpmMetricsGet", "driver before R520");
  // About 4 KB: on the heap, not on a small stack (facts 1.5 #5).
  auto request = std::make_unique<nvmlGpmMetricsGet_t>();
  request->version = NVML_GPM_METRICS_GET_VERSION;
  request->sample1 = earlier.handle();
  request->sample2 = later.handle();
  const unsigned int ids[] = {NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY, NVML_GPM_METRIC_DRAM_BW_UTIL,
                              NVML_GPM_METRIC_GRAPHICS_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL};
  constexpr unsigned int count = sizeof ids / sizeof ids[0];
  static_assert(count <= kGpmMetricSlots);
  request->numMetrics = count;  // the driver reads and writes metrics[0..count) only
  for (unsigned int i = 0; i < count; ++i) request->metrics[i].metricId = ids[i];
  if (auto r = api.nvmlGpmMetricsGet(request.get()); r != NVML_SUCCESS) return fail(r, "nvmlGpmMetricsGet");
  auto value = [&](unsigned int i) -> std::optional<double> {
    if (request->metrics[i].nvmlReturn != NVML_SUCCESS) return std::nullopt;
    return request->metrics[i].value;
  };
  return GpmMetrics{value(0), value(1), value(2), value(3), value(4)};
}

}  // namespace tessera::nvml
