// The simulated CUDA driver's state: the devices configured at cuInit, the
// contexts and allocations of this process, and each device's usage, kept in
// memory or, with TESSERA_SIM_CUDA_DIR, in a file per device that every
// process using that directory updates under flock (usage_file.hpp).
//
// A C library's state, hence one per process, guarded by one mutex. A forked
// child starts afresh (uninitialised, no contexts, no allocations; its
// parent's usage stays its parent's): the simulator's rule, so that each
// process of a test is a driver client of its own.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cuda_api.hpp"
#include "usage_file.hpp"

#define TESSERA_CUDA_SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace tessera_cuda_sim {

struct DeviceConfig {
  std::string uuid_text;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" or "MIG-…"
  unsigned char uuid[16] = {};
  std::uint64_t bytes = 0;
};

// TESSERA_SIM_CUDA_DEVICES: comma-separated "UUID:SIZE", SIZE decimal with an
// optional binary suffix K, M, G or T ("81920M", "40G"). Unset: one 80 GiB
// device. Empty: no device. nullopt with `why` on a malformed value.
std::optional<std::vector<DeviceConfig>> parse_devices(const char* text, std::string& why);

struct Context {
  CUdevice device = 0;
  bool primary = false;
};

struct Allocation {
  CUdevice device = 0;
  Context* ctx = nullptr;
  std::uint64_t bytes = 0;
};

struct Usage {
  std::uint64_t process = 0, device = 0, peak = 0;
};

class Driver {
 public:
  std::mutex mu;

  bool initialized = false;
  std::uint64_t generation = 1;  // bumped in a forked child; stales every thread's context stack
  std::vector<DeviceConfig> devices;

  // The context current to the calling thread, if any and still alive.
  Context* current();
  std::vector<Context*>& thread_stack();
  bool is_live(Context* c) const { return live_.contains(c); }

  CUresult init();  // reads the environment; caller holds mu
  Context* create_context(CUdevice dev);
  Context* primary(CUdevice dev);  // the device's primary context object (not necessarily active)
  unsigned& primary_refs(CUdevice dev) { return primary_refs_[static_cast<std::size_t>(dev)]; }
  void activate(Context* c) { live_.insert(c); }
  // Frees every allocation of `c` and makes it invalid.
  CUresult destroy_context(Context* c);

  // Charges `bytes` on `ctx`'s device and returns a new address: below 4 GiB
  // for the 32-bit ABIs. OUT_OF_MEMORY past the device's memory.
  CUresult allocate(Context* ctx, std::uint64_t bytes, bool low, CUdeviceptr& out);
  CUresult free(CUdeviceptr p);
  CUresult usage(CUdevice dev, Usage& u);
  // Whether [p, p + n) lies inside one block of memory this process holds.
  bool owns_range(CUdeviceptr p, std::uint64_t n) const;
  // A stream or context synchronize: pools release what their threshold does
  // not keep (exports_pool.cpp).
  CUresult synchronize();

  void reset_after_fork();

 private:
  CUresult charge(CUdevice dev, std::int64_t delta, Usage* u);

  std::string dir_;
  std::vector<std::unique_ptr<Context>> contexts_;  // never freed: a stale handle never aliases a new one
  std::set<Context*> live_;
  std::vector<Context*> primary_;
  std::vector<unsigned> primary_refs_;
  std::map<CUdeviceptr, Allocation> allocations_;
  std::vector<std::uint64_t> own_, peak_;  // per device; peak_ only without a directory
  std::vector<UsageFile> files_;           // per device, with a directory
  CUdeviceptr next_high_ = 0x00007f0000000000ULL, next_low_ = 0x10000000ULL;
};

Driver& driver();

}  // namespace tessera_cuda_sim
