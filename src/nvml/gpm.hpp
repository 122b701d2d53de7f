// GPU Performance Monitoring (Hopper and newer): a sample is a snapshot of
// the GPU's (or one GPU instance's) counters; metrics come from two samples
// taken some time apart (NVIDIA advises more than 100 ms).
#pragma once

#include <utility>

#include "nvml/error.hpp"
#include "nvml/library.hpp"
#include "nvml/types.hpp"

namespace tessera::nvml {

// Owns one nvmlGpmSample_t; move-only.
class GpmSample {
 public:
  [[nodiscard]] static Result<GpmSample> allocate(const Api& api);
  GpmSample(GpmSample&& o) noexcept : api_(o.api_), handle_(std::exchange(o.handle_, nullptr)) {}
  GpmSample& operator=(GpmSample&& o) noexcept;
  GpmSample(const GpmSample&) = delete;
  GpmSample& operator=(const GpmSample&) = delete;
  ~GpmSample();

  abi::nvmlGpmSample_t handle() const { return handle_; }

 private:
  GpmSample(const Api* api, abi::nvmlGpmSample_t handle) : api_(api), handle_(handle) {}
  const Api* api_;
  abi::nvmlGpmSample_t handle_;
};

// SM utilisation, SM occupancy, DRAM bandwidth, graphics engine and tensor
// pipe utilisation between two
// samples of the same GPU or GPU instance, `earlier` first.
[[nodiscard]] Result<GpmMetrics> gpm_metrics(const Api& api, const GpmSample& earlier, const GpmSample& later);

}  // namespace tessera::nvml
