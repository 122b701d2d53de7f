// The wrappers: charge before the driver allocates, uncharge after it frees,
// report the slice (docs/design-memory-quotas.md §1 table, §3). Each one is
// exported under the driver's exact name and ABI (cuda_abi.hpp) and forwards
// to the driver's function for that same variant (REAL). With the library off
// (no quota in the environment) every wrapper only forwards.
#include <pthread.h>

#include <climits>
#include <cstring>

#include "cuda_quota/entry_points.hpp"
#include "cuda_quota/quota.hpp"

using namespace tessera::quota;

namespace {

constexpr std::uint64_t kGranule = 2ull << 20;  // design §1: pools and arrays count in 2 MiB

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return v > UINT64_MAX - (to - 1) ? UINT64_MAX : (v + to - 1) / to * to; }

// Overflow-safe product; UINT64_MAX (never fits a quota) on overflow.
std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

// The driver does not export the variant this wrapper stands for.
CUresult missing() { return CUDA_ERROR_NOT_FOUND; }

// The shape of a wrapper that charges nothing itself: call the driver's
// function, and on success do `after` (uncharge, report, remember).
template <class F, class After, class... Args>
CUresult forward(F driver, After&& after, Args... args) {
  if (!driver) return missing();
  const CUresult r = driver(args...);
  if (r == CUDA_SUCCESS) after();
  return r;
}

// The device a wrapper charges: the current context's. `known` false means
// "forward uncharged" (library off or not ready; the driver answers).
Device charged_device(CUdevice& ordinal, CUcontext& ctx) {
  if (!enabled() || !current(ordinal, ctx)) return Device{};
  return device(ordinal);
}

Device charged_device(CUdevice& ordinal) {
  CUcontext ctx = nullptr;
  return charged_device(ordinal, ctx);
}

// Charges `bytes`, calls the driver, then undoes the charge if the driver
// failed or records it (`rec` completed with the device, `key()` and `bytes`).
template <class Call, class Key>
CUresult charge_and_call(const Device& dev, std::uint64_t bytes, std::uint64_t request, Record rec, Call&& call,
                         Key&& key) {
  if (!charge(dev, bytes, request)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = call();
  if (r != CUDA_SUCCESS) {
    uncharge(dev.index, bytes);
    return r;
  }
  rec.index = static_cast<std::int16_t>(dev.index);
  rec.key = key();
  rec.bytes = bytes;
  insert(rec);
  return r;
}

Record record_of(Space space, Kind kind, CUcontext ctx = nullptr) {
  Record rec;
  rec.space = space;
  rec.kind = kind;
  rec.ctx = ctx;
  return rec;
}

// A context-bound allocation on the current context's device.
template <class Call>
CUresult allocate(std::uint64_t bytes, std::uint64_t request, Call&& call, CUdeviceptr& out) {
  CUdevice ordinal = 0;
  CUcontext ctx = nullptr;
  const Device dev = charged_device(ordinal, ctx);
  if (!dev.known) return call();
  return charge_and_call(dev, bytes, request, record_of(Space::pointer, Kind::context_bound, ctx), call,
                         [&] { return out; });
}

// --------------------------------------------------------------- pools

// Stream-ordered memory is charged as its pool's growth: the pool's
// RESERVED_MEM_CURRENT, re-read after every pool operation (design §1:
// not the request size, not _HIGH). One process-wide lock orders them.
struct Pool {
  CUmemoryPool pool = nullptr;
  int index = -1;
  CUdevice ordinal = -1;
  std::uint64_t charged = 0;
};
constexpr int kMaxPools = 256;
Pool g_pools[kMaxPools];
pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;

using PoolGetAttribute = CUresult (*)(CUmemoryPool, int, void*);
using DeviceGetPool = CUresult (*)(CUmemoryPool*, CUdevice);

std::uint64_t reserved(CUmemoryPool pool, bool& ok) {
  static DriverFn<PoolGetAttribute> lookup_get{"cuMemPoolGetAttribute"};
  const auto get = lookup_get();
  cuuint64_t value = 0;
  ok = get && get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value) == CUDA_SUCCESS;
  return value;
}

// Caller holds g_pool_mu.
Pool* pool_entry(CUmemoryPool pool, CUdevice ordinal, int index) {
  Pool* spare = nullptr;
  for (auto& p : g_pools) {
    if (p.pool == pool) return &p;
    if (!p.pool && !spare) spare = &p;
  }
  if (!spare) return nullptr;
  *spare = Pool{pool, index, ordinal, 0};
  return spare;
}

// Settles a pool's charge to what it reserves now. Growth beyond what was
// reserved for it is charged too when the quota allows; else it is logged.
void settle(Pool& p) {
  bool ok = false;
  const std::uint64_t now = reserved(p.pool, ok);
  if (!ok) return;
  if (now < p.charged) {
    uncharge(p.index, p.charged - now);
    p.charged = now;
  } else if (now > p.charged) {
    Device dev;
    dev.known = true;
    dev.index = p.index;
    if (charge(dev, now - p.charged, now - p.charged)) p.charged = now;
  }
}

// Re-reads the pools of ledger device `index` (all with -1), or only `pool`.
void refresh_pools(int index, CUmemoryPool pool = nullptr) {
  pthread_mutex_lock(&g_pool_mu);
  for (auto& p : g_pools)
    if (p.pool && (pool ? p.pool == pool : (index < 0 || p.index == index))) settle(p);
  pthread_mutex_unlock(&g_pool_mu);
}

// The device a pool lives on: one this process created (cuMemPoolCreate) or a
// device's default or current pool; else the current device.
bool pool_device(CUmemoryPool pool, CUdevice& ordinal) {
  pthread_mutex_lock(&g_pool_mu);
  for (auto& p : g_pools)
    if (p.pool == pool) {
      ordinal = p.ordinal;
      pthread_mutex_unlock(&g_pool_mu);
      return true;
    }
  pthread_mutex_unlock(&g_pool_mu);
  static DriverFn<DeviceGetPool> lookup_get_default{"cuDeviceGetDefaultMemPool"};
  const auto get_default = lookup_get_default();
  static DriverFn<DeviceGetPool> lookup_get_current{"cuDeviceGetMemPool"};
  const auto get_current = lookup_get_current();
  using GetCount = CUresult (*)(int*);
  static DriverFn<GetCount> lookup_get_count{"cuDeviceGetCount"};
  const auto get_count = lookup_get_count();
  int count = 0;
  if (get_count && get_count(&count) == CUDA_SUCCESS)
    for (CUdevice d = 0; d < count; ++d) {
      CUmemoryPool candidate = nullptr;
      if ((get_default && get_default(&candidate, d) == CUDA_SUCCESS && candidate == pool) ||
          (get_current && get_current(&candidate, d) == CUDA_SUCCESS && candidate == pool)) {
        ordinal = d;
        return true;
      }
    }
  return current_device(ordinal);
}

template <class Call>
CUresult pool_allocate(CUmemoryPool pool, CUdevice ordinal, std::size_t bytes, Call&& call, CUdeviceptr* dptr) {
  const Device dev = device(ordinal);
  if (!dev.known) return call();
  const std::uint64_t reserve = round_up(bytes, kGranule);
  pthread_mutex_lock(&g_pool_mu);
  Pool* p = dev.index >= 0 ? pool_entry(pool, ordinal, dev.index) : nullptr;
  if (!p) {
    pthread_mutex_unlock(&g_pool_mu);
    if (dev.index >= 0) log(Level::error, "more than %d memory pools in one process; refusing", kMaxPools);
    charge(Device{true, -1, 0}, reserve, bytes);  // logs the refusal
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // Pools may have released memory at a synchronize since they were last
  // read: before refusing, read them all again (design §2, "before a refusal").
  if (!try_charge(dev, reserve)) {
    for (auto& other : g_pools)
      if (other.pool && other.index == dev.index) settle(other);
    if (!charge(dev, reserve, bytes)) {
      pthread_mutex_unlock(&g_pool_mu);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  p->charged += reserve;
  const CUresult r = call();
  settle(*p);
  pthread_mutex_unlock(&g_pool_mu);
  if (r == CUDA_SUCCESS && dptr) {
    Record rec;
    rec.space = Space::pointer;
    rec.kind = Kind::pool;
    rec.index = static_cast<std::int16_t>(dev.index);
    rec.key = *dptr;
    rec.handle = reinterpret_cast<std::uint64_t>(pool);
    insert(rec);  // bytes 0: the pool's reservation carries the charge
  }
  return r;
}

CUresult current_pool(CUdevice& ordinal, CUmemoryPool& pool) {
  static DriverFn<DeviceGetPool> lookup_get_current{"cuDeviceGetMemPool"};
  const auto get_current = lookup_get_current();
  if (!current_device(ordinal) || !get_current) return CUDA_ERROR_NOT_INITIALIZED;
  return get_current(&pool, ordinal);
}

template <class Call>
CUresult alloc_async(CUdeviceptr* dptr, std::size_t bytes, Call&& call) {
  CUdevice ordinal = 0;
  CUmemoryPool pool = nullptr;
  if (!enabled() || current_pool(ordinal, pool) != CUDA_SUCCESS) return call();
  return pool_allocate(pool, ordinal, bytes, call, dptr);
}

template <class Call>
CUresult alloc_from_pool(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, Call&& call) {
  CUdevice ordinal = 0;
  if (!enabled() || !pool_device(pool, ordinal)) return call();
  return pool_allocate(pool, ordinal, bytes, call, dptr);
}

// A free of any device pointer: context-bound ones are uncharged; pool ones
// refresh their pool; unknown ones (allocated before the library, imported)
// change nothing.
template <class Call>
CUresult free_pointer(CUdeviceptr p, Call&& call) {
  Record rec;
  const bool ours = enabled() && take(Space::pointer, p, rec);
  const CUresult r = call();
  if (!ours) return r;
  if (r != CUDA_SUCCESS) {
    insert(rec);
    return r;
  }
  if (rec.kind == Kind::pool) refresh_pools(rec.index, reinterpret_cast<CUmemoryPool>(rec.handle));
  else uncharge(rec.index, rec.bytes);
  return r;
}

// --------------------------------------------------------------- arrays

// Bytes per element of an array format ([CH] CUarray_format values); formats
// not listed (block-compressed, video) are counted at 16 bytes: an estimate
// that errs towards charging more.
std::uint64_t format_bytes(int format) {
  switch (format) {
    case 0x01: case 0x08: case 0xc0: case 0xc6: return 1;
    case 0x02: case 0x09: case 0x10: case 0xc1: case 0xc3: case 0xc7: case 0xc9: return 2;
    case 0x03: case 0x0a: case 0x20: case 0xc2: case 0xc4: case 0xc8: case 0xca: case 0x50: return 4;
    case 0xc5: case 0xcb: return 8;
    default: return 16;
  }
}

// Design §1: Width × max(Height,1) × max(Depth,1) × NumChannels × bytes of
// Format, rounded up to 2 MiB; nothing for sparse or deferred-mapping arrays.
std::uint64_t array_bytes(std::uint64_t w, std::uint64_t h, std::uint64_t d, int format, unsigned channels,
                          unsigned flags) {
  if (flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
  std::uint64_t b = mul(mul(mul(w, h ? h : 1), d ? d : 1), mul(channels, format_bytes(format)));
  return round_up(b, kGranule);
}

std::uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels) {
  if (desc.Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
  std::uint64_t total = 0, w = desc.Width, h = desc.Height, d = desc.Depth;
  for (unsigned l = 0; l < levels && l < 64; ++l) {
    const std::uint64_t level = mul(mul(mul(w, h ? h : 1), d ? d : 1), mul(desc.NumChannels, format_bytes(desc.Format)));
    total = total > UINT64_MAX - level ? UINT64_MAX : total + level;
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : h;
    d = d > 1 ? d / 2 : d;
  }
  return round_up(total, kGranule);
}

template <class Handle, class Call>
CUresult create_array(Handle* handle, std::uint64_t bytes, Call&& call) {
  CUdevice ordinal = 0;
  CUcontext ctx = nullptr;
  const Device dev = charged_device(ordinal, ctx);
  if (!dev.known || bytes == 0 || !handle) return call();
  return charge_and_call(dev, bytes, bytes, record_of(Space::array, Kind::context_bound, ctx), call,
                         [&] { return reinterpret_cast<std::uint64_t>(*handle); });
}

template <class Call>
CUresult destroy_array(std::uint64_t key, Call&& call) {
  Record rec;
  const bool ours = enabled() && take(Space::array, key, rec);
  const CUresult r = call();
  if (!ours) return r;
  if (r != CUDA_SUCCESS) insert(rec);
  else uncharge(rec.index, rec.bytes);
  return r;
}

// --------------------------------------------------------------- memory info

// Design §3: total = quota, free = min(real free, quota - container usage);
// NULL outputs untouched; never an error because usage is high.
template <class T>
void report(T* free, T* total) {
  CUdevice ordinal = 0;
  const Device dev = charged_device(ordinal);
  if (!dev.known) return;
  std::uint64_t quota = 0, room = 0;
  if (dev.index >= 0) {
    refresh_pools(dev.index);
    quota = dev.quota;
    const std::uint64_t used = usage(dev.index);
    room = quota > used ? quota - used : 0;
  }
  constexpr std::uint64_t kMax = static_cast<T>(~T{0});
  if (free) *free = static_cast<T>(room < *free ? room : *free);
  if (total) *total = static_cast<T>(quota < kMax ? quota : kMax);
}

template <class T>
void report_total(T* bytes, CUdevice ordinal) {
  if (!bytes || !enabled()) return;
  const Device dev = device(ordinal);
  if (!dev.known) return;
  constexpr std::uint64_t kMax = static_cast<T>(~T{0});
  const std::uint64_t quota = dev.index >= 0 ? dev.quota : 0;
  *bytes = static_cast<T>(quota < kMax ? quota : kMax);
}

// --------------------------------------------------------------- contexts

void after_primary_release(CUdevice ordinal) {
  using GetState = CUresult (*)(CUdevice, unsigned*, int*);
  static DriverFn<GetState> lookup_get_state{"cuDevicePrimaryCtxGetState"};
  const auto get_state = lookup_get_state();
  unsigned flags = 0;
  int active = 1;
  // [CH] the last release resets the primary context, freeing its memory.
  if (get_state && get_state(ordinal, &flags, &active) == CUDA_SUCCESS && !active) {
    contexts_changed();
    if (CUcontext ctx = primary_of(ordinal)) reclaim_context(ctx);
  }
}

// [CH] a reset destroys the primary context's resources.
void after_primary_reset(CUdevice ordinal) {
  contexts_changed();
  if (CUcontext ctx = primary_of(ordinal)) reclaim_context(ctx);
}

// --------------------------------------------------------------- VMM

bool pick_mappings(const Record& r, const void* arg) {
  const auto* range = static_cast<const std::uint64_t*>(arg);
  return r.space == Space::mapping && r.key >= range[0] && r.key - range[0] < range[1];
}

// Drops one mapping or the release of a VMM handle; uncharges at the last.
void vmm_drop(std::uint64_t handle, bool release) {
  Record rec;
  if (!find(Space::handle, handle, rec)) return;
  if (release) rec.released = true;
  else if (rec.maps > 0) --rec.maps;
  if (rec.released && rec.maps == 0) {
    if (take(Space::handle, handle, rec)) uncharge(rec.index, rec.bytes);
  } else {
    update(rec);
  }
}

// NVML in the same process reports the slice too (design §3).
constexpr nvmlReturn_t kNvmlNotSupported = 3;  // [N] NVML_ERROR_NOT_SUPPORTED
using NvmlGetUuid = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);

Device nvml_device(nvmlDevice_t device) {
  static DriverFn<NvmlGetUuid> lookup_get_uuid{"nvmlDeviceGetUUID", true};
  const auto get_uuid = lookup_get_uuid();
  char uuid[96] = {};
  if (!enabled() || !get_uuid || get_uuid(device, uuid, sizeof uuid) != 0) return Device{};
  return device_by_uuid(uuid);
}

// Both NVML layouts have total, free and used; v2 also reserved (reported 0).
template <class Memory>
void report_nvml(nvmlDevice_t device, Memory* memory) {
  const Device dev = nvml_device(device);
  if (dev.index < 0) return;
  refresh_pools(dev.index);
  const std::uint64_t used = usage(dev.index);
  const std::uint64_t room = dev.quota > used ? dev.quota - used : 0;
  memory->total = dev.quota;
  memory->used = used;
  memory->free = room < memory->free ? room : memory->free;
  if constexpr (requires { memory->reserved; }) memory->reserved = 0;
}

}  // namespace

extern "C" {
#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, std::size_t bytesize) {
  auto driver = REAL(cuMemAlloc_v2);
  if (!driver) return missing();
  if (!dptr || bytesize == 0) return driver(dptr, bytesize);  // the driver's own INVALID_VALUE
  return allocate(bytesize, bytesize, [&] { return driver(dptr, bytesize); }, *dptr);
}

EXPORT CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytesize) {
  auto driver = REAL(cuMemAlloc);
  if (!driver) return missing();
  if (!dptr || bytesize == 0) return driver(dptr, bytesize);
  CUdeviceptr p = 0;
  return allocate(bytesize, bytesize, [&] {
    const CUresult r = driver(dptr, bytesize);
    p = *dptr;
    return r;
  }, p);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, std::size_t bytesize, unsigned int flags) {
  auto driver = REAL(cuMemAllocManaged);
  if (!driver) return missing();
  if (!dptr || bytesize == 0) return driver(dptr, bytesize, flags);
  return allocate(bytesize, bytesize, [&] { return driver(dptr, bytesize, flags); }, *dptr);
}

// Pitch: reserve Width × Height, then settle at the pitch the driver chose.
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, std::size_t* pPitch, std::size_t WidthInBytes, std::size_t Height,
                                   unsigned int ElementSizeBytes) {
  auto driver = REAL(cuMemAllocPitch_v2);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); };
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0) return call();
  const std::uint64_t asked = mul(WidthInBytes, Height);
  CUdevice ordinal = 0;
  CUcontext ctx = nullptr;
  const Device dev = charged_device(ordinal, ctx);
  if (!dev.known) return call();
  const CUresult r = charge_and_call(dev, asked, asked, record_of(Space::pointer, Kind::context_bound, ctx), call,
                                     [&] { return *dptr; });
  if (r != CUDA_SUCCESS) return r;
  const std::uint64_t actual = mul(*pPitch, Height);
  if (actual <= asked) {
    Record rec;
    if (actual < asked && find(Space::pointer, *dptr, rec)) {
      uncharge(rec.index, asked - actual);
      rec.bytes = actual;
      update(rec);
    }
    return r;
  }
  Record rec;
  if (charge(dev, actual - asked, actual)) {
    if (find(Space::pointer, *dptr, rec)) {
      rec.bytes = actual;
      update(rec);
    }
    return r;
  }
  // Past the quota once padded: free it and refuse.
  auto release = REAL(cuMemFree_v2);
  if (take(Space::pointer, *dptr, rec)) uncharge(rec.index, rec.bytes);
  if (release) release(*dptr);
  *dptr = 0;
  return CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pPitch, unsigned int WidthInBytes, unsigned int Height,
                                unsigned int ElementSizeBytes) {
  auto driver = REAL(cuMemAllocPitch);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); };
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0) return call();
  // The 32-bit ABI: charge the padded size the driver may choose at most
  // (pitch rounds the width up; counted as the width plus 512 bytes per row).
  const std::uint64_t bound = mul(static_cast<std::uint64_t>(WidthInBytes) + 512, Height);
  CUdeviceptr p = 0;
  const CUresult r = allocate(bound, mul(WidthInBytes, Height), [&] {
    const CUresult rr = call();
    p = *dptr;
    return rr;
  }, p);
  Record rec;
  if (r == CUDA_SUCCESS && find(Space::pointer, p, rec)) {
    const std::uint64_t actual = mul(*pPitch, Height);
    if (actual < rec.bytes) {
      uncharge(rec.index, rec.bytes - actual);
      rec.bytes = actual;
      update(rec);
    }
  }
  return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  auto driver = REAL(cuMemFree_v2);
  if (!driver) return missing();
  return free_pointer(dptr, [&] { return driver(dptr); });
}

EXPORT CUresult cuMemFree(unsigned int dptr) {
  auto driver = REAL(cuMemFree);
  if (!driver) return missing();
  return free_pointer(dptr, [&] { return driver(dptr); });
}

EXPORT CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total) {
  return forward(REAL(cuMemGetInfo_v2), [&] { report(free, total); }, free, total);
}

EXPORT CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  return forward(REAL(cuMemGetInfo), [&] { report(free, total); }, free, total);
}

EXPORT CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  return forward(REAL(cuDeviceTotalMem_v2), [&] { report_total(bytes, dev); }, bytes, dev);
}

EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  return forward(REAL(cuDeviceTotalMem), [&] { report_total(bytes, dev); }, bytes, dev);
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  return forward(REAL(cuCtxDestroy_v2), [&] {
    if (enabled()) reclaim_context(ctx);
  }, ctx);
}

EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  return forward(REAL(cuCtxDestroy), [&] {
    if (enabled()) reclaim_context(ctx);
  }, ctx);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return forward(REAL(cuDevicePrimaryCtxRetain), [&] {
    if (pctx) note_primary(dev, *pctx);
  }, pctx, dev);
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return forward(REAL(cuDevicePrimaryCtxRelease), [&] {
    if (enabled()) after_primary_release(dev);
  }, dev);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return forward(REAL(cuDevicePrimaryCtxRelease_v2), [&] {
    if (enabled()) after_primary_release(dev);
  }, dev);
}

EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return forward(REAL(cuDevicePrimaryCtxReset), [&] {
    if (enabled()) after_primary_reset(dev);
  }, dev);
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return forward(REAL(cuDevicePrimaryCtxReset_v2), [&] {
    if (enabled()) after_primary_reset(dev);
  }, dev);
}

// VMM: charged at create on a device location, uncharged when the handle is
// released and its last mapping is unmapped ([CH] cuMemRelease, cuMemUnmap).
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                            unsigned long long flags) {
  auto driver = REAL(cuMemCreate);
  if (!driver) return missing();
  auto call = [&] { return driver(handle, size, prop, flags); };
  if (!enabled() || !handle || !prop || size == 0 || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return call();
  const Device dev = device(prop->location.id);
  if (!dev.known) return call();
  return charge_and_call(dev, size, size, record_of(Space::handle, Kind::vmm), call, [&] { return *handle; });
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return forward(REAL(cuMemRelease), [&] {
    if (enabled()) vmm_drop(handle, true);
  }, handle);
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {
  auto driver = REAL(cuMemMap);
  if (!driver) return missing();
  const CUresult r = driver(ptr, size, offset, handle, flags);
  Record vmm;
  if (r != CUDA_SUCCESS || !enabled() || !find(Space::handle, handle, vmm)) return r;
  ++vmm.maps;
  update(vmm);
  Record map;
  map.space = Space::mapping;
  map.kind = Kind::mapping;
  map.key = ptr;
  map.bytes = size;
  map.handle = handle;
  insert(map);
  return r;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, std::size_t size) {
  auto driver = REAL(cuMemUnmap);
  if (!driver) return missing();
  const CUresult r = driver(ptr, size);
  if (r != CUDA_SUCCESS || !enabled()) return r;
  // [CH] the range may span several mappings; each one ends here.
  const std::uint64_t range[2] = {ptr, size};
  Record maps[64];
  for (;;) {
    const std::size_t n = take_if(pick_mappings, range, maps, 64);
    for (std::size_t i = 0; i < n; ++i) vmm_drop(maps[i].handle, false);
    if (n < 64) break;
  }
  return r;
}

EXPORT CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  auto driver = REAL(cuArrayCreate_v2);
  if (!driver) return missing();
  const std::uint64_t bytes = desc ? array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels, 0) : 0;
  return create_array(pHandle, bytes, [&] { return driver(pHandle, desc); });
}

EXPORT CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  auto driver = REAL(cuArrayCreate);
  if (!driver) return missing();
  const std::uint64_t bytes = desc ? array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels, 0) : 0;
  return create_array(pHandle, bytes, [&] { return driver(pHandle, desc); });
}

EXPORT CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  auto driver = REAL(cuArray3DCreate_v2);
  if (!driver) return missing();
  const std::uint64_t bytes =
      desc ? array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, desc->Flags) : 0;
  return create_array(pHandle, bytes, [&] { return driver(pHandle, desc); });
}

EXPORT CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  auto driver = REAL(cuArray3DCreate);
  if (!driver) return missing();
  const std::uint64_t bytes =
      desc ? array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, desc->Flags) : 0;
  return create_array(pHandle, bytes, [&] { return driver(pHandle, desc); });
}

EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  auto driver = REAL(cuArrayDestroy);
  if (!driver) return missing();
  return destroy_array(reinterpret_cast<std::uint64_t>(hArray), [&] { return driver(hArray); });
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                       unsigned int numMipmapLevels) {
  auto driver = REAL(cuMipmappedArrayCreate);
  if (!driver) return missing();
  const std::uint64_t bytes = desc ? mipmap_bytes(*desc, numMipmapLevels) : 0;
  return create_array(pHandle, bytes, [&] { return driver(pHandle, desc, numMipmapLevels); });
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  auto driver = REAL(cuMipmappedArrayDestroy);
  if (!driver) return missing();
  return destroy_array(reinterpret_cast<std::uint64_t>(hMipmappedArray), [&] { return driver(hMipmappedArray); });
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream) {
  auto driver = REAL(cuMemAllocAsync);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, bytesize, hStream); };
  if (!dptr || bytesize == 0) return call();
  return alloc_async(dptr, bytesize, call);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream) {
  auto driver = REAL(cuMemAllocAsync_ptsz);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, bytesize, hStream); };
  if (!dptr || bytesize == 0) return call();
  return alloc_async(dptr, bytesize, call);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  auto driver = REAL(cuMemAllocFromPoolAsync);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, bytesize, pool, hStream); };
  if (!dptr || bytesize == 0 || !pool) return call();
  return alloc_from_pool(dptr, bytesize, pool, call);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
  auto driver = REAL(cuMemAllocFromPoolAsync_ptsz);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, bytesize, pool, hStream); };
  if (!dptr || bytesize == 0 || !pool) return call();
  return alloc_from_pool(dptr, bytesize, pool, call);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  auto driver = REAL(cuMemFreeAsync);
  if (!driver) return missing();
  return free_pointer(dptr, [&] { return driver(dptr, hStream); });
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  auto driver = REAL(cuMemFreeAsync_ptsz);
  if (!driver) return missing();
  return free_pointer(dptr, [&] { return driver(dptr, hStream); });
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  auto driver = REAL(cuMemPoolCreate);
  if (!driver) return missing();
  const CUresult r = driver(pool, poolProps);
  if (r != CUDA_SUCCESS || !enabled() || !pool || !poolProps ||
      poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return r;
  const Device dev = device(poolProps->location.id);
  if (!dev.known || dev.index < 0) return r;
  pthread_mutex_lock(&g_pool_mu);
  pool_entry(*pool, poolProps->location.id, dev.index);
  pthread_mutex_unlock(&g_pool_mu);
  return r;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, std::size_t minBytesToKeep) {
  return forward(REAL(cuMemPoolTrimTo), [&] {
    if (enabled()) refresh_pools(-1);
  }, pool, minBytesToKeep);
}

// [CH] a pool destroyed with outstanding allocations frees them later; its
// charge is returned now (the pool can no longer be read).
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  auto driver = REAL(cuMemPoolDestroy);
  if (!driver) return missing();
  const CUresult r = driver(pool);
  if (r != CUDA_SUCCESS || !enabled()) return r;
  pthread_mutex_lock(&g_pool_mu);
  for (auto& p : g_pools)
    if (p.pool == pool) {
      uncharge(p.index, p.charged);
      p = Pool{};
    }
  pthread_mutex_unlock(&g_pool_mu);
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  auto driver = REAL(nvmlDeviceGetMemoryInfo);
  if (!driver) return kNvmlNotSupported;
  const nvmlReturn_t r = driver(device, memory);
  if (r == 0 && memory) report_nvml(device, memory);
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  auto driver = REAL(nvmlDeviceGetMemoryInfo_v2);
  if (!driver) return kNvmlNotSupported;
  const nvmlReturn_t r = driver(device, memory);
  if (r == 0 && memory) report_nvml(device, memory);
  return r;
}

}  // extern "C"
