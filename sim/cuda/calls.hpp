// Per-function call counts (design §5: "each versioned and _ptsz variant a
// distinct function that counts its calls, so a wrapper of the wrong ABI or
// stream variant shows"). Every exported driver entry point starts with
// TESSERA_CUDA_SIM_COUNT(), which counts under the function's own name
// (__func__, the exported name of an extern "C" function); the control call
// tesseraCudaSimCalls reads the count back. Counts are per process: a forked
// child starts from zero, as it starts the driver afresh.
#pragma once

#include <atomic>

namespace tessera_cuda_sim {

class CallCounter {
 public:
  explicit CallCounter(const char* name);  // registers itself; never unregistered
  void hit() { count_.fetch_add(1, std::memory_order_relaxed); }

  // The count of exported function `name` (0 if never called).
  static unsigned long long count_of(const char* name);
  static void reset_all();  // in a forked child

 private:
  const char* name_;
  std::atomic<unsigned long long> count_{0};
  CallCounter* next_ = nullptr;
};

}  // namespace tessera_cuda_sim

#define TESSERA_CUDA_SIM_COUNT()                                   \
  static ::tessera_cuda_sim::CallCounter tessera_call_counter_(__func__); \
  tessera_call_counter_.hit()
