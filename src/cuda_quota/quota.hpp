// The quota library's process state (docs/design-memory-quotas.md §3): the
// quotas read from the environment, the CUDA ordinal -> ledger device map, the
// container's ledger, and this process's record of what each pointer, handle
// or array was charged. Internal to libtessera-cuda.so.
//
// Rules this code keeps:
// - With no TESSERA_DEVICE_MEMORY_LIMIT_<k> in the environment the library is
//   off: every wrapper forwards and nothing is ever charged.
// - Fail-safe: a malformed quota, a visible device no TESSERA_DEVICE_UUID_<k>
//   names, or an unusable ledger gives quota 0 (every charge refused), with one
//   log line saying why; never "no limit".
// - A charge goes to the ledger before the driver is called and is undone if
//   the driver fails; a free is uncharged only after the driver freed it and
//   only by what this process recorded for that pointer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cuda_quota/cuda_abi.hpp"
#include "cuda_quota/ledger.hpp"

namespace tessera::quota {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };
void log(Level level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Reads the environment once (any thread, any time, even before constructors).
bool enabled();

// What a wrapper needs to know about a CUDA device before charging it.
struct Device {
  bool known = false;  // the library is ready for this ordinal (else forward uncharged)
  int index = -1;      // ledger device index; -1: no quota applies (refuse every charge)
  std::uint64_t quota = 0;
};

// The device of the calling thread's current context; false when there is
// none (the driver will answer the call with its own error).
bool current_device(CUdevice& out);
// The same with the context itself: one driver call when this thread saw the context before.
bool current(CUdevice& ordinal, CUcontext& ctx);
CUcontext current_context();
// A context was destroyed or reset: forget every thread's context -> device memory.
void contexts_changed();
Device device(CUdevice ordinal);
// The same for a device named by its UUID text (NVML's nvmlDeviceGetUUID);
// known but without a quota when no TESSERA_DEVICE_UUID_<k> names it.
Device device_by_uuid(const char* uuid);

// Charges `bytes` to `dev`; false (after one rate-limited log line) when over
// the quota or when no quota can be enforced. `request` is what the program
// asked for, for the log line.
bool charge(const Device& dev, std::uint64_t bytes, std::uint64_t request);
// The same without the log line, for a caller that will retry.
bool try_charge(const Device& dev, std::uint64_t bytes);
void uncharge(int index, std::uint64_t bytes);
// The container's charged bytes on ledger device `index`.
std::uint64_t usage(int index);

// What a record is keyed by: device pointers, VMM handles, arrays and
// mipmapped arrays, VMM mappings (key = mapped address; `handle` names the
// VMM handle), contexts (their own memory), modules and executable graphs
// live in separate key spaces.
enum class Space : std::uint8_t { pointer = 1, handle, array, mapping, pool, context, module, graph, library, shared };
enum class Kind : std::uint8_t {
  context_bound,  // freed by cuCtxDestroy / primary reset: cuMemAlloc, pitch, managed, arrays, modules,
                  // the context's own memory
  pool,           // stream-ordered: charged as its pool's growth
  vmm,            // cuMemCreate: freed when its last reference is released and its last mapping unmapped
  mapping,
  pool_state,     // a pool's charged reservation
  graph,          // an executable graph's allocation nodes on one device (bytes; `released`: mapped)
  library,        // a library's copies on one device: in every context there, returned only at its unload
};

struct Record {
  Space space{};
  Kind kind{};
  std::int16_t index = -1;  // ledger device
  bool released = false;    // graph: mapped
  std::uint32_t maps = 0;   // vmm: live mappings
  std::uint32_t refs = 0;   // vmm: references held through its handles (create, retain, import)
  std::uint64_t key = 0;
  std::uint64_t bytes = 0;
  // mapping: the allocation's VMM handle; pool allocation: its pool; vmm: 0
  // for the handle that created it, else (an imported handle) that one; a
  // shared (exported) handle: the allocation's handle.
  std::uint64_t handle = 0;
  CUcontext ctx = nullptr;
};

// The per-process table. insert() replaces (and uncharges) a stale record of
// the same key: the driver reused an address freed behind our back.
void insert(const Record& r);
bool take(Space space, std::uint64_t key, Record& out);  // remove and return
bool find(Space space, std::uint64_t key, Record& out);
bool update(const Record& r);  // overwrite an existing record
// Removes and uncharges every context-bound record of `ctx`.
void reclaim_context(CUcontext ctx);
// Adds the bytes of every context-bound record of `ctx` to `out`, by ledger device.
void context_bytes(CUcontext ctx, std::uint64_t (&out)[kMaxDevices]);
// Removes every record for which `pick` is true, returning them in `out` (up to `capacity`).
std::size_t take_if(bool (*pick)(const Record&, const void*), const void* arg, Record* out, std::size_t capacity);
// Copies up to `capacity` records for which `pick` is true into `out`, leaving them.
std::size_t copy_if(bool (*pick)(const Record&, const void*), const void* arg, Record* out, std::size_t capacity);

// The primary context last seen for an ordinal (from cuDevicePrimaryCtxRetain).
void note_primary(CUdevice ordinal, CUcontext ctx);
CUcontext primary_of(CUdevice ordinal);
// Contexts this process created (cuCtxCreate), by device, so that a context's
// or module's memory can be measured through another context of its device.
void note_context(CUcontext ctx, CUdevice ordinal);
void forget_context(CUcontext ctx);
// A created context of `ordinal` other than `except`; NULL when none.
CUcontext context_on(CUdevice ordinal, CUcontext except);
// The device of a context this process created or retained; false when unknown.
bool device_of_context(CUcontext ctx, CUdevice& ordinal);

// With a limits file that cannot be used (or a ledger that does not match
// it): why no context may be created; NULL when contexts may be created (or
// the driver cannot answer yet). Initialises the library like device().
const char* context_refusal();
// What a process's first context on ledger device `index` is charged when no
// context exists to measure it with (the limits file's `context=`; 0: none).
std::uint64_t first_context_charge(int index);
// What one context takes on ledger device `index` as a process of the
// container measured it (the ledger keeps it; Ledger::context_size's
// answers, `unavailable` without a ready ledger).
Ledger::ContextSize measured_context_size(int index, std::uint64_t& bytes);
void note_context_size(int index, std::uint64_t bytes);
void abandon_context_probe(int index);
// The container's frees under way on ledger device `index`, in the ledger
// (Ledger::release_begin, release_end, releases); false from begin, and
// nothing recorded, without a ready ledger or a slot.
bool ledger_release_begin(int index, std::uint64_t bytes);
void ledger_release_end(int index, std::uint64_t bytes);
Ledger::Releases ledger_releases(int index);
// The CUDA ordinal of ledger device `index`; -1 when it is not visible.
CUdevice ordinal_of(int index);
// The number of ledger devices (0 when the library is off).
int device_count();

// glibc's own dlsym, found without our hook (interpose.cpp).
void* real_dlsym(void* handle, const char* name);
// The driver's function for an exact exported name, resolved without hooks
// (NULL when the driver does not export it).
void* driver_symbol(const char* name);
void* nvml_symbol(const char* name);

// A driver (or NVML) function looked up on first use, without a lock or the
// C++ runtime's guard: as a function-local static it is constant-initialised,
// and racing threads store the same pointer.
template <class F>
class DriverFn {
 public:
  explicit constexpr DriverFn(const char* name, bool nvml = false) : name_(name), nvml_(nvml) {}
  F operator()() {
    void* p = pointer_.load(std::memory_order_acquire);
    if (!p) {
      p = nvml_ ? nvml_symbol(name_) : driver_symbol(name_);
      // A driver that lacks the function is not asked again (NVML may load later).
      if (!p && !nvml_) p = missing();
      pointer_.store(p, std::memory_order_release);
    }
    return p == missing() ? nullptr : reinterpret_cast<F>(p);
  }

 private:
  static void* missing() { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(1)); }
  const char* name_;
  bool nvml_;
  std::atomic<void*> pointer_{nullptr};
};

}  // namespace tessera::quota
