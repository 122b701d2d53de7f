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

// A stream-ordered pool (exports_pool.cpp). Reserved memory is what the pool
// holds from the device, in granules; used memory is what its outstanding
// allocations hold of that.
struct Pool {
  CUdevice device = 0;
  bool is_default = false;
  bool destroyed = false;  // cuMemPoolDestroy'd; lives on while allocations are outstanding
  std::uint64_t max_size = 0;  // CUmemPoolProps.maxSize; 0: no limit
  std::uint64_t threshold = 0;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ([CH] default 0)
  std::uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
  int reuse[3] = {1, 1, 1};  // the three REUSE_* attributes ([CH] default enabled)
};

// Memory a pointer names: cuMemAlloc/AllocPitch/AllocManaged (context-bound,
// `ctx` set) or a pool allocation (`pool` set, no context).
struct Allocation {
  CUdevice device = 0;
  Context* ctx = nullptr;
  std::uint64_t bytes = 0;
  Pool* pool = nullptr;
};

// cuMemCreate's physical memory (exports_vmm.cpp).
struct Physical {
  CUdevice device = 0;
  bool device_memory = false;  // charged: a CU_MEM_LOCATION_TYPE_DEVICE location
  std::uint64_t bytes = 0;
  bool released = false;
  unsigned mappings = 0;
};

struct Mapping {
  std::uint64_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
};

// A CUDA array or mipmapped array (exports_array.cpp): context-bound.
struct ArrayRecord {
  CUdevice device = 0;
  Context* ctx = nullptr;
  std::uint64_t bytes = 0;
  bool mipmapped = false;
};

// The simulator's granule: pools reserve, and VMM sizes and addresses align,
// in 2 MiB (design §5; sim's cuMemGetAllocationGranularity answer).
inline constexpr std::uint64_t kGranule = 2ULL << 20;

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
  // A stream or context synchronize: every pool of the process releases what
  // its release threshold does not keep.
  CUresult synchronize();

  // Stream-ordered pools. The caller holds mu and has validated arguments.
  Pool* default_pool(CUdevice dev);
  Pool* current_pool(CUdevice dev) {
    Pool* p = current_pool_[static_cast<std::size_t>(dev)];
    return p ? p : default_pool(dev);
  }
  void set_current_pool(CUdevice dev, Pool* p) { current_pool_[static_cast<std::size_t>(dev)] = p; }
  Pool* create_pool(CUdevice dev, std::uint64_t max_size);
  Pool* usable_pool(CUmemoryPool h) const;  // NULL unless a live, not destroyed pool of this process
  CUresult pool_allocate(Pool* p, std::uint64_t bytes, CUdeviceptr& out);
  CUresult pool_trim(Pool* p, std::uint64_t keep_at_least);
  CUresult pool_destroy(Pool* p);

  // Virtual memory management.
  CUresult vmm_create(CUdevice dev, bool device_memory, std::uint64_t bytes, CUmemGenericAllocationHandle& out);
  CUresult vmm_release(CUmemGenericAllocationHandle h);
  CUresult vmm_reserve(std::uint64_t size, std::uint64_t alignment, CUdeviceptr& out);
  CUresult vmm_address_free(CUdeviceptr p, std::uint64_t size);
  CUresult vmm_map(CUdeviceptr p, std::uint64_t size, CUmemGenericAllocationHandle h);
  CUresult vmm_unmap(CUdeviceptr p, std::uint64_t size);

  // Arrays; `handle` is the CUarray or CUmipmappedArray value.
  CUresult array_create(Context* ctx, std::uint64_t bytes, bool mipmapped, std::uintptr_t& handle);
  CUresult array_destroy(std::uintptr_t handle, bool mipmapped);

  void reset_after_fork();

 private:
  CUresult charge(CUdevice dev, std::int64_t delta, Usage* u);
  CUresult pool_release_to(Pool* p, std::uint64_t keep);
  CUresult physical_maybe_free(std::map<CUmemGenericAllocationHandle, Physical>::iterator it);
  CUdeviceptr take_addresses(std::uint64_t bytes, std::uint64_t alignment);

  std::string dir_;
  std::vector<std::unique_ptr<Context>> contexts_;  // never freed: a stale handle never aliases a new one
  std::set<Context*> live_;
  std::vector<Context*> primary_;
  std::vector<unsigned> primary_refs_;
  std::map<CUdeviceptr, Allocation> allocations_;
  std::vector<std::unique_ptr<Pool>> pools_;  // never freed: a stale handle never aliases a new one
  std::set<Pool*> live_pools_;                // created and not yet gone (destroyed ones wait here for their frees)
  std::vector<Pool*> default_pool_, current_pool_;  // per device
  std::map<CUmemGenericAllocationHandle, Physical> physical_;
  CUmemGenericAllocationHandle next_handle_ = 0x1000;
  std::map<CUdeviceptr, std::uint64_t> reservations_;  // base → size
  std::map<CUdeviceptr, Mapping> mappings_;
  std::map<std::uintptr_t, ArrayRecord> arrays_;
  std::set<std::uintptr_t> orphaned_arrays_;  // freed with their context
  std::uintptr_t next_array_ = 0xa0000000;
  std::vector<std::uint64_t> own_, peak_;  // per device; peak_ only without a directory
  std::vector<UsageFile> files_;           // per device, with a directory
  CUdeviceptr next_high_ = 0x00007f0000000000ULL, next_low_ = 0x10000000ULL;
};

Driver& driver();

}  // namespace tessera_cuda_sim
