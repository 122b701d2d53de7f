#include "driver.hpp"

#include "calls.hpp"

#include <pthread.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tessera_cuda_sim {

namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr const char* kDefaultUuid = "GPU-5e55e2a0-0000-4000-8000-000000000000";
constexpr std::size_t kMaxDevices = 64;
constexpr CUdeviceptr kAlign = 512;  // simulator's address alignment (cudaMalloc guarantees at least 256)
constexpr CUdeviceptr kLowEnd = 0x100000000ULL;

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
    auto colon = item.rfind(':');
    DeviceConfig d;
    if (colon == std::string::npos) {
      why = "'" + item.substr(0, 60) + "' is not UUID:SIZE";
      return std::nullopt;
    }
    d.uuid_text = item.substr(0, colon);
    if (!parse_uuid(d.uuid_text, d.uuid)) {
      why = "'" + d.uuid_text.substr(0, 60) + "' is not a GPU-/MIG- UUID";
      return std::nullopt;
    }
    if (!parse_size(item.substr(colon + 1), d.bytes)) {
      why = "'" + item.substr(colon + 1, 60) + "' is not a positive size (bytes, or with K, M, G or T)";
      return std::nullopt;
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
  devices = std::move(*parsed);
  dir_ = d;
  files_.clear();
  if (!dir_.empty())
    for (const auto& dev : devices) files_.emplace_back(dir_, dev.uuid_text);
  own_.assign(devices.size(), 0);
  peak_.assign(devices.size(), 0);
  primary_.assign(devices.size(), nullptr);
  primary_refs_.assign(devices.size(), 0);
  initialized = true;
  return CUDA_SUCCESS;
}

Context* Driver::create_context(CUdevice dev) {
  contexts_.push_back(std::make_unique<Context>());
  Context* c = contexts_.back().get();
  c->device = dev;
  live_.insert(c);
  return c;
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
  // cuCtxDestroy frees the context's cuMemAlloc and cuMemAllocPitch memory
  // (design §1, "Facts behind the rules").
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
  if (CUresult r = charge(ctx->device, static_cast<std::int64_t>(bytes), nullptr); r != CUDA_SUCCESS) return r;
  out = next;
  next += span;  // addresses are never reused, so a stale pointer is never someone else's
  allocations_[out] = Allocation{ctx->device, ctx, bytes};
  return CUDA_SUCCESS;
}

CUresult Driver::free(CUdeviceptr p) {
  auto it = allocations_.find(p);
  if (it == allocations_.end()) return CUDA_ERROR_INVALID_VALUE;  // not an address cuMemAlloc returned
  Allocation a = it->second;
  allocations_.erase(it);
  return charge(a.device, -static_cast<std::int64_t>(a.bytes), nullptr);
}

CUresult Driver::usage(CUdevice dev, Usage& u) { return charge(dev, 0, &u); }

bool Driver::owns_range(CUdeviceptr p, std::uint64_t n) const {
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return false;
  --it;
  const std::uint64_t off = p - it->first;
  return off < it->second.bytes && n <= it->second.bytes - off;
}

CUresult Driver::synchronize() { return CUDA_SUCCESS; }

void Driver::reset_after_fork() {
  initialized = false;
  ++generation;
  devices.clear();
  dir_.clear();
  live_.clear();  // contexts_ is kept so that no new handle equals an inherited one
  primary_.clear();
  primary_refs_.clear();
  allocations_.clear();
  own_.clear();
  peak_.clear();
  files_.clear();
}

}  // namespace tessera_cuda_sim
