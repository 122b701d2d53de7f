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

// The streams: NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD ([CH]) run on
// the current context's device (INVALID_CONTEXT without one: [CH] "default
// stream specified with no current context"); a created stream on its own
// context's, whatever is current. sim: any other handle, or a stream whose
// context was destroyed, is CUDA_ERROR_INVALID_VALUE (the code [CH] lists
// for the stream-ordered allocator's bad arguments). The caller holds the lock.
inline CUresult stream_context(Driver& d, CUstream s, Context*& ctx) {
  if (s != nullptr && s != TESSERA_CU_STREAM_LEGACY && s != TESSERA_CU_STREAM_PER_THREAD) {
    Stream* st = d.stream(s);
    if (!st || !d.is_live(st->ctx)) return CUDA_ERROR_INVALID_VALUE;
    ctx = st->ctx;
    return CUDA_SUCCESS;
  }
  ctx = d.current();
  return ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// The capture a stream is in, or NULL (special streams are never captured).
inline Graph* capture_of(Driver& d, CUstream s) {
  Stream* st = d.stream(s);
  return st ? st->capture : nullptr;
}

}  // namespace tessera_cuda_sim
