// What every exported entry point shares: the "initialised" check under the
// driver's lock, device validation, and the NULL / per-thread stream handles.
#pragma once

#include "calls.hpp"
#include "driver.hpp"

namespace tessera_cuda_sim {

// Runs `body` with the driver locked, after the check every entry point but
// cuInit, cuDriverGetVersion and the lookups makes first: [CH] cuInit, every
// call before it is CUDA_ERROR_NOT_INITIALIZED.
template <class Body>
CUresult initialized(Body&& body) {
  auto& d = driver();
  std::lock_guard lock(d.mu);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return body(d);
}

inline bool valid_device(const Driver& d, CUdevice dev) {
  return dev >= 0 && static_cast<std::size_t>(dev) < d.devices.size();
}

// The streams the simulator knows: NULL, CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD ([CH]); each runs on the current context's device.
// sim: no stream can be created, so any other handle is CUDA_ERROR_INVALID_VALUE
// (the code [CH] lists for the stream-ordered allocator's bad arguments).
// The caller holds the lock. INVALID_CONTEXT without a current context ([CH]:
// "default stream specified with no current context").
inline CUresult stream_context(Driver& d, CUstream s, Context*& ctx) {
  if (s != nullptr && s != TESSERA_CU_STREAM_LEGACY && s != TESSERA_CU_STREAM_PER_THREAD)
    return CUDA_ERROR_INVALID_VALUE;
  ctx = d.current();
  return ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace tessera_cuda_sim
