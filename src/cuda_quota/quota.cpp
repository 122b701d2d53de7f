// The quota library's process state: see quota.hpp and
// docs/design-memory-quotas.md §3. No C++ runtime beyond the language itself:
// malloc, pthread and write(2), so the library loads into any glibc process.
#include "cuda_quota/quota.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "cuda_quota/env.h"
#include "cuda_quota/ledger.hpp"
#include "cuda_quota/limits.hpp"

extern char** environ;

namespace tessera::quota {
namespace {

constexpr int kMaxOrdinals = 64;
constexpr std::size_t kTextBytes = 128;

// ---------------------------------------------------------------- logging

std::atomic<int> g_log_level{-1};

int log_level() {
  int level = g_log_level.load(std::memory_order_relaxed);
  if (level >= 0) return level;
  level = static_cast<int>(Level::warn);
  if (const char* v = getenv(TESSERA_ENV_CUDA_LOG)) {
    if (!strcmp(v, "error")) level = static_cast<int>(Level::error);
    else if (!strcmp(v, "info")) level = static_cast<int>(Level::info);
    else if (!strcmp(v, "debug")) level = static_cast<int>(Level::debug);
  }
  g_log_level.store(level, std::memory_order_relaxed);
  return level;
}

// At most 60 characters of untrusted text, escaped, for a log line.
void quote(const char* text, char* out, std::size_t size) {
  std::size_t o = 0;
  auto put = [&](char c) {
    if (o + 1 < size) out[o++] = c;
  };
  put('"');
  std::size_t n = 0;
  for (; text[n] && n < 60; ++n) {
    const unsigned char c = static_cast<unsigned char>(text[n]);
    if (c == '"' || c == '\\') {
      put('\\');
      put(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[5];
      snprintf(hex, sizeof hex, "\\x%02x", c);
      for (const char* h = hex; *h; ++h) put(*h);
    } else {
      put(static_cast<char>(c));
    }
  }
  put('"');
  if (text[n]) {
    for (const char* more = "..."; *more; ++more) put(*more);
  }
  out[o] = '\0';
}

// ---------------------------------------------------------------- environment

struct EnvDevice {
  bool has_limit = false;
  bool limit_ok = false;
  std::uint64_t limit = 0;
  std::uint64_t context = 0;   // limits file: a first context's charge when it cannot be measured
  char uuid[kUuidBytes] = {};  // as given ("GPU-…" or "MIG-…"), empty when unset
};

// Where the quota comes from: nowhere (the library is off), the environment
// (no limits file: a fallback, said in a warning), or the limits file.
enum class Source { none, env, file };

struct Env {
  bool enabled = false;
  Source source = Source::none;
  // With a limits file that cannot be used: no context may be created, and why.
  bool refused = false;
  char refusal[768] = {};
  int count = 0;  // 1 + the highest index with a limit
  EnvDevice devices[kMaxDevices];
  char ledger_dir[PATH_MAX] = {};
  char key[kKeyBytes] = {};
};

Env g_env;
const Env g_no_env;
std::atomic<bool> g_env_read{false};
pthread_mutex_t g_env_mu = PTHREAD_MUTEX_INITIALIZER;

// A plain decimal uint64: digits only, no sign, space, suffix or overflow.
bool parse_bytes(const char* text, std::uint64_t& out) {
  if (!*text) return false;
  std::uint64_t v = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    const std::uint64_t digit = static_cast<std::uint64_t>(*p - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  out = v;
  return true;
}

// "<prefix><k>=value" with k a decimal index below kMaxDevices; -1 otherwise.
int env_index(const char* entry, const char* prefix, const char*& value) {
  const std::size_t n = strlen(prefix);
  if (strncmp(entry, prefix, n) != 0) return -2;
  const char* p = entry + n;
  int k = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) {
    k = k * 10 + (*p - '0');
    if (k >= 1000) break;
  }
  if (digits == 0 || *p != '=' || (digits > 1 && entry[n] == '0')) return -1;
  value = p + 1;
  return k < static_cast<int>(kMaxDevices) ? k : -1;
}

void read_env(Env& e) {
  for (char** ep = environ; ep && *ep; ++ep) {
    const char* value = nullptr;
    int k = env_index(*ep, TESSERA_ENV_MEMORY_LIMIT_PREFIX, value);
    if (k != -2) {
      e.enabled = true;  // any limit variable at all turns the library on (fail-safe below)
      char q[kTextBytes];
      if (k < 0) {
        quote(*ep, q, sizeof q);
        log(Level::warn, "ignoring %s: the index after %s must be a decimal from 0 to %zu", q,
            TESSERA_ENV_MEMORY_LIMIT_PREFIX, kMaxDevices - 1);
        continue;
      }
      EnvDevice& d = e.devices[k];
      d.has_limit = true;
      d.limit_ok = parse_bytes(value, d.limit);
      if (!d.limit_ok) {
        quote(value, q, sizeof q);
        log(Level::error,
            "%s%d=%s is not a plain decimal number of bytes; device %d gets quota 0 (every allocation refused)",
            TESSERA_ENV_MEMORY_LIMIT_PREFIX, k, q, k);
      }
      if (k + 1 > e.count) e.count = k + 1;
      continue;
    }
    k = env_index(*ep, TESSERA_ENV_DEVICE_UUID_PREFIX, value);
    if (k >= 0 && strlen(value) < kUuidBytes) snprintf(e.devices[k].uuid, kUuidBytes, "%s", value);
  }
  const char* dir = getenv(TESSERA_ENV_LEDGER_DIR);
  snprintf(e.ledger_dir, sizeof e.ledger_dir, "%s", dir ? dir : "");
  const char* key = getenv(TESSERA_ENV_LEDGER_KEY);
  snprintf(e.key, sizeof e.key, "%s", key && *key ? key : TESSERA_DEFAULT_LEDGER_KEY);
}

// The limits file refused: no context may be created. `problem` says why.
void refuse_limits(Env& e, const char* problem) {
  e = Env{};
  e.enabled = true;
  e.source = Source::file;
  e.refused = true;
  snprintf(e.refusal, sizeof e.refusal,
           "limits file %s: %s; no CUDA context is created (the library never runs without its quota)",
           TESSERA_CONTAINER_LIMITS_FILE, problem);
  log(Level::error, "%s", e.refusal);
}

// Reads the limits file at its fixed container path: a regular file (no
// symlink), on a read-only mount (no process of the container can have
// rewritten it), at most TESSERA_LIMITS_MAX_BYTES bytes, parsed in full.
void read_limits_file(Env& e, bool env_has_quota) {
  const int fd = ::open(TESSERA_CONTAINER_LIMITS_FILE, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
  char problem[512];
  char reason[128];
  if (fd < 0) {
    const int error = errno;
    snprintf(problem, sizeof problem, "cannot be opened: %s%s", strerror_r(error, reason, sizeof reason),
             error == ELOOP ? " (a symbolic link: the device plugin mounts a file there)" : "");
    return refuse_limits(e, problem);
  }
  struct stat st {};
  struct statvfs vfs {};
  char text[kLimitsMaxBytes + 1];
  ssize_t n = -1;
  if (fstat(fd, &st) != 0) {
    snprintf(problem, sizeof problem, "cannot be read: fstat: %s", strerror_r(errno, reason, sizeof reason));
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(problem, sizeof problem, "is not a regular file");
  } else if (fstatvfs(fd, &vfs) != 0) {
    snprintf(problem, sizeof problem, "cannot be read: fstatvfs: %s", strerror_r(errno, reason, sizeof reason));
  } else if (!(vfs.f_flag & ST_RDONLY)) {
    snprintf(problem, sizeof problem,
             "is on a writable mount, so a process of this container could have rewritten it (the device plugin "
             "mounts it read-only)");
  } else if (st.st_size > static_cast<off_t>(kLimitsMaxBytes)) {
    snprintf(problem, sizeof problem, "is %lld bytes, more than a limits file can be (%zu)",
             static_cast<long long>(st.st_size), kLimitsMaxBytes);
  } else {
    std::size_t got = 0;
    for (;;) {
      n = ::read(fd, text + got, sizeof text - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
      if (got == sizeof text) break;
    }
    if (n < 0) {
      snprintf(problem, sizeof problem, "cannot be read: %s", strerror_r(errno, reason, sizeof reason));
    } else {
      Limits limits;
      char why[256];
      if (!parse_limits(text, got, limits, why, sizeof why)) {
        snprintf(problem, sizeof problem, "is malformed: %s", why);
        n = -1;
      } else {
        ::close(fd);
        Env f;
        f.enabled = true;
        f.source = Source::file;
        f.count = static_cast<int>(limits.device_count);
        for (int k = 0; k < f.count; ++k) {
          EnvDevice& d = f.devices[k];
          d.has_limit = d.limit_ok = true;
          d.limit = limits.devices[k].quota;
          d.context = limits.devices[k].context;
          snprintf(d.uuid, sizeof d.uuid, "%s", limits.devices[k].uuid);
        }
        snprintf(f.ledger_dir, sizeof f.ledger_dir, "%s", TESSERA_CONTAINER_LEDGER_DIR);
        snprintf(f.key, sizeof f.key, "%s", limits.key);
        if (env_has_quota)
          log(Level::info, "the limits file %s decides the quota; TESSERA_DEVICE_* and TESSERA_LEDGER_* are ignored",
              TESSERA_CONTAINER_LIMITS_FILE);
        e = f;
        return;
      }
    }
  }
  ::close(fd);
  refuse_limits(e, problem);
}

bool env_has_quota() {
  for (char** ep = environ; ep && *ep; ++ep)
    if (!strncmp(*ep, "TESSERA_DEVICE_", 15) || !strncmp(*ep, "TESSERA_LEDGER_", 15)) return true;
  return false;
}

void read_config() {
  Env& e = g_env;
  struct stat st {};
  if (lstat(TESSERA_CONTAINER_LIMITS_FILE, &st) == 0 || errno != ENOENT) {
    read_limits_file(e, env_has_quota());
    return;
  }
  read_env(e);
  if (const char* announced = getenv(TESSERA_ENV_LIMITS_FILE)) {
    char q[kTextBytes];
    quote(announced, q, sizeof q);
    char problem[256];
    snprintf(problem, sizeof problem,
             "does not exist, though %s=%s says this container has one: it was started without its limits mount",
             TESSERA_ENV_LIMITS_FILE, q);
    refuse_limits(e, problem);
    return;
  }
  if (e.enabled) {
    e.source = Source::env;
    log(Level::warn,
        "no limits file at %s: the quota comes from the environment (%s<k>), which any process of the container can "
        "change or drop",
        TESSERA_CONTAINER_LIMITS_FILE, TESSERA_ENV_MEMORY_LIMIT_PREFIX);
  }
}

// The environment is read once it exists: a sanitizer runtime's start-up
// calls dlsym before libc has set `environ`, and that must not fix the
// library "off" for good.
const Env& env() {
  if (g_env_read.load(std::memory_order_acquire)) return g_env;
  if (!environ) return g_no_env;
  pthread_mutex_lock(&g_env_mu);
  if (!g_env_read.load(std::memory_order_relaxed)) {
    read_config();
    g_env_read.store(true, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_env_mu);
  return g_env;
}

// ---------------------------------------------------------------- devices and ledger

// The 32 hex digits of a UUID text ("GPU-…" / "MIG-…", dashes ignored, any case).
bool uuid_digits(const char* text, char out[33]) {
  const char* p = strchr(text, '-');
  if (!p) return false;
  int n = 0;
  for (++p; *p; ++p) {
    if (*p == '-') continue;
    if (!isxdigit(static_cast<unsigned char>(*p)) || n == 32) return false;
    out[n++] = static_cast<char>(tolower(static_cast<unsigned char>(*p)));
  }
  out[n] = '\0';
  return n == 32;
}

void bytes_digits(const unsigned char bytes[16], char out[33]) {
  for (int i = 0; i < 16; ++i) snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

using GetCount = CUresult (*)(int*);
using GetDevice = CUresult (*)(CUdevice*, int);
using GetUuid = CUresult (*)(CUuuid*, CUdevice);
using TotalMem = CUresult (*)(std::size_t*, CUdevice);

struct Ready {
  int index_of[kMaxOrdinals];  // ledger index, -1 none
  CUdevice ordinal_of[kMaxDevices];  // ledger index -> CUDA ordinal, -1 none
  std::uint64_t total_of[kMaxOrdinals];
  int device_count = 0;  // the driver's cuDeviceGetCount (not capped)
  bool ledger_ok = false;
  // With a limits file, what it or the ledger got wrong (found once the driver
  // could answer): no context may be created.
  bool refused = false;
  char refusal[PATH_MAX + 512] = {};
};

Ledger g_ledger;
Ready g_ready;
std::atomic<int> g_state{0};  // 0 not yet, 1 ready
pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
char g_hostname[64] = "?";

// With a limits file: what it or the ledger got wrong, found once the driver
// could answer. No context may be created from now on.
__attribute__((format(printf, 1, 2))) void refuse_ready(const char* format, ...) {
  if (g_ready.refused) return;
  g_ready.refused = true;
  va_list args;
  va_start(args, format);
  const int n = vsnprintf(g_ready.refusal, sizeof g_ready.refusal, format, args);
  va_end(args);
  if (n >= 0 && static_cast<std::size_t>(n) < sizeof g_ready.refusal)
    snprintf(g_ready.refusal + n, sizeof g_ready.refusal - static_cast<std::size_t>(n),
             "; no CUDA context is created (the library never runs without its quota)");
  log(Level::error, "%s", g_ready.refusal);
}

// Maps CUDA ordinals to ledger devices and opens the ledger. False when the
// driver is not initialised yet (try again on the next call).
bool initialise_locked() {
  const Env& e = env();
  auto get_count = reinterpret_cast<GetCount>(driver_symbol("cuDeviceGetCount"));
  auto get_device = reinterpret_cast<GetDevice>(driver_symbol("cuDeviceGet"));
  auto get_uuid = reinterpret_cast<GetUuid>(driver_symbol("cuDeviceGetUuid_v2"));
  if (!get_uuid) get_uuid = reinterpret_cast<GetUuid>(driver_symbol("cuDeviceGetUuid"));
  auto total_mem = reinterpret_cast<TotalMem>(driver_symbol("cuDeviceTotalMem_v2"));
  int count = 0;
  // Unknown (the driver cannot say): every ordinal counts as a device, refused.
  g_ready.device_count = INT_MAX;
  if (!get_count || !get_device || !get_uuid || !total_mem) {
    log(Level::error, "the CUDA driver lacks device queries; every device gets quota 0");
  } else {
    const CUresult r = get_count(&count);
    if (r == CUDA_ERROR_NOT_INITIALIZED) return false;
    if (r != CUDA_SUCCESS) count = 0;
    else g_ready.device_count = count;
  }
  if (count > kMaxOrdinals) count = kMaxOrdinals;
  gethostname(g_hostname, sizeof g_hostname - 1);
  const bool file = e.source == Source::file;
  for (int k = 0; k < static_cast<int>(kMaxDevices); ++k) g_ready.ordinal_of[k] = -1;
  if (e.refused) {  // the limits file itself: nothing else to look at
    for (int o = 0; o < kMaxOrdinals; ++o) g_ready.index_of[o] = -1;
    g_ready.refused = true;
    snprintf(g_ready.refusal, sizeof g_ready.refusal, "%s", e.refusal);
    return true;
  }

  char wanted[kMaxDevices][33] = {};
  for (int k = 0; k < e.count; ++k)
    if (e.devices[k].uuid[0] && !uuid_digits(e.devices[k].uuid, wanted[k])) {
      char q[kTextBytes];
      quote(e.devices[k].uuid, q, sizeof q);
      if (file)
        log(Level::error, "the limits file's device %d, %s, is not a UUID CUDA can report: no device matches it", k, q);
      else
        log(Level::error, "%s%d=%s is not a GPU or MIG UUID", TESSERA_ENV_DEVICE_UUID_PREFIX, k, q);
      wanted[k][0] = '\0';
    }
  DeviceQuota quotas[kMaxDevices];
  char placeholder[kMaxDevices][24];
  bool seen[kMaxDevices] = {};
  for (int k = 0; k < e.count; ++k) {
    const EnvDevice& d = e.devices[k];
    quotas[k].quota = d.limit_ok ? d.limit : 0;
    quotas[k].memory = quotas[k].quota;
    if (d.uuid[0]) {
      quotas[k].uuid = d.uuid;
    } else {
      snprintf(placeholder[k], sizeof placeholder[k], "unnamed-%d", k);
      quotas[k].uuid = placeholder[k];
      if (d.has_limit)
        log(Level::warn, "%s%d is set but %s%d is not: no device can be matched to it",
            TESSERA_ENV_MEMORY_LIMIT_PREFIX, k, TESSERA_ENV_DEVICE_UUID_PREFIX, k);
    }
  }
  for (int o = 0; o < kMaxOrdinals; ++o) g_ready.index_of[o] = -1;
  for (int o = 0; o < count; ++o) {
    CUdevice dev = 0;
    CUuuid uuid{};
    std::size_t total = 0;
    if (get_device(&dev, o) != CUDA_SUCCESS || get_uuid(&uuid, dev) != CUDA_SUCCESS ||
        total_mem(&total, dev) != CUDA_SUCCESS)
      continue;
    g_ready.total_of[o] = total;
    char digits[33];
    bytes_digits(uuid.bytes, digits);
    int match = -1;
    for (int k = 0; k < e.count && match < 0; ++k)
      if (e.devices[k].has_limit && wanted[k][0] && !strcmp(wanted[k], digits)) match = k;
    if (match < 0) {
      if (file)
        log(Level::error,
            "CUDA device %d (UUID %s) is visible but the limits file %s does not name it; it gets quota 0 (every "
            "allocation refused)",
            o, digits, TESSERA_CONTAINER_LIMITS_FILE);
      else
        log(Level::error,
            "CUDA device %d (UUID %s) is visible but no %s<k> names it; it gets quota 0 (every allocation refused)",
            o, digits, TESSERA_ENV_DEVICE_UUID_PREFIX);
      continue;
    }
    seen[match] = true;
    quotas[match].memory = total;
    if (quotas[match].quota > total) {
      if (file) {
        refuse_ready("limits file %s: device %d (%s) has quota %llu bytes, above the device's memory (%zu bytes)",
               TESSERA_CONTAINER_LIMITS_FILE, match, e.devices[match].uuid,
               static_cast<unsigned long long>(quotas[match].quota), total);
      } else {
        log(Level::error, "%s%d=%llu is above the device's memory (%zu bytes); it gets quota 0",
            TESSERA_ENV_MEMORY_LIMIT_PREFIX, match, static_cast<unsigned long long>(quotas[match].quota), total);
      }
      quotas[match].quota = 0;
    }
    g_ready.index_of[o] = match;
    g_ready.ordinal_of[match] = o;
  }
  for (int k = 0; k < e.count; ++k)
    if (e.devices[k].has_limit && !seen[k] && e.devices[k].uuid[0]) {
      if (file)
        log(Level::warn, "the limits file's device %d, %s, is not visible to CUDA in this process; ignored", k,
            e.devices[k].uuid);
      else
        log(Level::warn, "%s%d names %s, which is not visible to CUDA in this process; ignored",
            TESSERA_ENV_DEVICE_UUID_PREFIX, k, e.devices[k].uuid);
    }

  if (e.count == 0) {
    g_ready.ledger_ok = false;
  } else if (!e.ledger_dir[0]) {
    log(Level::error, "%s is not set: no ledger to share with the container's other processes; every device gets quota 0",
        TESSERA_ENV_LEDGER_DIR);
  } else {
    OpenOptions options;
    options.directory = e.ledger_dir;
    options.key = e.key;
    options.devices = {quotas, static_cast<std::size_t>(e.count)};
    // With a limits file the device plugin made the ledger before the
    // container started, for exactly these quotas.
    options.create = !file;
    options.exact_quota = file;
    g_ready.ledger_ok = !g_ready.refused && g_ledger.open(options);
    if (!g_ready.ledger_ok && !g_ready.refused) {
      if (file) refuse_ready("%s", g_ledger.message());
      else log(Level::error, "%s; every device gets quota 0", g_ledger.message());
    }
  }
  for (int k = 0; k < e.count; ++k)
    log(Level::info, "device %d (%s): quota %llu bytes", k, quotas[k].uuid.data(),
        static_cast<unsigned long long>(g_ready.ledger_ok ? g_ledger.quota(static_cast<std::uint32_t>(k)) : 0));
  return true;
}

bool ready() {
  if (g_state.load(std::memory_order_acquire) == 1) return true;
  pthread_mutex_lock(&g_init_mu);
  bool ok = g_state.load(std::memory_order_relaxed) == 1;
  if (!ok && initialise_locked()) {
    g_state.store(1, std::memory_order_release);
    ok = true;
  }
  pthread_mutex_unlock(&g_init_mu);
  return ok;
}

// ---------------------------------------------------------------- the record table

// Open addressing with linear probing and backward-shift deletion; grows at
// 3/4 load. One mutex: every operation is a handful of probes.
struct Table {
  Record* slots = nullptr;  // key 0 with space 0 marks an empty slot
  std::size_t capacity = 0, size = 0;
};
Table g_table;
pthread_mutex_t g_table_mu = PTHREAD_MUTEX_INITIALIZER;

std::size_t hash(Space space, std::uint64_t key) {
  std::uint64_t h = key ^ (static_cast<std::uint64_t>(space) << 56);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h);
}

bool empty(const Record& r) { return r.space == Space{}; }

std::size_t probe(const Table& t, Space space, std::uint64_t key) {
  std::size_t i = hash(space, key) & (t.capacity - 1);
  while (!empty(t.slots[i]) && (t.slots[i].space != space || t.slots[i].key != key)) i = (i + 1) & (t.capacity - 1);
  return i;
}

bool grow(Table& t) {
  const std::size_t capacity = t.capacity ? t.capacity * 2 : 64;  // small at start-up: 2.5 KiB, not 40
  auto* slots = static_cast<Record*>(calloc(capacity, sizeof(Record)));
  if (!slots) return false;
  Table next{slots, capacity, 0};
  for (std::size_t i = 0; i < t.capacity; ++i)
    if (!empty(t.slots[i])) {
      next.slots[probe(next, t.slots[i].space, t.slots[i].key)] = t.slots[i];
      ++next.size;
    }
  free(t.slots);
  t = next;
  return true;
}

void erase_at(Table& t, std::size_t i) {
  t.slots[i] = Record{};
  --t.size;
  std::size_t j = i;
  for (;;) {
    j = (j + 1) & (t.capacity - 1);
    if (empty(t.slots[j])) return;
    const std::size_t home = hash(t.slots[j].space, t.slots[j].key) & (t.capacity - 1);
    // Move j back into the hole at i if its home is not in (i, j].
    const bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!between) {
      t.slots[i] = t.slots[j];
      t.slots[j] = Record{};
      i = j;
    }
  }
}

struct TableLock {
  TableLock() { pthread_mutex_lock(&g_table_mu); }
  ~TableLock() { pthread_mutex_unlock(&g_table_mu); }
  TableLock(const TableLock&) = delete;
  TableLock& operator=(const TableLock&) = delete;
};

CUcontext g_primary[kMaxOrdinals];
pthread_mutex_t g_primary_mu = PTHREAD_MUTEX_INITIALIZER;

// Contexts created through cuCtxCreate, with their device (under g_primary_mu).
struct KnownContext {
  CUcontext ctx = nullptr;
  CUdevice ordinal = -1;
};
constexpr int kMaxKnownContexts = 64;
KnownContext g_contexts[kMaxKnownContexts];

// A forked child is a new driver client: it owns none of its parent's
// allocations (the ledger's own fork handler gives it no slot either).
void after_fork_child() {
  pthread_mutex_init(&g_table_mu, nullptr);
  free(g_table.slots);
  g_table = Table{};
  pthread_mutex_init(&g_primary_mu, nullptr);
  for (auto& p : g_primary) p = nullptr;
  for (auto& c : g_contexts) c = KnownContext{};
  pthread_mutex_init(&g_init_mu, nullptr);
  pthread_mutex_init(&g_env_mu, nullptr);
}

__attribute__((constructor)) void register_fork_handler() { pthread_atfork(nullptr, nullptr, after_fork_child); }

// ---------------------------------------------------------------- over-quota log rate

std::atomic<std::int64_t> g_oom_window{0};
std::atomic<int> g_oom_in_window{0};
std::atomic<long> g_oom_suppressed{0};

bool oom_log_allowed() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const std::int64_t second = now.tv_sec;
  if (g_oom_window.exchange(second) != second) {
    const long dropped = g_oom_suppressed.exchange(0);
    if (dropped > 0) log(Level::warn, "%ld more out-of-memory refusals were not logged", dropped);
    g_oom_in_window.store(0);
  }
  if (g_oom_in_window.fetch_add(1) < 10) return true;
  g_oom_suppressed.fetch_add(1);
  return false;
}

}  // namespace

void log(Level level, const char* format, ...) {
  if (static_cast<int>(level) > log_level()) return;
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  char line[1024];
  int n = snprintf(line, sizeof line, "tessera-cuda[%d]: %s: ", static_cast<int>(getpid()),
                   kNames[static_cast<int>(level)]);
  va_list args;
  va_start(args, format);
  const int m = vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n) - 1, format, args);
  va_end(args);
  n += m < 0 ? 0 : m;
  if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
  line[n++] = '\n';
  for (const char* p = line; n > 0;) {
    const ssize_t w = write(STDERR_FILENO, p, static_cast<std::size_t>(n));
    if (w <= 0) break;
    p += w;
    n -= static_cast<int>(w);
  }
}

bool enabled() { return env().enabled; }

CUcontext current_context() {
  using GetCurrent = CUresult (*)(CUcontext*);
  static DriverFn<GetCurrent> lookup{"cuCtxGetCurrent"};
  const GetCurrent f = lookup();
  CUcontext ctx = nullptr;
  if (f && f(&ctx) != CUDA_SUCCESS) ctx = nullptr;
  return ctx;
}

namespace {
// Each thread remembers the device of the context it last saw, so a charge
// costs one driver call (cuCtxGetCurrent), not two. Any context destroyed or
// reset anywhere in the process invalidates every thread's memory.
std::atomic<std::uint64_t> g_context_generation{1};
thread_local CUcontext t_context = nullptr;
thread_local CUdevice t_device = -1;
thread_local std::uint64_t t_generation = 0;
}  // namespace

void contexts_changed() { g_context_generation.fetch_add(1, std::memory_order_acq_rel); }

bool current(CUdevice& ordinal, CUcontext& ctx) {
  ctx = current_context();
  if (!ctx) return false;
  const std::uint64_t generation = g_context_generation.load(std::memory_order_acquire);
  if (ctx == t_context && generation == t_generation) {
    ordinal = t_device;
    return true;
  }
  using GetCtxDevice = CUresult (*)(CUdevice*);
  static DriverFn<GetCtxDevice> lookup{"cuCtxGetDevice"};
  const GetCtxDevice f = lookup();
  if (!f || f(&ordinal) != CUDA_SUCCESS) return false;
  t_context = ctx;
  t_device = ordinal;
  t_generation = generation;
  return true;
}

bool current_device(CUdevice& out) {
  CUcontext ctx = nullptr;
  return current(out, ctx);
}

Device device(CUdevice ordinal) {
  Device d;
  if (!ready()) return d;
  // No such device: the driver's own answer (CUDA_ERROR_INVALID_DEVICE), as
  // nothing is allocated.
  if (ordinal < 0 || ordinal >= g_ready.device_count) return d;
  d.known = true;
  if (ordinal < 0 || ordinal >= kMaxOrdinals || !g_ready.ledger_ok) return d;
  d.index = g_ready.index_of[ordinal];
  if (d.index >= 0) d.quota = g_ledger.quota(static_cast<std::uint32_t>(d.index));
  return d;
}

Device device_by_uuid(const char* uuid) {
  Device d;
  if (!ready()) return d;
  d.known = true;
  char digits[33];
  if (!g_ready.ledger_ok || !uuid_digits(uuid, digits)) return d;
  const Env& e = env();
  char wanted[33];
  for (int k = 0; k < e.count; ++k)
    if (e.devices[k].has_limit && e.devices[k].uuid[0] && uuid_digits(e.devices[k].uuid, wanted) &&
        !strcmp(wanted, digits)) {
      d.index = k;
      d.quota = g_ledger.quota(static_cast<std::uint32_t>(k));
    }
  return d;
}

bool try_charge(const Device& dev, std::uint64_t bytes) {
  return dev.index >= 0 && g_ledger.charge(static_cast<std::uint32_t>(dev.index), bytes).status == Status::ok;
}

bool charge(const Device& dev, std::uint64_t bytes, std::uint64_t request) {
  const Env& e = env();
  if (dev.index < 0) {
    if (oom_log_allowed())
      log(Level::error, "out of memory: container %s/%s: no quota can be enforced on this device (see above); request %llu",
          g_hostname, e.key, static_cast<unsigned long long>(request));
    return false;
  }
  const Outcome out = g_ledger.charge(static_cast<std::uint32_t>(dev.index), bytes);
  if (out.status == Status::ok) return true;
  if (oom_log_allowed()) {
    const char* why = out.status == Status::over_quota ? "" :
                      out.status == Status::no_slot    ? " (every ledger slot is held by a live process)" :
                                                         " (the ledger is unusable)";
    log(Level::error, "out of memory: container %s/%s device %d (%s) quota %llu used %llu request %llu%s", g_hostname,
        e.key, dev.index, e.devices[dev.index].uuid, static_cast<unsigned long long>(out.quota),
        static_cast<unsigned long long>(out.charged), static_cast<unsigned long long>(request), why);
  }
  return false;
}

void uncharge(int index, std::uint64_t bytes) {
  if (index < 0 || bytes == 0) return;
  const Outcome out = g_ledger.uncharge(static_cast<std::uint32_t>(index), bytes);
  if (out.status != Status::ok)
    log(Level::warn, "ledger refused to take back %llu bytes on device %d (status %d)",
        static_cast<unsigned long long>(bytes), index, static_cast<int>(out.status));
}

std::uint64_t usage(int index) { return index < 0 ? 0 : g_ledger.usage(static_cast<std::uint32_t>(index)); }

void insert(const Record& r) {
  Record stale{};
  bool had_stale = false;
  {
    TableLock lock;
    if ((g_table.size + 1) * 4 > g_table.capacity * 3 && !grow(g_table)) {
      log(Level::error, "out of host memory for the allocation table; %llu bytes stay charged",
          static_cast<unsigned long long>(r.bytes));
      return;
    }
    const std::size_t i = probe(g_table, r.space, r.key);
    if (!empty(g_table.slots[i])) {
      stale = g_table.slots[i];
      had_stale = true;
    } else {
      ++g_table.size;
    }
    g_table.slots[i] = r;
  }
  // A mapping's or an exec's bytes are no charge of their own (the handle's, the graph pool's are).
  if (had_stale && stale.kind != Kind::mapping && stale.kind != Kind::graph) uncharge(stale.index, stale.bytes);
}

bool take(Space space, std::uint64_t key, Record& out) {
  TableLock lock;
  if (!g_table.capacity) return false;
  const std::size_t i = probe(g_table, space, key);
  if (empty(g_table.slots[i])) return false;
  out = g_table.slots[i];
  erase_at(g_table, i);
  return true;
}

bool find(Space space, std::uint64_t key, Record& out) {
  TableLock lock;
  if (!g_table.capacity) return false;
  const std::size_t i = probe(g_table, space, key);
  if (empty(g_table.slots[i])) return false;
  out = g_table.slots[i];
  return true;
}

bool update(const Record& r) {
  TableLock lock;
  if (!g_table.capacity) return false;
  const std::size_t i = probe(g_table, r.space, r.key);
  if (empty(g_table.slots[i])) return false;
  g_table.slots[i] = r;
  return true;
}

std::size_t take_if(bool (*pick)(const Record&, const void*), const void* arg, Record* out, std::size_t capacity) {
  TableLock lock;
  std::size_t n = 0;
  for (std::size_t i = 0; i < g_table.capacity && n < capacity;) {
    if (!empty(g_table.slots[i]) && pick(g_table.slots[i], arg)) {
      out[n++] = g_table.slots[i];
      erase_at(g_table, i);  // may move a later record into i: look at i again
    } else {
      ++i;
    }
  }
  return n;
}

std::size_t copy_if(bool (*pick)(const Record&, const void*), const void* arg, Record* out, std::size_t capacity) {
  TableLock lock;
  std::size_t n = 0;
  for (std::size_t i = 0; i < g_table.capacity && n < capacity; ++i)
    if (!empty(g_table.slots[i]) && pick(g_table.slots[i], arg)) out[n++] = g_table.slots[i];
  return n;
}

void reclaim_context(CUcontext ctx) {
  contexts_changed();
  Record batch[64];
  for (;;) {
    const std::size_t n = take_if(
        [](const Record& r, const void* c) { return r.kind == Kind::context_bound && r.ctx == c; }, ctx, batch,
        sizeof batch / sizeof batch[0]);
    for (std::size_t i = 0; i < n; ++i) uncharge(batch[i].index, batch[i].bytes);
    if (n < sizeof batch / sizeof batch[0]) return;
  }
}

void context_bytes(CUcontext ctx, std::uint64_t (&out)[kMaxDevices]) {
  TableLock lock;
  for (std::size_t i = 0; i < g_table.capacity; ++i) {
    const Record& r = g_table.slots[i];
    if (!empty(r) && r.kind == Kind::context_bound && r.ctx == ctx && r.index >= 0 &&
        static_cast<std::size_t>(r.index) < kMaxDevices)
      out[r.index] += r.bytes;
  }
}

void note_primary(CUdevice ordinal, CUcontext ctx) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return;
  pthread_mutex_lock(&g_primary_mu);
  g_primary[ordinal] = ctx;
  pthread_mutex_unlock(&g_primary_mu);
}

void note_context(CUcontext ctx, CUdevice ordinal) {
  if (!ctx) return;
  pthread_mutex_lock(&g_primary_mu);
  KnownContext* spare = nullptr;
  for (auto& c : g_contexts) {
    if (c.ctx == ctx) spare = &c;
    if (!c.ctx && !spare) spare = &c;
  }
  if (spare) *spare = KnownContext{ctx, ordinal};
  pthread_mutex_unlock(&g_primary_mu);
}

void forget_context(CUcontext ctx) {
  pthread_mutex_lock(&g_primary_mu);
  for (auto& c : g_contexts)
    if (c.ctx == ctx) c = KnownContext{};
  pthread_mutex_unlock(&g_primary_mu);
}

CUcontext context_on(CUdevice ordinal, CUcontext except) {
  CUcontext found = nullptr;
  pthread_mutex_lock(&g_primary_mu);
  for (const auto& c : g_contexts)
    if (c.ctx && c.ctx != except && c.ordinal == ordinal) found = c.ctx;
  pthread_mutex_unlock(&g_primary_mu);
  return found;
}

bool device_of_context(CUcontext ctx, CUdevice& ordinal) {
  bool found = false;
  pthread_mutex_lock(&g_primary_mu);
  for (const auto& c : g_contexts)
    if (c.ctx && c.ctx == ctx) {
      ordinal = c.ordinal;
      found = true;
    }
  for (CUdevice o = 0; !found && o < kMaxOrdinals; ++o)
    if (g_primary[o] && g_primary[o] == ctx) {
      ordinal = o;
      found = true;
    }
  pthread_mutex_unlock(&g_primary_mu);
  return found;
}

const char* context_refusal() {
  if (!enabled() || !ready()) return nullptr;
  return g_ready.refused ? g_ready.refusal : nullptr;
}

std::uint64_t first_context_charge(int index) {
  const Env& e = env();
  return index >= 0 && index < e.count ? e.devices[index].context : 0;
}

Ledger::ContextSize measured_context_size(int index, std::uint64_t& bytes) {
  if (index < 0 || !ready()) return Ledger::ContextSize::unavailable;
  return g_ledger.context_size(static_cast<std::uint32_t>(index), bytes);
}

void note_context_size(int index, std::uint64_t bytes) {
  if (index >= 0 && ready()) g_ledger.note_context_size(static_cast<std::uint32_t>(index), bytes);
}

void abandon_context_probe(int index) {
  if (index >= 0 && ready()) g_ledger.abandon_context_probe(static_cast<std::uint32_t>(index));
}

bool ledger_release_begin(int index, std::uint64_t bytes) {
  return index >= 0 && ready() && g_ledger.release_begin(static_cast<std::uint32_t>(index), bytes);
}

void ledger_release_end(int index, std::uint64_t bytes) {
  if (index >= 0 && ready()) g_ledger.release_end(static_cast<std::uint32_t>(index), bytes);
}

Ledger::Releases ledger_releases(int index) {
  if (index < 0 || !ready()) return {};
  return g_ledger.releases(static_cast<std::uint32_t>(index));
}

CUdevice ordinal_of(int index) {
  if (index < 0 || index >= static_cast<int>(kMaxDevices) || !ready()) return -1;
  return g_ready.ordinal_of[index];
}

int device_count() { return env().count; }

CUcontext primary_of(CUdevice ordinal) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return nullptr;
  pthread_mutex_lock(&g_primary_mu);
  CUcontext c = g_primary[ordinal];
  pthread_mutex_unlock(&g_primary_mu);
  return c;
}

void* driver_symbol(const char* name) {
  static std::atomic<void*> handle{nullptr};
  void* h = handle.load(std::memory_order_acquire);
  if (!h) {
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return nullptr;
    handle.store(h, std::memory_order_release);
  }
  return real_dlsym(h, name);
}

void* nvml_symbol(const char* name) {
  static std::atomic<void*> handle{nullptr};
  void* h = handle.load(std::memory_order_acquire);
  if (!h) {
    h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return nullptr;
    handle.store(h, std::memory_order_release);
  }
  return real_dlsym(h, name);
}

}  // namespace tessera::quota
