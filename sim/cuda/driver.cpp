#include "driver.hpp"

#include "calls.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <iterator>
#include <limits>

namespace tessera_cuda_sim {

namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr const char* kDefaultUuid = "GPU-5e55e2a0-0000-4000-8000-000000000000";
constexpr std::size_t kMaxDevices = 64;
constexpr CUdeviceptr kAlign = 512;  // simulator's address alignment (cudaMalloc guarantees at least 256)
constexpr CUdeviceptr kLowEnd = 0x100000000ULL;
constexpr CUdeviceptr kHighEnd = 0x0000fffffffff000ULL;  // sim: a 48-bit address space

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "GPU-" or "MIG-" then 8-4-4-4-12 hex digits, as nvidia-smi -L prints them.
bool parse_uuid(const std::string& s, unsigned char out[16]) {
  if (s.size() != 40 || (s.compare(0, 4, "GPU-") != 0 && s.compare(0, 4, "MIG-") != 0)) return false;
  std::size_t k = 0;
  for (std::size_t i = 4; i < s.size();) {
    if (i == 12 || i == 17 || i == 22 || i == 27) {
      if (s[i] != '-') return false;
      ++i;
      continue;
    }
    int hi = hex_value(s[i]), lo = hex_value(s[i + 1]);
    if (hi < 0 || lo < 0 || k >= 16) return false;
    out[k++] = static_cast<unsigned char>(hi * 16 + lo);
    i += 2;
  }
  return k == 16;
}

bool parse_size(const std::string& s, std::uint64_t& out) {
  if (s.empty()) return false;
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) return false;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (i == 0) return false;
  unsigned shift = 0;
  if (i + 1 == s.size()) {
    switch (s[i]) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: return false;
    }
  } else if (i != s.size()) {
    return false;
  }
  if (shift && v > (std::numeric_limits<std::uint64_t>::max() >> shift)) return false;
  out = v << shift;
  return out > 0;
}

void prepare_fork() { driver().mu.lock(); }
void parent_fork() { driver().mu.unlock(); }
void child_fork() {
  CallCounter::reset_all();
  driver().reset_after_fork();
  driver().mu.unlock();
}

__attribute__((constructor)) void register_fork_handlers() { pthread_atfork(prepare_fork, parent_fork, child_fork); }

struct ThreadContexts {
  std::uint64_t generation = 0;
  std::vector<Context*> stack;
};
thread_local ThreadContexts tls_contexts;

}  // namespace

std::optional<std::vector<DeviceConfig>> parse_devices(const char* text, std::string& why) {
  std::vector<DeviceConfig> out;
  if (!text) {
    DeviceConfig d;
    d.uuid_text = kDefaultUuid;
    parse_uuid(d.uuid_text, d.uuid);
    d.bytes = 80 * kGiB;
    out.push_back(d);
    return out;
  }
  std::string all = text;
  std::size_t pos = 0;
  while (!all.empty() && pos <= all.size()) {
    auto comma = all.find(',', pos);
    if (comma == std::string::npos) comma = all.size();
    std::string item = all.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      why = "an empty entry in '" + all.substr(0, 60) + "'";
      return std::nullopt;
    }
    auto colon = item.find(':');  // a UUID has no colon: the first one ends it
    DeviceConfig d;
    if (colon == std::string::npos) {
      why = "'" + item.substr(0, 60) + "' is not UUID:SIZE[:MODEL]";
      return std::nullopt;
    }
    d.uuid_text = item.substr(0, colon);
    if (!parse_uuid(d.uuid_text, d.uuid)) {
      why = "'" + d.uuid_text.substr(0, 60) + "' is not a GPU-/MIG- UUID";
      return std::nullopt;
    }
    const auto model_colon = item.find(':', colon + 1);
    const std::string size = item.substr(colon + 1, model_colon == std::string::npos ? std::string::npos
                                                                                     : model_colon - colon - 1);
    if (!parse_size(size, d.bytes)) {
      why = "'" + size.substr(0, 60) + "' is not a positive size (bytes, or with K, M, G or T)";
      return std::nullopt;
    }
    if (model_colon != std::string::npos) {
      const std::string model = item.substr(model_colon + 1);
      d.model = find_gpu_model(model);
      if (!d.model) {
        std::string known;
        for (const auto& m : gpu_models()) known += std::string(known.empty() ? "" : ", ") + m.key;
        why = "'" + model.substr(0, 60) + "' is not a simulated GPU model (" + known + ")";
        return std::nullopt;
      }
    }
    for (const auto& e : out)
      if (std::memcmp(e.uuid, d.uuid, 16) == 0) {
        why = "UUID " + d.uuid_text + " given twice";
        return std::nullopt;
      }
    out.push_back(d);
    if (out.size() > kMaxDevices) {
      why = "more than 64 devices";
      return std::nullopt;
    }
  }
  return out;
}

Driver& driver() {
  static Driver* d = new Driver;  // never destroyed: entry points may run during exit
  return *d;
}

std::vector<Context*>& Driver::thread_stack() {
  if (tls_contexts.generation != generation) {
    tls_contexts.stack.clear();
    tls_contexts.generation = generation;
  }
  return tls_contexts.stack;
}

Context* Driver::current() {
  auto& s = thread_stack();
  if (s.empty() || !is_live(s.back())) return nullptr;
  return s.back();
}

CUresult Driver::init() {
  if (initialized) return CUDA_SUCCESS;
  std::string why;
  auto parsed = parse_devices(std::getenv("TESSERA_SIM_CUDA_DEVICES"), why);
  if (!parsed) {
    std::fprintf(stderr, "tessera cuda sim: TESSERA_SIM_CUDA_DEVICES: %s\n", why.c_str());
    return CUDA_ERROR_UNKNOWN;  // a broken simulator configuration, not a driver rule
  }
  if (parsed->empty()) return CUDA_ERROR_NO_DEVICE;  // as a driver that finds no device
  const char* dir = std::getenv("TESSERA_SIM_CUDA_DIR");
  std::string d = dir ? dir : "";
  if (!d.empty()) {
    struct stat st {};
    if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "tessera cuda sim: TESSERA_SIM_CUDA_DIR %s is not a directory\n", d.c_str());
      return CUDA_ERROR_UNKNOWN;
    }
  }
  // The knobs: sizes as TESSERA_SIM_CUDA_DEVICES takes them, "0" allowed
  // for the two memory figures.
  struct Knob {
    const char* name;
    std::uint64_t& value;
    std::uint64_t fallback;
    bool zero_ok;
  };
  const Knob knobs[] = {{"TESSERA_SIM_CUDA_POOL_STEP", pool_step_, kGranule, false},
                        {"TESSERA_SIM_CUDA_CONTEXT_BYTES", context_bytes_, 0, true},
                        {"TESSERA_SIM_CUDA_MODULE_BYTES", module_bytes_, 0, true}};
  for (const auto& k : knobs) {
    const char* text = std::getenv(k.name);
    k.value = k.fallback;
    if (!text) continue;
    std::uint64_t v = 0;
    if ((k.zero_ok && std::strcmp(text, "0") == 0) || parse_size(text, v)) {
      k.value = v;
    } else {
      std::fprintf(stderr, "tessera cuda sim: %s: '%.60s' is not a size (bytes, or with K, M, G or T)\n", k.name, text);
      return CUDA_ERROR_UNKNOWN;
    }
  }
  // A module load's time (a real driver's reads and uploads the image: milliseconds), spent before
  // its memory is taken, with the driver free for other threads' calls meanwhile.
  load_us_ = 0;
  if (const char* text = std::getenv("TESSERA_SIM_CUDA_LOAD_US")) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (!*text || *end || errno || v > 10'000'000 || text[0] == '-') {
      std::fprintf(stderr,
                   "tessera cuda sim: TESSERA_SIM_CUDA_LOAD_US: '%.60s' is not a whole number of microseconds up to "
                   "10000000\n",
                   text);
      return CUDA_ERROR_UNKNOWN;
    }
    load_us_ = v;
  }
  if (pool_step_ % kGranule != 0) {
    std::fprintf(stderr, "tessera cuda sim: TESSERA_SIM_CUDA_POOL_STEP must be a multiple of 2 MiB\n");
    return CUDA_ERROR_UNKNOWN;
  }
  devices = std::move(*parsed);
  dir_ = d;
  files_.clear();
  if (!dir_.empty())
    for (const auto& dev : devices) files_.emplace_back(dir_, dev.uuid_text);
  own_.assign(devices.size(), 0);
  peak_.assign(devices.size(), 0);
  primary_.assign(devices.size(), nullptr);
  primary_refs_.assign(devices.size(), 0);
  default_pool_.assign(devices.size(), nullptr);
  current_pool_.assign(devices.size(), nullptr);
  graph_pools_.assign(devices.size(), GraphPool{});
  initialized = true;
  return CUDA_SUCCESS;
}

CUresult Driver::create_context(CUdevice dev, Context*& out) {
  contexts_.push_back(std::make_unique<Context>());
  Context* c = contexts_.back().get();
  c->device = dev;
  if (CUresult r = activate(c); r != CUDA_SUCCESS) return r;
  out = c;
  return CUDA_SUCCESS;
}

// A context holds device memory of its own while it lives, as a real one
// does (its stacks, heap, printf buffer, the driver's own structures); sim:
// TESSERA_SIM_CUDA_CONTEXT_BYTES of it, seen in cuMemGetInfo's free memory
// and in the device's usage like any allocation.
CUresult Driver::activate(Context* c) {
  if (context_bytes_)
    if (CUresult r = charge(c->device, static_cast<std::int64_t>(context_bytes_), nullptr); r != CUDA_SUCCESS) return r;
  c->overhead = context_bytes_;
  live_.insert(c);
  return CUDA_SUCCESS;
}

Context* Driver::primary(CUdevice dev) {
  auto i = static_cast<std::size_t>(dev);
  if (!primary_[i]) {
    contexts_.push_back(std::make_unique<Context>());
    primary_[i] = contexts_.back().get();
    primary_[i]->device = dev;
    primary_[i]->primary = true;
  }
  return primary_[i];
}

CUresult Driver::destroy_context(Context* c) {
  // cuCtxDestroy frees the context's cuMemAlloc, cuMemAllocPitch and
  // cuMemAllocManaged memory and its arrays, not cuMemCreate or pool memory
  // (design §1, "Facts behind the rules"; pool allocations have no context).
  CUresult result = CUDA_SUCCESS;
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    if (it->second.ctx == c) {
      CUresult r = charge(it->second.device, -static_cast<std::int64_t>(it->second.bytes), nullptr);
      if (r != CUDA_SUCCESS) result = r;
      it = allocations_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = arrays_.begin(); it != arrays_.end();) {
    if (it->second.ctx == c) {
      CUresult r = charge(it->second.device, -static_cast<std::int64_t>(it->second.bytes), nullptr);
      if (r != CUDA_SUCCESS) result = r;
      orphaned_arrays_.insert(it->first);
      it = arrays_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = modules_.begin(); it != modules_.end();) {
    if (it->second.ctx == c) {
      if (it->second.bytes) {
        CUresult r = charge(c->device, -static_cast<std::int64_t>(it->second.bytes), nullptr);
        if (r != CUDA_SUCCESS) result = r;
      }
      it = modules_.erase(it);
    } else {
      ++it;
    }
  }
  if (c->overhead) {
    CUresult r = charge(c->device, -static_cast<std::int64_t>(c->overhead), nullptr);
    if (r != CUDA_SUCCESS) result = r;
    c->overhead = 0;
  }
  live_.erase(c);
  return result;
}

CUresult Driver::charge(CUdevice dev, std::int64_t delta, Usage* u) {
  auto i = static_cast<std::size_t>(dev);
  const std::uint64_t capacity = devices[i].bytes;
  if (dir_.empty()) {
    if (delta > 0) {
      auto add = static_cast<std::uint64_t>(delta);
      if (own_[i] > capacity || add > capacity - own_[i]) return CUDA_ERROR_OUT_OF_MEMORY;
      own_[i] += add;
    } else {
      auto sub = static_cast<std::uint64_t>(-(delta + 1)) + 1;
      own_[i] = sub > own_[i] ? 0 : own_[i] - sub;
    }
    if (own_[i] > peak_[i]) peak_[i] = own_[i];
    if (u) *u = Usage{own_[i], own_[i], peak_[i]};
    return CUDA_SUCCESS;
  }
  auto r = files_[i].update(delta, capacity);
  if (!r.ok) {
    std::fprintf(stderr, "tessera cuda sim: %s\n", r.error.c_str());
    return CUDA_ERROR_UNKNOWN;
  }
  own_[i] = r.own;
  if (u) *u = Usage{r.own, r.all, r.peak};
  return r.refused ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult Driver::allocate(Context* ctx, std::uint64_t bytes, bool low, CUdeviceptr& out) {
  const std::uint64_t span = (bytes + kAlign - 1) / kAlign * kAlign;
  if (span < bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr& next = low ? next_low_ : next_high_;
  if (low && (span > kLowEnd || next > kLowEnd - span)) return CUDA_ERROR_OUT_OF_MEMORY;  // no 32-bit address left
  if (!low && span > kHighEnd - next) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult r = charge(ctx->device, static_cast<std::int64_t>(bytes), nullptr); r != CUDA_SUCCESS) return r;
  out = next;
  next += span;  // addresses are never reused, so a stale pointer is never someone else's
  allocations_[out] = Allocation{ctx->device, ctx, bytes, nullptr};
  return CUDA_SUCCESS;
}

CUdeviceptr Driver::take_addresses(std::uint64_t bytes, std::uint64_t alignment) {
  const CUdeviceptr base = (next_high_ + alignment - 1) / alignment * alignment;
  if (base < next_high_ || base > kHighEnd || bytes > kHighEnd - base) return 0;
  next_high_ = base + (bytes + kAlign - 1) / kAlign * kAlign;
  return base;
}

CUresult Driver::free(CUdeviceptr p) {
  if (CUresult r = CUDA_SUCCESS; graph_free(p, r)) return r;
  auto it = allocations_.find(p);
  if (it == allocations_.end()) return CUDA_ERROR_INVALID_VALUE;  // not an address this process was given
  Allocation a = it->second;
  allocations_.erase(it);
  if (!a.pool) return charge(a.device, -static_cast<std::int64_t>(a.bytes), nullptr);
  // A pool allocation goes back to its pool, which keeps it reserved; a
  // destroyed pool gives everything back with its last allocation ([CH]).
  Pool* pool = a.pool;
  pool->used -= a.bytes;
  if (pool->destroyed && pool->used == 0) {
    live_pools_.erase(pool);
    return pool_release_to(pool, 0);
  }
  return CUDA_SUCCESS;
}

// ---- pools

namespace {
std::uint64_t round_up(std::uint64_t v, std::uint64_t g) { return v > UINT64_MAX - (g - 1) ? 0 : (v + g - 1) / g * g; }
}  // namespace

Pool* Driver::default_pool(CUdevice dev) {
  auto i = static_cast<std::size_t>(dev);
  if (!default_pool_[i]) {
    default_pool_[i] = create_pool(dev, 0);
    default_pool_[i]->is_default = true;
  }
  return default_pool_[i];
}

Pool* Driver::create_pool(CUdevice dev, std::uint64_t max_size) {
  pools_.push_back(std::make_unique<Pool>());
  Pool* p = pools_.back().get();
  p->device = dev;
  p->max_size = max_size;
  live_pools_.insert(p);
  return p;
}

Pool* Driver::usable_pool(CUmemoryPool h) const {
  auto* p = reinterpret_cast<Pool*>(h);
  if (!live_pools_.contains(p) || p->destroyed) return nullptr;
  return p;
}

// sim: a pool grows by whole steps of TESSERA_SIM_CUDA_POOL_STEP (default one
// 2 MiB granule; a real driver's step is its own, and can be far larger than
// the request), and gives memory back in the same steps.
CUresult Driver::pool_allocate(Pool* p, std::uint64_t bytes, CUdeviceptr& out) {
  if (bytes > UINT64_MAX - p->used) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::uint64_t need = round_up(p->used + bytes, pool_step_);
  if (need == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (p->max_size && need > p->max_size) return CUDA_ERROR_OUT_OF_MEMORY;  // [CH] maxSize bounds a created pool
  const CUdeviceptr addr = take_addresses(bytes, kAlign);
  if (addr == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (need > p->reserved) {
    // The pool grows by whole granules: that growth is what the device is charged.
    CUresult r = charge(p->device, static_cast<std::int64_t>(need - p->reserved), nullptr);
    if (r != CUDA_SUCCESS) return r;
    p->reserved = need;
    if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
  }
  p->used += bytes;
  if (p->used > p->used_high) p->used_high = p->used;
  out = addr;
  allocations_[out] = Allocation{p->device, nullptr, bytes, p};
  return CUDA_SUCCESS;
}

// Releases reserved memory down to max(keep, what outstanding allocations
// hold), in whole granules.
CUresult Driver::pool_release_to(Pool* p, std::uint64_t keep) {
  const std::uint64_t floor = std::max(round_up(keep, pool_step_), round_up(p->used, pool_step_));
  if (p->reserved <= floor) return CUDA_SUCCESS;
  const std::uint64_t excess = p->reserved - floor;
  p->reserved = floor;
  return charge(p->device, -static_cast<std::int64_t>(excess), nullptr);
}

// [CH] cuMemPoolTrimTo: afterwards at least minBytesToKeep stay reserved (sim:
// rounded up to a granule); memory backing outstanding allocations stays.
CUresult Driver::pool_trim(Pool* p, std::uint64_t keep_at_least) {
  std::uint64_t keep = round_up(keep_at_least, pool_step_);
  if (keep == 0 && keep_at_least != 0) return CUDA_SUCCESS;  // more than can ever be reserved: a no-op
  return pool_release_to(p, keep);
}

CUresult Driver::pool_destroy(Pool* p) {
  // [CH] destroying a device's current pool makes its default pool current again.
  auto i = static_cast<std::size_t>(p->device);
  if (current_pool_[i] == p) current_pool_[i] = nullptr;
  p->destroyed = true;
  if (p->used != 0) return CUDA_SUCCESS;  // [CH] returns at once; freed with the last allocation
  live_pools_.erase(p);
  return pool_release_to(p, 0);
}

// [CH] RELEASE_THRESHOLD: a pool holding more than the threshold releases
// memory "on the next call to stream, event or context synchronize". sim: the
// pool keeps the threshold rounded down to a granule (and what its
// outstanding allocations need); every pool of the process is released at
// every synchronize, whichever stream or context it names.
CUresult Driver::synchronize() {
  CUresult result = CUDA_SUCCESS;
  for (Pool* p : live_pools_) {
    if (p->destroyed) continue;
    CUresult r = pool_release_to(p, p->threshold / pool_step_ * pool_step_);
    if (r != CUDA_SUCCESS) result = r;
  }
  return result;
}

// ---- virtual memory management

CUresult Driver::vmm_create(CUdevice dev, bool device_memory, std::uint64_t bytes, int handle_types,
                            CUmemGenericAllocationHandle& out) {
  if (device_memory)
    if (CUresult r = charge(dev, static_cast<std::int64_t>(bytes), nullptr); r != CUDA_SUCCESS) return r;
  const std::uint64_t id = next_physical_++;
  physical_[id] = Physical{dev, device_memory, bytes, handle_types, 1, 0};
  out = next_handle_++;  // never reused
  handles_[out] = HandleRef{id, 1};
  return CUDA_SUCCESS;
}

HandleRef* Driver::live_handle(CUmemGenericAllocationHandle h) {
  auto it = handles_.find(h);
  return it == handles_.end() || it->second.refs == 0 ? nullptr : &it->second;
}

// [CH] cuMemRelease / cuMemUnmap: the memory is freed when every reference to
// it is released and no mapping of it is left; its handles go with it.
CUresult Driver::physical_maybe_free(std::uint64_t id) {
  auto it = physical_.find(id);
  if (it == physical_.end() || it->second.refs != 0 || it->second.mappings != 0) return CUDA_SUCCESS;
  const Physical ph = it->second;
  physical_.erase(it);
  std::erase_if(handles_, [&](const auto& h) { return h.second.physical == id; });
  if (!ph.device_memory) return CUDA_SUCCESS;
  return charge(ph.device, -static_cast<std::int64_t>(ph.bytes), nullptr);
}

CUresult Driver::vmm_release(CUmemGenericAllocationHandle h) {
  HandleRef* ref = live_handle(h);
  if (!ref) return CUDA_ERROR_INVALID_VALUE;  // sim ([CH]: undefined)
  --ref->refs;
  const std::uint64_t id = ref->physical;
  --physical_[id].refs;
  return physical_maybe_free(id);
}

CUresult Driver::vmm_reserve(std::uint64_t size, std::uint64_t alignment, CUdeviceptr& out) {
  const CUdeviceptr base = take_addresses(size, std::max(alignment, kGranule));
  if (base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  reservations_[base] = size;
  out = base;
  return CUDA_SUCCESS;
}

// [CH] the size must match the reservation's and ptr its start. sim: a
// reservation with mappings in it is refused (INVALID_VALUE); unmap first.
CUresult Driver::vmm_address_free(CUdeviceptr p, std::uint64_t size) {
  auto it = reservations_.find(p);
  if (it == reservations_.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto m = mappings_.lower_bound(p);
  if (m != mappings_.end() && m->first < p + size) return CUDA_ERROR_INVALID_VALUE;
  reservations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult Driver::vmm_map(CUdeviceptr p, std::uint64_t size, CUmemGenericAllocationHandle h) {
  const HandleRef* ref = live_handle(h);
  if (!ref) return CUDA_ERROR_INVALID_VALUE;
  auto ph = physical_.find(ref->physical);
  if (size > ph->second.bytes) return CUDA_ERROR_INVALID_VALUE;  // [CH] offset + size within the allocation
  // [CH] the range must lie in one reservation and not be mapped already.
  auto r = reservations_.upper_bound(p);
  if (r == reservations_.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (p - r->first >= r->second || size > r->second - (p - r->first)) return CUDA_ERROR_INVALID_VALUE;
  auto next = mappings_.lower_bound(p);
  if (next != mappings_.end() && next->first < p + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != mappings_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > p) return CUDA_ERROR_INVALID_VALUE;
  }
  mappings_[p] = Mapping{size, h, 0};
  ++ph->second.mappings;
  return CUDA_SUCCESS;
}

// [CH] cuMemUnmap takes whole mapped ranges, never a part of one. sim: one
// call may take several adjacent mappings if it covers each exactly.
bool Driver::whole_mappings(CUdeviceptr p, std::uint64_t size, MappingIt& first, MappingIt& last) {
  first = mappings_.find(p);
  if (first == mappings_.end()) return false;
  last = first;
  const CUdeviceptr end = p + size;
  for (CUdeviceptr at = p; at < end; ++last) {
    if (last == mappings_.end() || last->first != at || last->second.size > end - at) return false;
    at += last->second.size;
  }
  return true;
}

CUresult Driver::vmm_unmap(CUdeviceptr p, std::uint64_t size) {
  MappingIt first, it;
  if (!whole_mappings(p, size, first, it)) return CUDA_ERROR_INVALID_VALUE;
  CUresult result = CUDA_SUCCESS;
  for (auto m = first; m != it;) {
    auto h = handles_.find(m->second.handle);
    m = mappings_.erase(m);
    if (h == handles_.end()) continue;
    const std::uint64_t id = h->second.physical;
    --physical_[id].mappings;
    if (CUresult r = physical_maybe_free(id); r != CUDA_SUCCESS) result = r;
  }
  return result;
}

// [CH] cuMemSetAccess: the range must be mapped, every byte of it; each
// descriptor names a device location and PROT_NONE, PROT_READ or
// PROT_READWRITE. sim: the range is one or more whole adjacent mappings.
CUresult Driver::vmm_set_access(CUdeviceptr p, std::uint64_t size, const CUmemAccessDesc* desc, std::size_t count) {
  if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int flags = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    const int id = desc[i].location.id;
    if (id < 0 || static_cast<std::size_t>(id) >= devices.size()) return CUDA_ERROR_INVALID_DEVICE;
    const int f = desc[i].flags;
    if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    flags |= f;
  }
  MappingIt first, last;
  if (!whole_mappings(p, size, first, last)) return CUDA_ERROR_INVALID_VALUE;
  for (auto m = first; m != last; ++m) m->second.access = flags;
  return CUDA_SUCCESS;
}

// [CH] cuMemRetainAllocationHandle: any address inside a mapping gives the
// handle used to map it, with one more reference to release.
CUresult Driver::vmm_retain(CUdeviceptr addr, CUmemGenericAllocationHandle& out) {
  auto it = mappings_.upper_bound(addr);
  if (it == mappings_.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (addr - it->first >= it->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto h = handles_.find(it->second.handle);
  if (h == handles_.end()) return CUDA_ERROR_INVALID_VALUE;
  ++h->second.refs;
  ++physical_[h->second.physical].refs;
  out = h->first;
  return CUDA_SUCCESS;
}

// [CH] cuMemExportToShareableHandle: only a handle type the allocation asked
// for at creation. sim: POSIX file descriptors only, and an import only in the
// exporting process (the descriptor is a memfd naming the process and the
// allocation); another process gets CUDA_ERROR_NOT_SUPPORTED, which [CH]
// gives for "memory the current process cannot support".
CUresult Driver::vmm_export(CUmemGenericAllocationHandle h, CUmemAllocationHandleType type, int& fd) {
  const HandleRef* ref = live_handle(h);
  if (!ref) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if (!(physical_[ref->physical].handle_types & type)) return CUDA_ERROR_INVALID_VALUE;
  const int memfd = ::memfd_create("tessera-sim-vmm", MFD_CLOEXEC);
  if (memfd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  char text[64];
  const int n = std::snprintf(text, sizeof text, "%ld %llu\n", static_cast<long>(::getpid()),
                              static_cast<unsigned long long>(ref->physical));
  if (::pwrite(memfd, text, static_cast<std::size_t>(n), 0) != n) {
    ::close(memfd);
    return CUDA_ERROR_UNKNOWN;
  }
  fd = memfd;
  return CUDA_SUCCESS;
}

CUresult Driver::vmm_import(int fd, CUmemGenericAllocationHandle& out) {
  char text[64] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  long pid = 0;
  unsigned long long id = 0;
  if (n <= 0 || std::sscanf(text, "%ld %llu", &pid, &id) != 2) return CUDA_ERROR_INVALID_VALUE;
  if (pid != static_cast<long>(::getpid())) return CUDA_ERROR_NOT_SUPPORTED;
  auto ph = physical_.find(id);
  if (ph == physical_.end()) return CUDA_ERROR_INVALID_VALUE;
  ++ph->second.refs;
  out = next_handle_++;  // [CH]: not necessarily the exporter's handle value
  handles_[out] = HandleRef{id, 1};
  return CUDA_SUCCESS;
}

// ---- arrays

CUresult Driver::array_create(Context* ctx, std::uint64_t bytes, bool mipmapped, std::uintptr_t& handle) {
  if (bytes)
    if (CUresult r = charge(ctx->device, static_cast<std::int64_t>(bytes), nullptr); r != CUDA_SUCCESS) return r;
  handle = next_array_;
  next_array_ += 64;  // never reused
  arrays_[handle] = ArrayRecord{ctx->device, ctx, bytes, mipmapped};
  return CUDA_SUCCESS;
}

CUresult Driver::array_destroy(std::uintptr_t handle, bool mipmapped) {
  auto it = arrays_.find(handle);
  if (it == arrays_.end() || it->second.mipmapped != mipmapped) {
    // [CH] lists CONTEXT_IS_DESTROYED: an array its context took with it.
    if (orphaned_arrays_.contains(handle)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  ArrayRecord a = it->second;
  arrays_.erase(it);
  if (!a.bytes) return CUDA_SUCCESS;
  return charge(a.device, -static_cast<std::int64_t>(a.bytes), nullptr);
}

CUresult Driver::usage(CUdevice dev, Usage& u) { return charge(dev, 0, &u); }

bool Driver::owns_range(CUdeviceptr p, std::uint64_t n) const {
  auto inside = [&](const auto& map, auto size_of) {
    auto it = map.upper_bound(p);
    if (it == map.begin()) return false;
    --it;
    const std::uint64_t off = p - it->first, size = size_of(it->second);
    return off < size && n <= size - off;
  };
  return inside(allocations_, [](const Allocation& a) { return a.bytes; }) ||
         inside(mappings_, [](const Mapping& m) { return m.size; });
}

void Driver::reset_after_fork() {
  initialized = false;
  ++generation;
  devices.clear();
  dir_.clear();
  live_.clear();  // contexts_ is kept so that no new handle equals an inherited one
  primary_.clear();
  primary_refs_.clear();
  allocations_.clear();
  live_pools_.clear();  // pools_ is kept so that no new handle equals an inherited one
  default_pool_.clear();
  current_pool_.clear();
  physical_.clear();
  handles_.clear();
  libraries_.clear();
  reservations_.clear();
  mappings_.clear();
  arrays_.clear();
  orphaned_arrays_.clear();
  own_.clear();
  peak_.clear();
  files_.clear();
  live_streams_.clear();  // streams_, graphs_, nodes_ and execs_ are kept: no new handle equals an inherited one
  modules_.clear();
  live_graphs_.clear();
  node_graph_.clear();
  graph_addresses_.clear();
  live_execs_.clear();
  graph_live_.clear();
  graph_pools_.clear();
}

}  // namespace tessera_cuda_sim
