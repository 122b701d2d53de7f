// The wrappers: charge before the driver allocates, uncharge after it frees,
// report the slice (docs/design-memory-quotas.md §1 table, §3). Each one is
// exported under the driver's exact name and ABI (cuda_abi.hpp) and forwards
// to the driver's function for that same variant (REAL). With the library off
// (no quota in the environment) every wrapper only forwards.
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cuda_quota/entry_points.hpp"
#include "cuda_quota/ledger.hpp"
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

// Frees under way, for the measurements (design §7, "measured"): the bytes
// this process's frees of known size have started, and finished, handing
// back to the driver on each ledger device. A measurement of the driver's
// free memory across a load or a context's creation adds back what was
// started by its end and not finished by its start: a free by another thread
// in between can make it charge more (returned with what it charged), never
// less than the driver took. A process with a ledger slot counts its frees in
// the ledger instead, where every process of the container sees them
// (Ledger::release_begin): another process's frees are added back alike.
std::atomic<std::uint64_t> g_releases_started[kMaxDevices];
std::atomic<std::uint64_t> g_releases_finished[kMaxDevices];

bool ledger_index(int index) { return index >= 0 && static_cast<std::size_t>(index) < kMaxDevices; }

// One free's bytes, under way while it lives (around the driver's call).
class Releasing {
 public:
  Releasing() = default;
  Releasing(int index, std::uint64_t bytes) { start(index, bytes); }
  // Once, on one made without a free.
  void start(int index, std::uint64_t bytes) {
    index_ = index;
    bytes_ = bytes;
    if (!bytes_ || !ledger_index(index_)) return;
    shared_ = ledger_release_begin(index_, bytes_);
    if (!shared_) g_releases_started[index_].fetch_add(bytes_);
  }
  ~Releasing() { end(); }
  // As soon as the driver's call returns: a measurement that starts after the memory came back
  // and finds it still under way charges it again.
  void end() {
    if (!bytes_ || !ledger_index(index_)) return;
    if (shared_) ledger_release_end(index_, bytes_);
    else g_releases_finished[index_].fetch_add(bytes_);
    bytes_ = 0;
  }
  Releasing(const Releasing&) = delete;
  Releasing& operator=(const Releasing&) = delete;

 private:
  int index_ = -1;
  std::uint64_t bytes_ = 0;
  bool shared_ = false;
};

// What a context holds (its context-bound records, on each ledger device), under way while
// this lives or until end(): around a call that frees the context.
class ReleasingContext {
 public:
  explicit ReleasingContext(CUcontext ctx) {
    if (!ctx) return;
    std::uint64_t bytes[kMaxDevices] = {};
    context_bytes(ctx, bytes);
    for (std::size_t i = 0; i < kMaxDevices; ++i) each_[i].start(static_cast<int>(i), bytes[i]);
  }
  void end() {
    for (auto& one : each_) one.end();
  }

 private:
  Releasing each_[kMaxDevices];
};

// A measurement on ledger device `index`, opened before its first read of the
// driver's free memory.
class Measurement {
 public:
  explicit Measurement(int index = -1)
      : index_(index),
        finished_(ledger_index(index) ? g_releases_finished[index].load() : 0),
        shared_(ledger_index(index) ? ledger_releases(index) : Ledger::Releases{}) {}
  // What the driver took between free memory `before` and `after` (read in
  // that order, both after this was made): the drop, plus what the
  // container's frees may have handed back meanwhile: this process's begun
  // by now and not finished when this was made, and the ledger's begun since
  // then or under way then.
  std::uint64_t taken(std::uint64_t before, std::uint64_t after) const {
    std::uint64_t back = 0;
    if (ledger_index(index_)) {
      back = g_releases_started[index_].load() - finished_;
      back += ledger_releases(index_).begun - shared_.begun + shared_.under_way;
    }
    return before + back > after ? before + back - after : 0;
  }

 private:
  int index_;
  std::uint64_t finished_;
  Ledger::Releases shared_;
};

// A forked child has only the forking thread: none of its parent's frees is under way.
void releases_after_fork_child() {
  for (std::size_t i = 0; i < kMaxDevices; ++i) g_releases_finished[i].store(g_releases_started[i].load());
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
  std::uint32_t live = 0;  // allocations made from it and not yet freed
  // cuMemPoolDestroy'd with allocations outstanding: [CH] "the resources
  // associated with the pool will be released automatically once there are
  // no more outstanding allocations", so the charge stays until the last free.
  bool destroyed = false;
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
    if (p.pool == pool && !p.destroyed) return &p;
    if (!p.pool && !spare) spare = &p;
  }
  if (!spare) return nullptr;
  *spare = Pool{pool, index, ordinal, 0, 0, false};
  return spare;
}

std::uint64_t used(CUmemoryPool pool, bool& ok) {
  static DriverFn<PoolGetAttribute> lookup_get{"cuMemPoolGetAttribute"};
  const auto get = lookup_get();
  cuuint64_t value = 0;
  ok = get && get(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value) == CUDA_SUCCESS;
  return value;
}

// Settles a pool's charge to what it reserves now. Growth beyond what was
// charged for it is charged too when the quota allows; false (after the
// refusal's log line) when it does not.
bool settle(Pool& p) {
  bool ok = false;
  const std::uint64_t now = reserved(p.pool, ok);
  if (!ok) return true;
  if (now < p.charged) {
    uncharge(p.index, p.charged - now);
    p.charged = now;
  } else if (now > p.charged) {
    Device dev;
    dev.known = true;
    dev.index = p.index;
    if (!charge(dev, now - p.charged, now - p.charged)) return false;
    p.charged = now;
  }
  return true;
}

// Re-reads the pools of ledger device `index` (all with -1), or only `pool`.
void refresh_pools(int index, CUmemoryPool pool = nullptr) {
  pthread_mutex_lock(&g_pool_mu);
  for (auto& p : g_pools)
    if (p.pool && !p.destroyed && (pool ? p.pool == pool : (index < 0 || p.index == index))) settle(p);
  pthread_mutex_unlock(&g_pool_mu);
}

// One allocation of `pool` was freed: a live pool's reservation is read
// again; a destroyed pool's charge goes with its last allocation.
void pool_freed(CUmemoryPool pool) {
  pthread_mutex_lock(&g_pool_mu);
  for (auto& p : g_pools) {
    if (p.pool != pool) continue;  // a destroyed pool's entry lives only while it has allocations
    if (p.live > 0) --p.live;
    if (!p.destroyed) {
      settle(p);
    } else if (p.live == 0) {
      uncharge(p.index, p.charged);
      p = Pool{};
    }
    break;
  }
  pthread_mutex_unlock(&g_pool_mu);
}

// The device a pool lives on: one this process created (cuMemPoolCreate) or a
// device's default or current pool; else the current device.
bool pool_device(CUmemoryPool pool, CUdevice& ordinal) {
  pthread_mutex_lock(&g_pool_mu);
  for (auto& p : g_pools)
    if (p.pool == pool && !p.destroyed) {
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

using FreeAsync = CUresult (*)(CUdeviceptr, CUstream);
using StreamFn = CUresult (*)(CUstream);
using PoolTrim = CUresult (*)(CUmemoryPool, std::size_t);
using StreamIsCapturing = CUresult (*)(CUstream, int*);
using StreamGetDevice = CUresult (*)(CUstream, CUdevice*);
using StreamGetCtx = CUresult (*)(CUstream, CUcontext*);
using CtxPush = CUresult (*)(CUcontext);
using CtxPop = CUresult (*)(CUcontext*);
using CtxGetDevice = CUresult (*)(CUdevice*);

// [CH] the handles NULL, CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2)
// name the current context's default streams; every other one its own.
bool special_stream(CUstream s) { return reinterpret_cast<std::uintptr_t>(s) <= 2; }
CUstream kPerThreadStream = reinterpret_cast<CUstream>(0x2);

// The stream a _ptsz call's NULL names, for the legacy functions the library calls itself.
CUstream effective_stream(CUstream s, bool ptsz) { return ptsz && !s ? kPerThreadStream : s; }

bool capturing(CUstream s) {
  static DriverFn<StreamIsCapturing> lookup{"cuStreamIsCapturing"};
  const auto f = lookup();
  int status = 0;  // [CH] CU_STREAM_CAPTURE_STATUS_NONE 0, ACTIVE 1, INVALIDATED 2
  return f && f(s, &status) == CUDA_SUCCESS && status != 0;
}

// The device whose memory a stream-ordered call on `s` takes ([CH]: "the pool
// current to the stream's device"), not necessarily the current context's.
bool stream_device(CUstream s, CUdevice& ordinal) {
  if (special_stream(s)) return current_device(ordinal);
  static DriverFn<StreamGetDevice> lookup_device{"cuStreamGetDevice"};  // 12080
  if (const auto f = lookup_device(); f && f(s, &ordinal) == CUDA_SUCCESS) return true;
  static DriverFn<StreamGetCtx> lookup_ctx{"cuStreamGetCtx"};  // 9020
  const auto get_ctx = lookup_ctx();
  CUcontext ctx = nullptr;
  if (!get_ctx || get_ctx(s, &ctx) != CUDA_SUCCESS || !ctx) return false;
  if (device_of_context(ctx, ordinal)) return true;
  static DriverFn<CtxPush> lookup_push{"cuCtxPushCurrent_v2"};
  static DriverFn<CtxPop> lookup_pop{"cuCtxPopCurrent_v2"};
  static DriverFn<CtxGetDevice> lookup_get{"cuCtxGetDevice"};
  const auto push = lookup_push();
  const auto pop = lookup_pop();
  const auto get = lookup_get();
  if (!push || !pop || !get || push(ctx) != CUDA_SUCCESS) return false;
  const bool ok = get(&ordinal) == CUDA_SUCCESS;
  CUcontext popped = nullptr;
  pop(&popped);
  return ok;
}

// Whether `bytes` more fit in what the pool already reserves: such an
// allocation takes no new memory, so a full quota is no reason to refuse it.
bool fits_in_pool(CUmemoryPool pool, std::uint64_t bytes) {
  bool ok_r = false, ok_u = false;
  const std::uint64_t r = reserved(pool, ok_r), u = used(pool, ok_u);
  return ok_r && ok_u && r >= u && r - u >= bytes;
}

// Gives back what an allocation made the pool grow by: its own reserve
// uncharged, the allocation freed on its stream, the stream synchronised so
// that the free has happened, the pool trimmed to what it was charged before
// (not counting that reserve: the driver releases whole steps, and a step
// kept for a part of it would stay reserved, uncharged, whatever the pool's
// release threshold). Where the pool still holds more than its charge, it
// is trimmed of every free byte. Caller holds g_pool_mu.
void hand_back(Pool& p, CUdeviceptr ptr, CUstream stream, std::uint64_t reserve) {
  static DriverFn<FreeAsync> lookup_free{"cuMemFreeAsync"};
  static DriverFn<StreamFn> lookup_sync{"cuStreamSynchronize"};
  static DriverFn<PoolTrim> lookup_trim{"cuMemPoolTrimTo"};
  const std::uint64_t own = reserve < p.charged ? reserve : p.charged;
  uncharge(p.index, own);
  p.charged -= own;
  if (const auto f = lookup_free()) f(ptr, stream);
  if (const auto f = lookup_sync()) f(stream);
  const auto trim = lookup_trim();
  if (trim) trim(p.pool, p.charged);
  if (!settle(p) && trim) {
    trim(p.pool, 0);
    settle(p);
  }
}

// The device's current pool, read under g_pool_mu: cuDeviceSetMemPool takes
// that lock too, so the pool read here is the one the driver allocates from
// (a switch by another thread waits until the allocation is settled).
bool current_pool(CUdevice ordinal, CUmemoryPool& pool) {
  static DriverFn<DeviceGetPool> lookup_get_current{"cuDeviceGetMemPool"};
  const auto get_current = lookup_get_current();
  return get_current && get_current(&pool, ordinal) == CUDA_SUCCESS;
}

// `pool` null: the device's current pool, read under the lock.
template <class Call>
CUresult pool_allocate(CUmemoryPool pool, CUdevice ordinal, std::size_t bytes, CUstream stream, Call&& call,
                       CUdeviceptr* dptr) {
  const Device dev = device(ordinal);
  if (!dev.known) return call();
  const std::uint64_t reserve = round_up(bytes, kGranule);
  pthread_mutex_lock(&g_pool_mu);
  if (!pool && !current_pool(ordinal, pool)) {
    pthread_mutex_unlock(&g_pool_mu);
    return call();
  }
  Pool* p = dev.index >= 0 ? pool_entry(pool, ordinal, dev.index) : nullptr;
  if (!p) {
    pthread_mutex_unlock(&g_pool_mu);
    if (dev.index >= 0) log(Level::error, "more than %d memory pools in one process; refusing", kMaxPools);
    charge(Device{true, -1, 0}, reserve, bytes);  // logs the refusal
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // The growth this allocation may cause is charged before the driver is
  // called. Pools may have released memory at a synchronize since they were
  // last read: before refusing, read them all again (design §2, "before a
  // refusal"). No charge is needed where the pool already holds the room, or
  // under stream capture (the graph's memory is charged when it is mapped).
  std::uint64_t pre = 0;
  if (try_charge(dev, reserve)) {
    pre = reserve;
  } else {
    for (auto& other : g_pools)
      if (other.pool && !other.destroyed && other.index == dev.index) settle(other);
    if (try_charge(dev, reserve)) {
      pre = reserve;
    } else if (!fits_in_pool(pool, bytes) && !capturing(stream)) {
      charge(dev, reserve, bytes);  // logs the refusal
      pthread_mutex_unlock(&g_pool_mu);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  p->charged += pre;
  const CUresult r = call();
  // The pool may have grown by more than the request (its own step): that is
  // charged too, or the allocation is given back and refused.
  if (!settle(*p) && r == CUDA_SUCCESS && dptr) {
    hand_back(*p, *dptr, stream, pre);
    pthread_mutex_unlock(&g_pool_mu);
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r == CUDA_SUCCESS && dptr) ++p->live;
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

template <class Call>
CUresult alloc_async(CUdeviceptr* dptr, std::size_t bytes, CUstream stream, bool ptsz, Call&& call) {
  CUdevice ordinal = 0;
  if (!enabled() || !stream_device(stream, ordinal)) return call();
  return pool_allocate(nullptr, ordinal, bytes, effective_stream(stream, ptsz), call, dptr);
}

template <class Call>
CUresult alloc_from_pool(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, CUstream stream, bool ptsz,
                         Call&& call) {
  CUdevice ordinal = 0;
  if (!enabled() || !pool_device(pool, ordinal)) return call();
  return pool_allocate(pool, ordinal, bytes, effective_stream(stream, ptsz), call, dptr);
}

// --------------------------------------------------------------- graphs

// Graph memory ([CH] graph memory nodes): an executable graph's allocation
// nodes take memory from the device's graph pool when it is uploaded or
// launched (or instantiated with the UPLOAD flag), and keep it until the exec
// is destroyed or the device's graph memory is trimmed. Each device's charge
// is its CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, settled after every call
// that can change it; an exec's allocation bytes (read from its graph's nodes
// at instantiation: explicit nodes, cuGraphAddNode and stream capture alike)
// are charged before the call that maps them, so one past the quota is
// refused before it runs. Under g_pool_mu.
std::uint64_t g_graph_charged[kMaxDevices];
std::atomic<bool> g_graphs{false};  // some exec with allocation nodes exists

// A forked child is a new driver client (as quota.cpp's table): none of its
// parent's pools or graph memory is its own. Kept, the parent's graph charge
// would read as the child's, and the child's own graph memory, settled
// against it, would go uncharged.
void pools_after_fork_child() {
  pthread_mutex_init(&g_pool_mu, nullptr);
  for (auto& p : g_pools) p = Pool{};
  for (auto& c : g_graph_charged) c = 0;
  g_graphs.store(false, std::memory_order_relaxed);
  releases_after_fork_child();
}

__attribute__((constructor)) void register_pools_fork_handler() { pthread_atfork(nullptr, nullptr, pools_after_fork_child); }

using GraphMemAttribute = CUresult (*)(CUdevice, int, void*);
using GraphGetNodes = CUresult (*)(CUgraph, CUgraphNode*, std::size_t*);
using GraphNodeGetType = CUresult (*)(CUgraphNode, int*);
using GraphMemAllocNodeGetParams = CUresult (*)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS*);

// Caller holds g_pool_mu.
void settle_graph(int index) {
  static DriverFn<GraphMemAttribute> lookup{"cuDeviceGetGraphMemAttribute"};
  const auto get = lookup();
  const CUdevice ordinal = ordinal_of(index);
  cuuint64_t now = 0;
  if (!get || ordinal < 0 || get(ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now) != CUDA_SUCCESS) return;
  std::uint64_t& charged = g_graph_charged[index];
  if (now < charged) {
    uncharge(index, charged - now);
    charged = now;
  } else if (now > charged) {
    Device dev{true, index, 0};
    if (charge(dev, now - charged, now - charged)) charged = now;  // mapped outside our sight: charged late
  }
}

void refresh_graphs(int index) {
  if (!g_graphs.load(std::memory_order_relaxed)) return;
  pthread_mutex_lock(&g_pool_mu);
  for (int i = 0; i < device_count(); ++i)
    if (index < 0 || i == index) settle_graph(i);
  pthread_mutex_unlock(&g_pool_mu);
}

struct GraphNeed {
  std::uint64_t bytes[kMaxDevices] = {};
  bool any = false;
  // Bytes of allocation nodes on a visible device no quota names: such a
  // device refuses every allocation, a graph's too.
  std::uint64_t unquoted = 0;
};

// The allocation nodes of `graph`, per ledger device.
bool graph_needs(CUgraph graph, GraphNeed& need) {
  static DriverFn<GraphGetNodes> lookup_nodes{"cuGraphGetNodes"};
  static DriverFn<GraphNodeGetType> lookup_type{"cuGraphNodeGetType"};
  static DriverFn<GraphMemAllocNodeGetParams> lookup_params{"cuGraphMemAllocNodeGetParams"};
  const auto get_nodes = lookup_nodes();
  const auto get_type = lookup_type();
  const auto get_params = lookup_params();
  std::size_t count = 0;
  if (!get_nodes || !get_type || !get_params || get_nodes(graph, nullptr, &count) != CUDA_SUCCESS) return false;
  if (count == 0) return true;
  auto* nodes = static_cast<CUgraphNode*>(calloc(count, sizeof(CUgraphNode)));
  if (!nodes) return false;
  std::size_t got = count;
  bool ok = get_nodes(graph, nodes, &got) == CUDA_SUCCESS;
  for (std::size_t i = 0; ok && i < got && i < count; ++i) {
    int type = -1;
    if (!nodes[i] || get_type(nodes[i], &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) continue;
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    if (get_params(nodes[i], &params) != CUDA_SUCCESS) continue;
    const Device dev = device(params.poolProps.location.id);
    const std::uint64_t b = round_up(params.bytesize, kGranule);
    if (dev.known && dev.index < 0) {
      need.unquoted = need.unquoted > UINT64_MAX - b ? UINT64_MAX : need.unquoted + b;
      need.any = true;
      continue;
    }
    if (dev.index < 0) continue;
    std::uint64_t& total = need.bytes[dev.index];
    total = total > UINT64_MAX - b ? UINT64_MAX : total + b;
    need.any = true;
  }
  free(nodes);
  return ok;
}

std::uint64_t exec_key(CUgraphExec exec, int index) {
  return reinterpret_cast<std::uint64_t>(exec) ^ (static_cast<std::uint64_t>(index) << 56);
}

// Charges the bytes `need` maps (retrying after reading the graph pools
// again); false after undoing what it took and logging the refusal. Caller
// holds g_pool_mu.
bool charge_mapping(const GraphNeed& need) {
  for (int i = 0; i < device_count(); ++i) {
    if (!need.bytes[i]) continue;
    const Device dev{true, i, 0};
    bool ok = try_charge(dev, need.bytes[i]);
    if (!ok) {
      settle_graph(i);
      ok = try_charge(dev, need.bytes[i]);
    }
    if (!ok) {
      charge(dev, need.bytes[i], need.bytes[i]);  // logs the refusal
      for (int j = 0; j < i; ++j)
        if (need.bytes[j]) {
          uncharge(j, need.bytes[j]);
          g_graph_charged[j] -= need.bytes[j];
        }
      return false;
    }
    g_graph_charged[i] += need.bytes[i];
  }
  return true;
}

void settle_mapping(const GraphNeed& need) {
  for (int i = 0; i < device_count(); ++i)
    if (need.bytes[i]) settle_graph(i);
}

template <class Call>
CUresult instantiate(CUgraphExec* exec, CUgraph graph, bool upload, Call&& call) {
  GraphNeed need;
  if (!enabled() || !exec || !graph || !graph_needs(graph, need) || !need.any) return call();
  if (need.unquoted) {
    charge(Device{true, -1, 0}, need.unquoted, need.unquoted);  // refused, and logged
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&g_pool_mu);
  if (upload && !charge_mapping(need)) {
    pthread_mutex_unlock(&g_pool_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = call();
  if (r == CUDA_SUCCESS) {
    g_graphs.store(true, std::memory_order_relaxed);
    for (int i = 0; i < device_count(); ++i) {
      if (!need.bytes[i]) continue;
      Record rec;
      rec.space = Space::graph;
      rec.kind = Kind::graph;
      rec.index = static_cast<std::int16_t>(i);
      rec.released = upload;  // mapped
      rec.key = exec_key(*exec, i);
      rec.bytes = need.bytes[i];
      rec.handle = reinterpret_cast<std::uint64_t>(*exec);
      insert(rec);
    }
  }
  if (upload) settle_mapping(need);  // a failed instantiation gives back what was charged for it
  pthread_mutex_unlock(&g_pool_mu);
  return r;
}

// cuGraphUpload and cuGraphLaunch: the first that maps an exec's memory
// charges it first.
template <class Call>
CUresult map_exec(CUgraphExec exec, Call&& call) {
  if (!enabled() || !g_graphs.load(std::memory_order_relaxed) || !exec) return call();
  GraphNeed need;
  Record recs[kMaxDevices];
  const int n = device_count();
  for (int i = 0; i < n; ++i)
    if (find(Space::graph, exec_key(exec, i), recs[i]) && !recs[i].released) {
      need.bytes[i] = recs[i].bytes;
      need.any = true;
    }
  if (!need.any) return call();  // a replay: its memory is mapped and charged
  pthread_mutex_lock(&g_pool_mu);
  if (!charge_mapping(need)) {
    pthread_mutex_unlock(&g_pool_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult r = call();
  if (r == CUDA_SUCCESS)
    for (int i = 0; i < n; ++i)
      if (need.bytes[i]) {
        recs[i].released = true;
        update(recs[i]);
      }
  settle_mapping(need);
  pthread_mutex_unlock(&g_pool_mu);
  return r;
}

bool pick_exec(const Record& r, const void* exec) {
  return r.space == Space::graph && r.handle == reinterpret_cast<std::uint64_t>(exec);
}

bool pick_graph_index(const Record& r, const void* index) {
  return r.space == Space::graph && r.index == *static_cast<const int*>(index);
}

// A free of any device pointer: context-bound ones are uncharged; pool ones
// refresh their pool; unknown ones (allocated before the library, imported)
// change nothing.
template <class Call>
CUresult free_pointer(CUdeviceptr p, Call&& call) {
  Record rec;
  const bool ours = enabled() && take(Space::pointer, p, rec);
  Releasing releasing(ours && rec.kind != Kind::pool ? rec.index : -1, rec.bytes);
  const CUresult r = call();
  if (!ours) {
    // Perhaps a graph's allocation: one its exec no longer holds is released now.
    if (r == CUDA_SUCCESS) refresh_graphs(-1);
    return r;
  }
  if (r != CUDA_SUCCESS) {
    insert(rec);
    return r;
  }
  if (rec.kind == Kind::pool) pool_freed(reinterpret_cast<CUmemoryPool>(rec.handle));
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

// What the driver allocates for a mipmapped array ([CH] cuMipmappedArrayCreate):
// numMipmapLevels clamped to [1, 1 + floor(log2(max(Width, Height, Depth)))]
// (0 still makes one level); each level its own allocation, rounded up to
// the granule; level i+1 halves each non-zero extent (minimum 1), except the
// Depth of a layered or cubemap array, which counts layers or faces and
// stays at every level.
std::uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels) {
  if (desc.Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
  std::uint64_t w = desc.Width, h = desc.Height, d = desc.Depth;
  unsigned most = 1;
  for (std::uint64_t largest = std::max({w, h, d}); largest >>= 1;) ++most;
  levels = std::clamp(levels, 1u, most);
  const bool layers = desc.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
  auto half = [](std::uint64_t v) { return v == 0 ? 0 : std::max<std::uint64_t>(v / 2, 1); };
  std::uint64_t total = 0;
  for (unsigned l = 0; l < levels; ++l) {
    const std::uint64_t level =
        round_up(mul(mul(mul(w, h ? h : 1), d ? d : 1), mul(desc.NumChannels, format_bytes(desc.Format))), kGranule);
    total = total > UINT64_MAX - level ? UINT64_MAX : total + level;
    w = half(w);
    h = half(h);
    if (!layers) d = half(d);
  }
  return total;
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
  Releasing releasing(ours ? rec.index : -1, rec.bytes);
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
    refresh_graphs(dev.index);
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

// A context's own memory and its modules' (design §7, built): charged at
// creation as the drop in the driver's own free memory across the call
// (cuMemGetInfo_v2 through a context of the same device that exists before
// the call: the calling thread's, the device's active primary one, or one
// this process created), returned with the context. A process's first
// context on a device has no such context to measure with. It is charged
// what one context of that device takes, measured once per container with
// scratch contexts and kept in the ledger (first_context_bytes); where that
// cannot be measured, the limits file's `context=` figure for the device
// (the node's default).

using MemGetInfo = CUresult (*)(std::size_t*, std::size_t*);
using PrimaryGetState = CUresult (*)(CUdevice, unsigned*, int*);
using CtxDestroyFn = CUresult (*)(CUcontext);
using PrimaryReleaseFn = CUresult (*)(CUdevice);
using ModuleUnloadFn = CUresult (*)(CUmodule);

bool primary_active(CUdevice ordinal) {
  static DriverFn<PrimaryGetState> lookup{"cuDevicePrimaryCtxGetState"};
  const auto get_state = lookup();
  unsigned flags = 0;
  int active = 0;
  return get_state && get_state(ordinal, &flags, &active) == CUDA_SUCCESS && active;
}

// The driver's free memory seen through `ctx` (pushed and popped unless current).
bool free_through(CUcontext ctx, bool is_current, std::uint64_t& out) {
  static DriverFn<MemGetInfo> lookup_info{"cuMemGetInfo_v2"};
  static DriverFn<CtxPush> lookup_push{"cuCtxPushCurrent_v2"};
  static DriverFn<CtxPop> lookup_pop{"cuCtxPopCurrent_v2"};
  const auto info = lookup_info();
  if (!info || !ctx) return false;
  std::size_t free = 0, total = 0;
  if (is_current) {
    if (info(&free, &total) != CUDA_SUCCESS) return false;
    out = free;
    return true;
  }
  const auto push = lookup_push();
  const auto pop = lookup_pop();
  if (!push || !pop || push(ctx) != CUDA_SUCCESS) return false;
  const bool ok = info(&free, &total) == CUDA_SUCCESS;
  CUcontext popped = nullptr;
  pop(&popped);
  out = free;
  return ok;
}

// The driver's free memory on `ordinal` through any context of it that
// exists now; false when there is none.
bool free_on(CUdevice ordinal, std::uint64_t& out) {
  CUdevice current_ordinal = -1;
  CUcontext ctx = nullptr;
  if (current(current_ordinal, ctx) && current_ordinal == ordinal) return free_through(ctx, true, out);
  if (primary_active(ordinal))
    if (CUcontext primary = primary_of(ordinal)) return free_through(primary, false, out);
  if (CUcontext other = context_on(ordinal, nullptr)) return free_through(other, false, out);
  return false;
}

// One context's own memory on `ordinal`, seen through `ctx` (a live context of
// that device) across creating and destroying a scratch context with the
// driver's own functions. False when it cannot be measured, or when the
// container's ledger moved meanwhile (another process of the container
// allocated or freed: the drop would be partly theirs).
bool probe_context(int index, CUdevice ordinal, CUcontext ctx, std::uint64_t& bytes) {
  const auto create = REAL(cuCtxCreate_v2);
  const auto destroy = REAL(cuCtxDestroy_v2);
  std::uint64_t before = 0, after = 0;
  const std::uint64_t charged = usage(index);
  const Measurement measurement(index);
  if (!create || !destroy || !free_through(ctx, false, before)) return false;
  CUcontext scratch = nullptr;
  if (create(&scratch, 0, ordinal) != CUDA_SUCCESS) return false;
  const bool ok = free_through(ctx, false, after);
  destroy(scratch);  // [CH] a destroyed current context is popped: the caller's stack is as it was
  if (!ok || usage(index) != charged) return false;
  bytes = measurement.taken(before, after);
  return true;
}

// What a process's first context on ledger device `index` is charged: the
// container's measurement. Without one, one process measures (the others
// of the container wait for it, up to about 4 s, so that a burst of starts is
// neither charged nothing nor measured 64 times at once): two probes that
// agree (a neighbour outside the container allocating during one of them
// makes them differ; up to three tries), kept for every later process. Where
// it cannot be measured, the node's figure.
std::uint64_t first_context_bytes(int index, CUdevice ordinal, CUcontext ctx) {
  std::uint64_t bytes = 0, again = 0;
  long pause_ns = 100000;  // between looks: 0.1 ms, doubling to 2 ms (no wake-up storm while the prober runs)
  for (int looks = 0; looks < 2000; ++looks) {
    switch (measured_context_size(index, bytes)) {
      case Ledger::ContextSize::measured:
        return bytes;
      case Ledger::ContextSize::probe:
        for (int tries = 0; tries < 3; ++tries)
          if (probe_context(index, ordinal, ctx, bytes) && probe_context(index, ordinal, ctx, again) && bytes == again) {
            note_context_size(index, bytes);
            return bytes;
          }
        abandon_context_probe(index);
        return first_context_charge(index);
      case Ledger::ContextSize::wait: {
        const timespec pause{0, pause_ns};
        nanosleep(&pause, nullptr);
        pause_ns = pause_ns < 1000000 ? pause_ns * 2 : 2000000;
        continue;
      }
      case Ledger::ContextSize::unavailable:
        return first_context_charge(index);
    }
  }
  return first_context_charge(index);
}

void log_refusal(const char* why) {
  static std::atomic<int> logged{0};
  if (logged.fetch_add(1) < 10) log(Level::error, "context refused: %s", why);
}

// cuDevicePrimaryCtxRetain and cuCtxCreate: refused when the limits cannot
// be enforced; the new context's memory charged, or the context undone and
// CUDA_ERROR_OUT_OF_MEMORY returned when it does not fit the quota.
template <class Call>
CUresult create_context(CUdevice ordinal, bool primary, CUcontext* pctx, Call&& call) {
  if (!enabled() || !pctx) return call();
  if (primary && primary_active(ordinal)) {  // a retain of a live primary context makes nothing new
    const CUresult r = call();
    if (r == CUDA_SUCCESS) note_primary(ordinal, *pctx);
    return r;
  }
  const Device dev = device(ordinal);
  if (const char* why = dev.known ? context_refusal() : nullptr) {
    log_refusal(why);
    return CUDA_ERROR_NOT_PERMITTED;
  }
  std::uint64_t before = 0;
  const Measurement measurement(dev.index);
  const bool measured = dev.index >= 0 && free_on(ordinal, before);
  const CUresult r = call();
  if (r != CUDA_SUCCESS) return r;
  const CUcontext ctx = *pctx;
  if (primary) note_primary(ordinal, ctx);
  else note_context(ctx, ordinal);
  if (dev.index < 0) return r;
  std::uint64_t bytes = 0, after = 0;
  if (!measured) {
    bytes = first_context_bytes(dev.index, ordinal, ctx);
  } else if (free_through(ctx, !primary, after)) {
    bytes = measurement.taken(before, after);
  }
  if (bytes == 0) return r;
  if (!charge(dev, bytes, bytes)) {
    if (primary) {
      if (auto release = REAL(cuDevicePrimaryCtxRelease_v2)) release(ordinal);
    } else {
      forget_context(ctx);
      if (auto destroy = REAL(cuCtxDestroy_v2)) destroy(ctx);
    }
    contexts_changed();
    *pctx = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Record rec = record_of(Space::context, Kind::context_bound, ctx);
  rec.index = static_cast<std::int16_t>(dev.index);
  rec.key = reinterpret_cast<std::uint64_t>(ctx);
  rec.bytes = bytes;
  insert(rec);
  return r;
}

// cuModuleLoad*: the code and data a module places on the device, measured
// across the load through the current context and returned at unload or
// with that context. (Libraries: load_library below.)
template <class Handle, class Unload, class Call>
CUresult load_code(Space space, Handle* out, Unload unload, Call&& call) {
  CUdevice ordinal = 0;
  CUcontext ctx = nullptr;
  const Device dev = charged_device(ordinal, ctx);
  std::uint64_t before = 0, after = 0;
  const Measurement measurement(dev.index);
  if (!dev.known || !out || !free_through(ctx, true, before)) return call();
  const CUresult r = call();
  if (r != CUDA_SUCCESS || !free_through(ctx, true, after)) return r;
  const std::uint64_t bytes = measurement.taken(before, after);
  if (bytes == 0) return r;
  if (!charge(dev, bytes, bytes)) {
    if (unload) unload(*out);
    *out = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Record rec = record_of(space, Kind::context_bound, ctx);
  rec.index = static_cast<std::int16_t>(dev.index);
  rec.key = reinterpret_cast<std::uint64_t>(*out);
  rec.bytes = bytes;
  insert(rec);
  return r;
}

template <class Call>
CUresult load_module(CUmodule* module, Call&& call) {
  return load_code(Space::module, module, REAL(cuModuleUnload), call);
}

// cuLibraryLoad*: a library loads into every context of the process, on
// every device, so its charge is the drop of free memory on each device that
// has a context, measured across the load, and it belongs to the library,
// not to the context current at the load: returned only at cuLibraryUnload
// (a context destroyed meanwhile frees its copy, and the others' stay). One
// record per device, keyed by the handle and the device. A library loaded
// with no context at all is not charged: its modules reach contexts lazily,
// at a kernel's first use (docs/design-memory-quotas.md §7).
std::uint64_t library_key(CUlibrary library, int index) {
  return reinterpret_cast<std::uint64_t>(library) ^ (static_cast<std::uint64_t>(index) << 56);
}

template <class Call>
CUresult load_library(CUlibrary* library, Call&& call) {
  if (!enabled() || !library) return call();
  constexpr int kMax = static_cast<int>(kMaxDevices);
  const int n = device_count() < kMax ? device_count() : kMax;
  std::uint64_t before[kMaxDevices] = {}, drop[kMaxDevices] = {};
  bool seen[kMaxDevices] = {}, any = false;
  Measurement measurement[kMaxDevices];
  for (int i = 0; i < n; ++i) {
    measurement[i] = Measurement(i);
    any = (seen[i] = free_on(ordinal_of(i), before[i])) || any;
  }
  if (!any) return call();
  const CUresult r = call();
  if (r != CUDA_SUCCESS) return r;
  for (int i = 0; i < n; ++i) {
    std::uint64_t after = 0;
    if (seen[i] && free_on(ordinal_of(i), after)) drop[i] = measurement[i].taken(before[i], after);
  }
  for (int i = 0; i < n; ++i) {
    if (drop[i] == 0 || charge(Device{true, i, 0}, drop[i], drop[i])) continue;
    for (int j = 0; j < i; ++j) uncharge(j, drop[j]);
    if (const auto unload = REAL(cuLibraryUnload)) unload(*library);
    *library = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < n; ++i) {
    if (drop[i] == 0) continue;
    Record rec{};
    rec.space = Space::library;
    rec.kind = Kind::library;
    rec.index = static_cast<std::int16_t>(i);
    rec.key = library_key(*library, i);
    rec.bytes = drop[i];
    insert(rec);
  }
  return r;
}

CUresult unload_library(CUlibrary library) {
  const auto driver = REAL(cuLibraryUnload);
  if (!driver) return missing();
  if (!enabled()) return driver(library);
  Record recs[kMaxDevices];
  bool held[kMaxDevices] = {};
  Releasing releasing[kMaxDevices];
  constexpr int kMax = static_cast<int>(kMaxDevices);
  for (int i = 0; i < kMax; ++i)
    if ((held[i] = take(Space::library, library_key(library, i), recs[i]))) releasing[i].start(i, recs[i].bytes);
  const CUresult r = driver(library);
  for (auto& one : releasing) one.end();
  for (int i = 0; i < kMax; ++i) {
    if (!held[i]) continue;
    if (r != CUDA_SUCCESS) insert(recs[i]);
    else uncharge(recs[i].index, recs[i].bytes);
  }
  return r;
}

// An unload of code this process loaded returns what its load was charged.
template <class Handle>
CUresult unload_code(Space space, CUresult (*driver)(Handle), Handle h) {
  if (!driver) return missing();
  Record rec;
  const bool ours = enabled() && take(space, reinterpret_cast<std::uint64_t>(h), rec);
  Releasing releasing(ours ? rec.index : -1, rec.bytes);
  const CUresult r = driver(h);
  if (!ours) return r;
  if (r != CUDA_SUCCESS) insert(rec);
  else uncharge(rec.index, rec.bytes);
  return r;
}

// --------------------------------------------------------------- VMM

bool pick_mappings(const Record& r, const void* arg) {
  const auto* range = static_cast<const std::uint64_t*>(arg);
  return r.space == Space::mapping && r.key >= range[0] && r.key - range[0] < range[1];
}

// The record of the allocation a VMM handle refers to: its own, or for an
// imported handle the record of the handle that created the allocation.
bool vmm_allocation(std::uint64_t handle, Record& out) {
  if (!find(Space::handle, handle, out)) return false;
  return out.handle == 0 || find(Space::handle, out.handle, out);
}

bool pick_owned(const Record& r, const void* owner) {
  return (r.space == Space::handle || r.space == Space::shared) && r.handle == *static_cast<const std::uint64_t*>(owner);
}

// Drops one mapping or one reference (a cuMemRelease of any handle of the
// allocation); uncharges when neither is left, the memory the driver frees
// then ([CH] cuMemRelease: "the memory is freed once all outstanding
// references and mappings are gone").
void vmm_drop(std::uint64_t handle, bool release) {
  Record rec;
  if (!vmm_allocation(handle, rec)) return;
  if (release) {
    if (rec.refs > 0) --rec.refs;
  } else if (rec.maps > 0) {
    --rec.maps;
  }
  if (rec.refs > 0 || rec.maps > 0) {
    update(rec);
    return;
  }
  const std::uint64_t owner = rec.key;
  if (take(Space::handle, owner, rec)) uncharge(rec.index, rec.bytes);
  Record gone[16];
  while (take_if(pick_owned, &owner, gone, 16) == 16) {
  }
}

// One more reference to the allocation `handle` refers to (a retain or an import).
void vmm_reference(std::uint64_t handle) {
  Record rec;
  if (!vmm_allocation(handle, rec)) return;
  ++rec.refs;
  update(rec);
}

// What identifies an exported POSIX file descriptor across dup and fd-number
// reuse: its open file's device and inode.
bool shared_key(int fd, std::uint64_t& key) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return false;
  key = (static_cast<std::uint64_t>(st.st_dev) << 40) ^ static_cast<std::uint64_t>(st.st_ino);
  return true;
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

// What a context's destruction hands back (its own memory, its modules' and
// its context-bound allocations') is under way around the driver's call.
template <class Destroy>
CUresult destroy_context(Destroy driver, CUcontext ctx) {
  if (!driver) return missing();
  const bool on = enabled();
  ReleasingContext releasing(on ? ctx : nullptr);
  const CUresult r = driver(ctx);
  releasing.end();
  if (r == CUDA_SUCCESS) {
    forget_context(ctx);
    if (on) reclaim_context(ctx);
  }
  return r;
}

// A primary context's release (the last one frees it) or reset: what the context holds is under
// way around the driver's call, as at cuCtxDestroy (a release that is not the last counts it too:
// a measurement meanwhile charges more, returned with what it charged).
template <class Call>
CUresult end_primary(Call driver, CUdevice dev, void (*after)(CUdevice)) {
  if (!driver) return missing();
  const bool on = enabled();
  ReleasingContext releasing(on ? primary_of(dev) : nullptr);
  const CUresult r = driver(dev);
  releasing.end();
  if (r == CUDA_SUCCESS && on) after(dev);
  return r;
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

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { return destroy_context(REAL(cuCtxDestroy_v2), ctx); }

EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return destroy_context(REAL(cuCtxDestroy), ctx); }

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  auto driver = REAL(cuDevicePrimaryCtxRetain);
  if (!driver) return missing();
  return create_context(dev, true, pctx, [&] { return driver(pctx, dev); });
}

EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  auto driver = REAL(cuCtxCreate);
  if (!driver) return missing();
  return create_context(dev, false, pctx, [&] { return driver(pctx, flags, dev); });
}

EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  auto driver = REAL(cuCtxCreate_v2);
  if (!driver) return missing();
  return create_context(dev, false, pctx, [&] { return driver(pctx, flags, dev); });
}

EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags,
                               CUdevice dev) {
  auto driver = REAL(cuCtxCreate_v3);
  if (!driver) return missing();
  return create_context(dev, false, pctx, [&] { return driver(pctx, paramsArray, numParams, flags, dev); });
}

EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags, CUdevice dev) {
  auto driver = REAL(cuCtxCreate_v4);
  if (!driver) return missing();
  return create_context(dev, false, pctx, [&] { return driver(pctx, ctxCreateParams, flags, dev); });
}

EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  auto driver = REAL(cuModuleLoad);
  if (!driver) return missing();
  return load_module(module, [&] { return driver(module, fname); });
}

EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  auto driver = REAL(cuModuleLoadData);
  if (!driver) return missing();
  return load_module(module, [&] { return driver(module, image); });
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                                   void** optionValues) {
  auto driver = REAL(cuModuleLoadDataEx);
  if (!driver) return missing();
  return load_module(module, [&] { return driver(module, image, numOptions, options, optionValues); });
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  auto driver = REAL(cuModuleLoadFatBinary);
  if (!driver) return missing();
  return load_module(module, [&] { return driver(module, fatCubin); });
}

EXPORT CUresult cuModuleUnload(CUmodule hmod) { return unload_code(Space::module, REAL(cuModuleUnload), hmod); }

EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                                  void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                                  void** libraryOptionValues, unsigned int numLibraryOptions) {
  auto driver = REAL(cuLibraryLoadData);
  if (!driver) return missing();
  return load_library(library, [&] {
    return driver(library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
                  numLibraryOptions);
  });
}

EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                                      void** jitOptionsValues, unsigned int numJitOptions,
                                      CUlibraryOption* libraryOptions, void** libraryOptionValues,
                                      unsigned int numLibraryOptions) {
  auto driver = REAL(cuLibraryLoadFromFile);
  if (!driver) return missing();
  return load_library(library, [&] {
    return driver(library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                  libraryOptionValues, numLibraryOptions);
  });
}

EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  return unload_library(library);
}

EXPORT CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                                   std::size_t bufferSize) {
  auto driver = REAL(cuGraphInstantiate);
  if (!driver) return missing();
  return instantiate(phGraphExec, hGraph, false,
                     [&] { return driver(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize); });
}

EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                                      char* logBuffer, std::size_t bufferSize) {
  auto driver = REAL(cuGraphInstantiate_v2);
  if (!driver) return missing();
  return instantiate(phGraphExec, hGraph, false,
                     [&] { return driver(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize); });
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  auto driver = REAL(cuGraphInstantiateWithFlags);
  if (!driver) return missing();
  return instantiate(phGraphExec, hGraph, false, [&] { return driver(phGraphExec, hGraph, flags); });
}

EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  auto driver = REAL(cuGraphInstantiateWithParams);
  if (!driver) return missing();
  const bool upload = instantiateParams && (instantiateParams->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
  return instantiate(phGraphExec, hGraph, upload, [&] { return driver(phGraphExec, hGraph, instantiateParams); });
}

EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  auto driver = REAL(cuGraphInstantiateWithParams_ptsz);
  if (!driver) return missing();
  const bool upload = instantiateParams && (instantiateParams->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
  return instantiate(phGraphExec, hGraph, upload, [&] { return driver(phGraphExec, hGraph, instantiateParams); });
}

EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  auto driver = REAL(cuGraphUpload);
  if (!driver) return missing();
  return map_exec(hGraphExec, [&] { return driver(hGraphExec, hStream); });
}

EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  auto driver = REAL(cuGraphUpload_ptsz);
  if (!driver) return missing();
  return map_exec(hGraphExec, [&] { return driver(hGraphExec, hStream); });
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  auto driver = REAL(cuGraphLaunch);
  if (!driver) return missing();
  return map_exec(hGraphExec, [&] { return driver(hGraphExec, hStream); });
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  auto driver = REAL(cuGraphLaunch_ptsz);
  if (!driver) return missing();
  return map_exec(hGraphExec, [&] { return driver(hGraphExec, hStream); });
}

// [CH] destroying an exec returns the memory it maps (allocations still
// outstanding live on until freed): the device's reservation, read again.
EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  auto driver = REAL(cuGraphExecDestroy);
  if (!driver) return missing();
  const CUresult r = driver(hGraphExec);
  if (r != CUDA_SUCCESS || !enabled() || !g_graphs.load(std::memory_order_relaxed)) return r;
  Record taken[kMaxDevices];
  const std::size_t n = take_if(pick_exec, hGraphExec, taken, kMaxDevices);
  pthread_mutex_lock(&g_pool_mu);
  for (std::size_t i = 0; i < n; ++i) settle_graph(taken[i].index);
  pthread_mutex_unlock(&g_pool_mu);
  return r;
}

// [CH] a trim gives back the graph memory no exec is using: those execs map
// it again at their next launch, so every exec of the device is charged
// again before that (settling corrects what was not given back).
EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  auto driver = REAL(cuDeviceGraphMemTrim);
  if (!driver) return missing();
  // [CH] the trim gives back what the device's graph memory reserves and does not use: under way
  // around the driver's call (a measurement meanwhile is not undercut).
  Releasing releasing;
  if (enabled() && g_graphs.load(std::memory_order_relaxed)) {
    static DriverFn<GraphMemAttribute> lookup{"cuDeviceGetGraphMemAttribute"};
    const Device dev = tessera::quota::device(device);
    cuuint64_t reserved = 0, used = 0;
    if (const auto get = lookup(); get && dev.index >= 0 &&
                                   get(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS &&
                                   get(device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS && reserved > used)
      releasing.start(dev.index, reserved - used);
  }
  const CUresult r = driver(device);
  releasing.end();
  if (r != CUDA_SUCCESS || !enabled() || !g_graphs.load(std::memory_order_relaxed)) return r;
  const Device dev = tessera::quota::device(device);
  if (dev.index < 0) return r;
  Record batch[64];
  Record keep[64];
  for (;;) {
    const std::size_t n = take_if(pick_graph_index, &dev.index, batch, 64);
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
      batch[i].released = false;
      keep[k++] = batch[i];
    }
    for (std::size_t i = 0; i < k; ++i) insert(keep[i]);
    if (n < 64) break;
  }
  pthread_mutex_lock(&g_pool_mu);
  settle_graph(dev.index);
  pthread_mutex_unlock(&g_pool_mu);
  return r;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return end_primary(REAL(cuDevicePrimaryCtxRelease), dev, after_primary_release);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return end_primary(REAL(cuDevicePrimaryCtxRelease_v2), dev, after_primary_release);
}

EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return end_primary(REAL(cuDevicePrimaryCtxReset), dev, after_primary_reset);
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return end_primary(REAL(cuDevicePrimaryCtxReset_v2), dev, after_primary_reset);
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
  Record rec = record_of(Space::handle, Kind::vmm);
  rec.refs = 1;
  return charge_and_call(dev, size, size, rec, call, [&] { return *handle; });
}

// The last reference of an unmapped allocation frees it in the driver's call.
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto driver = REAL(cuMemRelease);
  if (!driver) return missing();
  Record rec;
  const bool last = enabled() && vmm_allocation(handle, rec) && rec.refs <= 1 && rec.maps == 0;
  Releasing releasing(last ? rec.index : -1, rec.bytes);
  const CUresult r = driver(handle);
  if (r == CUDA_SUCCESS && enabled()) vmm_drop(handle, true);
  return r;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {
  auto driver = REAL(cuMemMap);
  if (!driver) return missing();
  const CUresult r = driver(ptr, size, offset, handle, flags);
  Record vmm;
  if (r != CUDA_SUCCESS || !enabled() || !vmm_allocation(handle, vmm)) return r;
  ++vmm.maps;
  update(vmm);
  Record map;
  map.space = Space::mapping;
  map.kind = Kind::mapping;
  map.key = ptr;
  map.bytes = size;
  map.handle = vmm.key;
  insert(map);
  return r;
}

// [CH] "the handle is guaranteed to be the same handle value used to map the
// memory" and "must be released with corresponding number of calls to
// cuMemRelease": one more reference, which keeps the memory (and its charge).
EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  return forward(REAL(cuMemRetainAllocationHandle), [&] {
    if (enabled() && handle) vmm_reference(*handle);
  }, handle, addr);
}

// An exported descriptor is remembered, so that importing it in this process
// is known to be a reference to the same charged allocation.
EXPORT CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType handleType, unsigned long long flags) {
  return forward(REAL(cuMemExportToShareableHandle), [&] {
    Record vmm, rec = record_of(Space::shared, Kind::vmm);
    if (!enabled() || !shareableHandle || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !vmm_allocation(handle, vmm) || !shared_key(*static_cast<int*>(shareableHandle), rec.key))
      return;
    rec.index = vmm.index;
    rec.handle = vmm.key;
    insert(rec);
  }, shareableHandle, handle, handleType, flags);
}

// An import of a descriptor this process exported is one more reference to an
// allocation already charged: the new handle is recorded as pointing at it.
// Descriptors from other processes stay with their exporter's charge
// (docs/design-memory-quotas.md, "What holds what").
EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                               CUmemAllocationHandleType shHandleType) {
  return forward(REAL(cuMemImportFromShareableHandle), [&] {
    Record shared, vmm;
    std::uint64_t key = 0;
    if (!enabled() || !handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !shared_key(static_cast<int>(reinterpret_cast<std::intptr_t>(osHandle)), key) ||
        !find(Space::shared, key, shared) || !vmm_allocation(shared.handle, vmm))
      return;
    if (*handle != vmm.key) {
      Record alias = record_of(Space::handle, Kind::vmm);
      alias.index = vmm.index;
      alias.key = *handle;
      alias.handle = vmm.key;
      insert(alias);
    }
    vmm_reference(vmm.key);
  }, handle, osHandle, shHandleType);
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, std::size_t size) {
  auto driver = REAL(cuMemUnmap);
  if (!driver) return missing();
  // [CH] the range may span several mappings; each one ends here. An allocation no handle
  // references any more is freed by its last unmap: under way around the driver's call (each
  // allocation once; one still mapped elsewhere is counted too, a measurement meanwhile then
  // charging more).
  const std::uint64_t range[2] = {ptr, size};
  Record maps[64];
  Releasing releasing[64];
  std::uint64_t counted[64] = {};
  if (enabled()) {
    const std::size_t n = copy_if(pick_mappings, range, maps, 64);
    for (std::size_t i = 0; i < n; ++i) {
      Record vmm;
      if (!vmm_allocation(maps[i].handle, vmm) || vmm.refs > 0) continue;
      bool seen = false;
      for (std::size_t j = 0; j < i; ++j) seen = seen || counted[j] == vmm.key;
      if (seen) continue;
      counted[i] = vmm.key;
      releasing[i].start(vmm.index, vmm.bytes);
    }
  }
  const CUresult r = driver(ptr, size);
  for (auto& one : releasing) one.end();
  if (r != CUDA_SUCCESS || !enabled()) return r;
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
  return alloc_async(dptr, bytesize, hStream, false, call);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream) {
  auto driver = REAL(cuMemAllocAsync_ptsz);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, bytesize, hStream); };
  if (!dptr || bytesize == 0) return call();
  return alloc_async(dptr, bytesize, hStream, true, call);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  auto driver = REAL(cuMemAllocFromPoolAsync);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, bytesize, pool, hStream); };
  if (!dptr || bytesize == 0 || !pool) return call();
  return alloc_from_pool(dptr, bytesize, pool, hStream, false, call);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
  auto driver = REAL(cuMemAllocFromPoolAsync_ptsz);
  if (!driver) return missing();
  auto call = [&] { return driver(dptr, bytesize, pool, hStream); };
  if (!dptr || bytesize == 0 || !pool) return call();
  return alloc_from_pool(dptr, bytesize, pool, hStream, true, call);
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

// Serialised with stream-ordered allocations (pool_allocate holds g_pool_mu
// from its read of the current pool to the driver's answer), so no
// allocation is charged to one pool while the driver takes it from another.
EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  auto driver = REAL(cuDeviceSetMemPool);
  if (!driver) return missing();
  pthread_mutex_lock(&g_pool_mu);
  const CUresult r = driver(dev, pool);
  pthread_mutex_unlock(&g_pool_mu);
  return r;
}

// CUDA 13's cuMemSetMemPool is cuDeviceSetMemPool for a device location and
// a pinned pool ([CH]): serialised the same way, whatever it names (a call
// the driver refuses changes nothing).
EXPORT CUresult cuMemSetMemPool(CUmemLocation* location, int type, CUmemoryPool pool) {
  auto driver = REAL(cuMemSetMemPool);
  if (!driver) return missing();
  pthread_mutex_lock(&g_pool_mu);
  const CUresult r = driver(location, type, pool);
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
    if (p.pool == pool && !p.destroyed) {
      if (p.live > 0) {
        p.destroyed = true;  // charged until its last allocation is freed
      } else {
        uncharge(p.index, p.charged);
        p = Pool{};
      }
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
