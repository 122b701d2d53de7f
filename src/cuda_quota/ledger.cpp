// The per-container ledger: see ledger.hpp and docs/design-memory-quotas.md §2.
#include "cuda_quota/ledger.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>

namespace tessera::quota {
namespace {

using layout::Header;
using layout::Slot;

constexpr char kFileName[] = "ledger";
constexpr int kOpenFlags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<int>::is_always_lock_free);

std::uint64_t load(const std::uint64_t& value) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(value))
      .load(std::memory_order_relaxed);
}

void store(std::uint64_t& value, std::uint64_t v) {
  std::atomic_ref<std::uint64_t>(value).store(v, std::memory_order_relaxed);
}

std::uint32_t slot_state(const Slot& slot) {
  return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(slot.state))
      .load(std::memory_order_acquire);
}

// CRC-32 (IEEE), a byte at a time through a table built at compile time: every
// process checks the header's ~2.5 KB when it opens the ledger, and the bitwise
// loop cost ~35 us of that start-up.
struct CrcTable {
  std::uint32_t entry[256];
};

constexpr CrcTable make_crc_table() {
  CrcTable t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    t.entry[i] = c;
  }
  return t;
}

constexpr CrcTable kCrcTable = make_crc_table();

std::uint32_t crc32(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = (crc >> 8) ^ kCrcTable.entry[(crc ^ p[i]) & 0xFFu];
  return ~crc;
}

std::uint32_t header_crc(const Header& header) {
  return crc32(&header, offsetof(Header, crc));
}

// Copies `text` into a fixed NUL-terminated field; false if it does not fit or holds a NUL.
bool copy_field(char* field, std::size_t field_bytes, std::string_view text) {
  if (text.size() >= field_bytes || text.find('\0') != std::string_view::npos) return false;
  memset(field, 0, field_bytes);
  memcpy(field, text.data(), text.size());
  return true;
}

bool field_equals(const char* field, std::size_t field_bytes, std::string_view text) {
  const std::size_t length = strnlen(field, field_bytes);
  return length < field_bytes && std::string_view(field, length) == text;
}

const char* error_text(int error, char* buffer, std::size_t size) {
  return strerror_r(error, buffer, size);  // GNU: returns the text
}

// Locks or unlocks the byte at `index` with an open file description lock.
bool ofd_lock(int fd, std::size_t index, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = static_cast<off_t>(index);
  lock.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

const char* fix_for(const OpenOptions& options) {
  return options.create ? "remove it; the next process creates a new ledger"
                        : "create the pod again; the device plugin makes a new ledger at Allocate";
}

}  // namespace

// Every open ledger of this process, for the pthread_atfork child handler.
struct ForkRegistry {
  static inline pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  static inline pthread_once_t once = PTHREAD_ONCE_INIT;
  static inline Ledger* head = nullptr;

  static void prepare() { pthread_mutex_lock(&mutex); }
  static void parent() { pthread_mutex_unlock(&mutex); }
  static void child() {
    for (Ledger* ledger = head; ledger != nullptr; ledger = ledger->next_) ledger->after_fork_child();
    pthread_mutex_unlock(&mutex);
  }
  static void install() { pthread_atfork(&prepare, &parent, &child); }

  static void add(Ledger* ledger) {
    pthread_once(&once, &install);
    pthread_mutex_lock(&mutex);
    ledger->next_ = head;
    ledger->prev_ = nullptr;
    if (head != nullptr) head->prev_ = ledger;
    head = ledger;
    ledger->registered_ = true;
    pthread_mutex_unlock(&mutex);
  }
  static void remove(Ledger* ledger) {
    pthread_mutex_lock(&mutex);
    if (ledger->prev_ != nullptr) ledger->prev_->next_ = ledger->next_;
    else head = ledger->next_;
    if (ledger->next_ != nullptr) ledger->next_->prev_ = ledger->prev_;
    ledger->prev_ = ledger->next_ = nullptr;
    ledger->registered_ = false;
    pthread_mutex_unlock(&mutex);
  }
};

Ledger::Ledger() { pthread_mutex_init(&claim_mutex_, nullptr); }

Ledger::~Ledger() {
  close();
  pthread_mutex_destroy(&claim_mutex_);
}

layout::Slot& Ledger::slot_at(std::size_t index) const {
  return reinterpret_cast<Slot*>(reinterpret_cast<char*>(header_) + kHeaderBytes)[index];
}

int Ledger::slot() const {
  return std::atomic_ref<int>(const_cast<int&>(slot_)).load(std::memory_order_acquire);
}

std::uint64_t Ledger::quota(std::uint32_t device) const {
  return device < device_count_ ? quota_[device] : 0;
}

bool read_ledger(const char* directory, Reading& out) {
  out.device_count = 0;
  out.message[0] = '\0';
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", directory, kFileName) >= static_cast<int>(sizeof path)) {
    snprintf(out.message, sizeof out.message, "ledger path under %.200s: too long", directory);
    return false;
  }
  char buffer[128];
  const int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    snprintf(out.message, sizeof out.message, "ledger %s: %s", path, error_text(errno, buffer, sizeof buffer));
    return false;
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(kLedgerFileBytes)) {
    snprintf(out.message, sizeof out.message, "ledger %s: not a regular file of %zu bytes", path, kLedgerFileBytes);
    ::close(fd);
    return false;
  }
  void* map = mmap(nullptr, kHeaderBytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) {
    snprintf(out.message, sizeof out.message, "ledger %s: mmap: %s", path, error_text(errno, buffer, sizeof buffer));
    return false;
  }
  const Header& h = *static_cast<const Header*>(map);
  const char* problem = nullptr;
  if (memcmp(h.magic, kLedgerMagic, sizeof h.magic) != 0)
    problem = "bad magic, not a tessera ledger";
  else if (h.version != kLedgerVersion)
    problem = "another layout version";
  else if (h.header_bytes != kHeaderBytes || h.slot_bytes != kSlotBytes || h.slot_count != kSlotCount ||
           h.file_bytes != kLedgerFileBytes || h.device_count == 0 || h.device_count > kMaxDevices)
    problem = "its geometry is not this version's";
  else if (header_crc(h) != h.crc)
    problem = "CRC mismatch";
  if (problem != nullptr) {
    snprintf(out.message, sizeof out.message, "ledger %s: %s", path, problem);
    munmap(map, kHeaderBytes);
    return false;
  }
  memcpy(out.key, h.key, kKeyBytes);
  out.key[kKeyBytes - 1] = '\0';
  for (std::uint32_t d = 0; d < h.device_count; ++d) {
    DeviceReading& r = out.devices[d];
    memcpy(r.uuid, h.devices[d].uuid, kUuidBytes);
    r.uuid[kUuidBytes - 1] = '\0';
    r.quota = h.devices[d].quota;
    r.memory = h.devices[d].memory;
    r.charged = load(h.charged[d]);
  }
  out.device_count = h.device_count;
  munmap(map, kHeaderBytes);
  return true;
}

std::uint64_t Ledger::usage(std::uint32_t device) const {
  if (header_ == nullptr || device >= device_count_) return 0;
  return load(header_->charged[device]);
}

namespace {

std::uint64_t whole_mib(std::uint64_t bytes) { return (bytes >> 20) + ((bytes & ((1ULL << 20) - 1)) != 0); }

}  // namespace

bool Ledger::release_begin(std::uint32_t device, std::uint64_t bytes) {
  const int index = slot();
  if (header_ == nullptr || !usable_ || index < 0 || device >= device_count_) return false;
  const std::uint64_t mib = whole_mib(bytes);
  // Under way first, then begun: a measurement reads begun, then what is under way, and so sees
  // each free in one of them (design §7, "measured").
  std::atomic_ref<std::uint32_t>(slot_at(static_cast<std::size_t>(index)).releasing_mib[device])
      .fetch_add(static_cast<std::uint32_t>(mib));
  std::atomic_ref<std::uint64_t>(header_->releases_begun_mib[device]).fetch_add(mib);
  return true;
}

void Ledger::release_end(std::uint32_t device, std::uint64_t bytes) {
  const int index = slot();
  if (header_ == nullptr || index < 0 || device >= device_count_) return;
  std::atomic_ref<std::uint32_t> under_way(slot_at(static_cast<std::size_t>(index)).releasing_mib[device]);
  const auto mib = static_cast<std::uint32_t>(whole_mib(bytes));
  // Never below zero (a reap in between cannot happen to a live slot, but a file is shared).
  std::uint32_t now = under_way.load();
  while (!under_way.compare_exchange_weak(now, now - (mib < now ? mib : now))) {
  }
}

Ledger::Releases Ledger::releases(std::uint32_t device) const {
  Releases r;
  if (header_ == nullptr || device >= device_count_) return r;
  r.begun = std::atomic_ref<std::uint64_t>(header_->releases_begun_mib[device]).load() << 20;
  std::uint64_t mib = 0;
  for (std::size_t i = 0; i < kSlotCount; ++i) {
    Slot& s = slot_at(i);
    if (slot_state(s) != layout::kSlotLive) continue;
    const std::uint32_t m = std::atomic_ref<std::uint32_t>(s.releasing_mib[device]).load();
    // A process killed in the middle of a free is not reaped until a slot or a charge needs it:
    // its free is over (the driver freed a dead process's memory), so it is not under way.
    if (m != 0 && slot_alive(i)) mib += m;
  }
  r.under_way = mib << 20;
  return r;
}

Ledger::ContextSize Ledger::context_size(std::uint32_t device, std::uint64_t& bytes, std::uint64_t stale_ms) {
  if (header_ == nullptr || device >= device_count_) return ContextSize::unavailable;
  std::atomic_ref<std::uint64_t> word(header_->context_bytes[device]);
  std::uint64_t v = word.load(std::memory_order_acquire);
  if (v & layout::kContextMeasured) {
    bytes = v & ~layout::kContextMeasured;
    return ContextSize::measured;
  }
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::uint64_t now_ms = static_cast<std::uint64_t>(ts.tv_sec) * 1000 + static_cast<std::uint64_t>(ts.tv_nsec) / 1000000;
  if ((v & layout::kContextProbing) && now_ms - (v & ~layout::kContextProbing) < stale_ms) return ContextSize::wait;
  const std::uint64_t claim = layout::kContextProbing | (now_ms & ~(layout::kContextMeasured | layout::kContextProbing));
  return word.compare_exchange_strong(v, claim, std::memory_order_acq_rel) ? ContextSize::probe : ContextSize::wait;
}

void Ledger::note_context_size(std::uint32_t device, std::uint64_t bytes) {
  if (header_ == nullptr || device >= device_count_ || (bytes & (layout::kContextMeasured | layout::kContextProbing)))
    return;
  std::atomic_ref<std::uint64_t>(header_->context_bytes[device])
      .store(bytes | layout::kContextMeasured, std::memory_order_release);
}

void Ledger::abandon_context_probe(std::uint32_t device) {
  if (header_ == nullptr || device >= device_count_) return;
  std::atomic_ref<std::uint64_t> word(header_->context_bytes[device]);
  std::uint64_t v = word.load(std::memory_order_acquire);
  if ((v & layout::kContextProbing) && !(v & layout::kContextMeasured))
    word.compare_exchange_strong(v, 0, std::memory_order_acq_rel);
}

bool Ledger::refuse(const char* problem, const char* fix) {
  // Truncation is acceptable here (a message, cut at its buffer), but GCC's
  // -O2 analysis warns about it; checking the result keeps the intent visible.
  if (snprintf(message_, sizeof message_, "ledger %s refused: %s; %s", path_, problem, fix) < 0) message_[0] = '\0';
  close();
  return false;
}

bool Ledger::open(const OpenOptions& options) {
  close();
  message_[0] = '\0';
  path_[0] = '\0';
  if (options.devices.empty() || options.devices.size() > kMaxDevices) {
    snprintf(message_, sizeof message_, "ledger: %zu devices given, expected 1 to %zu",
             options.devices.size(), kMaxDevices);
    return false;
  }
  if (options.key.size() >= kKeyBytes || options.key.find('\0') != std::string_view::npos) {
    snprintf(message_, sizeof message_, "ledger: the key is longer than %zu bytes or holds a NUL",
             kKeyBytes - 1);
    return false;
  }
  for (std::size_t d = 0; d < options.devices.size(); ++d) {
    const std::string_view uuid = options.devices[d].uuid;
    if (uuid.empty() || uuid.size() >= kUuidBytes || uuid.find('\0') != std::string_view::npos) {
      snprintf(message_, sizeof message_,
               "ledger: device %zu's UUID is empty, longer than %zu bytes or holds a NUL", d,
               kUuidBytes - 1);
      return false;
    }
  }
  // Room for "/ledger.tmp.<pid>" as well.
  if (options.directory.empty() || options.directory.size() + 32 >= sizeof path_) {
    snprintf(message_, sizeof message_, "ledger: the directory name is empty or too long");
    return false;
  }
  snprintf(path_, sizeof path_, "%.*s/%s", static_cast<int>(options.directory.size()),
           options.directory.data(), kFileName);

  device_count_ = static_cast<std::uint32_t>(options.devices.size());
  for (std::size_t d = 0; d < options.devices.size(); ++d) quota_[d] = options.devices[d].quota;

  // Open the published file; if there is none, publish one (one creator wins) and open that.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    fd_ = ::open(path_, kOpenFlags);
    if (fd_ >= 0) break;
    const int error = errno;
    if (error == ENOENT && options.create && attempt < 3) {
      if (!create_file(options)) return false;
      continue;
    }
    if (error == ENOENT)
      return refuse("it does not exist", "the device plugin creates it at Allocate, before the container starts: "
                                         "check the container's mounts, or create the pod again");
    if (error == ELOOP) return refuse("it is a symbolic link", fix_for(options));
    if (error == EISDIR) return refuse("it is not a regular file", fix_for(options));
    char buffer[128];
    char problem[192];
    snprintf(problem, sizeof problem, "cannot open it: %s", error_text(error, buffer, sizeof buffer));
    return refuse(problem, "check the directory's mount and permissions");
  }

  struct stat st {};
  if (fstat(fd_, &st) != 0) return refuse("fstat failed", "check the directory's mount");
  if (!S_ISREG(st.st_mode)) return refuse("it is not a regular file", fix_for(options));
  if (st.st_uid != options.uid && st.st_uid != 0 && options.uid != 0) {
    char problem[160];
    snprintf(problem, sizeof problem, "it is owned by uid %u, neither uid %u nor root",
             static_cast<unsigned>(st.st_uid), static_cast<unsigned>(options.uid));
    return refuse(problem, fix_for(options));
  }
  if (st.st_size != static_cast<off_t>(kLedgerFileBytes)) {
    char problem[160];
    snprintf(problem, sizeof problem, "its size is %lld bytes, expected %zu",
             static_cast<long long>(st.st_size), kLedgerFileBytes);
    return refuse(problem, fix_for(options));
  }
  file_dev_ = st.st_dev;
  file_ino_ = st.st_ino;

  void* map = mmap(nullptr, kLedgerFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (map == MAP_FAILED) return refuse("mmap failed", "check the directory's mount");
  header_ = static_cast<Header*>(map);
  if (!check_header(options)) return false;

  usable_ = true;
  ForkRegistry::add(this);
  if (claim_slot() < 0) {
    snprintf(message_, sizeof message_,
             "ledger %s: no free slot: all %zu slots are held by live processes", path_, kSlotCount);
    close();
    return false;
  }
  return true;
}

bool Ledger::check_header(const OpenOptions& options) {
  const Header& h = *header_;
  const char* fix = fix_for(options);
  char problem[512];
  if (memcmp(h.magic, kLedgerMagic, sizeof h.magic) != 0) return refuse("bad magic, not a tessera ledger", fix);
  if (h.version != kLedgerVersion) {
    snprintf(problem, sizeof problem, "layout version %u, expected %u", h.version, kLedgerVersion);
    return refuse(problem, fix);
  }
  if (h.header_bytes != kHeaderBytes || h.slot_bytes != kSlotBytes || h.slot_count != kSlotCount ||
      h.file_bytes != kLedgerFileBytes || h.device_count == 0 || h.device_count > kMaxDevices) {
    return refuse("its geometry (header, slot or file size, slot or device count) is not this version's", fix);
  }
  const std::uint32_t crc = header_crc(h);
  if (crc != h.crc) {
    snprintf(problem, sizeof problem, "CRC mismatch (stored %08x, computed %08x)", h.crc, crc);
    return refuse(problem, fix);
  }
  if (!field_equals(h.key, kKeyBytes, options.key)) {
    snprintf(problem, sizeof problem, "it belongs to key \"%.*s\", not \"%.*s\"",
             static_cast<int>(strnlen(h.key, kKeyBytes)), h.key, static_cast<int>(options.key.size()),
             options.key.data());
    return refuse(problem, "check TESSERA_LEDGER_DIR's mount");
  }
  if (h.device_count != options.devices.size()) {
    snprintf(problem, sizeof problem, "it has %u devices, this container %zu", h.device_count,
             options.devices.size());
    return refuse(problem, "check TESSERA_LEDGER_DIR's mount");
  }
  for (std::size_t d = 0; d < h.device_count; ++d) {
    const layout::Device& device = h.devices[d];
    if (!field_equals(device.uuid, kUuidBytes, options.devices[d].uuid)) {
      snprintf(problem, sizeof problem, "device %zu is %.*s, not this container's %.*s", d,
               static_cast<int>(strnlen(device.uuid, kUuidBytes)), device.uuid,
               static_cast<int>(options.devices[d].uuid.size()), options.devices[d].uuid.data());
      return refuse(problem, "check TESSERA_LEDGER_DIR's mount");
    }
    const std::uint64_t charged = load(h.charged[d]);
    if (charged > device.memory) {
      snprintf(problem, sizeof problem, "device %zu charged %llu bytes, above its memory %llu", d,
               static_cast<unsigned long long>(charged), static_cast<unsigned long long>(device.memory));
      return refuse(problem, fix);
    }
    if (options.exact_quota && device.quota != quota_[d]) {
      snprintf(problem, sizeof problem,
               "device %zu's quota in it is %llu bytes, the limits file's %llu: it was not made by the device plugin "
               "for this container's limits, or they were rewritten",
               d, static_cast<unsigned long long>(device.quota), static_cast<unsigned long long>(quota_[d]));
      return refuse(problem, "create the pod again; the device plugin writes both at Allocate");
    }
    if (device.quota < quota_[d]) quota_[d] = device.quota;
  }
  return true;
}

namespace {

// Fills a new, empty file `fd` with a complete ledger, mutex included, before
// anyone can open it. The caller checked the key's and UUIDs' lengths.
bool build_file(int fd, std::string_view key, std::span<const DeviceQuota> devices, std::uint32_t creator_uid) {
  bool built = false;
  if (fchmod(fd, 0666) != 0 || ftruncate(fd, static_cast<off_t>(kLedgerFileBytes)) != 0) return false;
  void* map = mmap(nullptr, kLedgerFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return false;
  auto* h = static_cast<Header*>(map);  // the file is all zeros
  memcpy(h->magic, kLedgerMagic, sizeof h->magic);
  h->version = kLedgerVersion;
  h->header_bytes = kHeaderBytes;
  h->slot_bytes = kSlotBytes;
  h->slot_count = kSlotCount;
  h->file_bytes = kLedgerFileBytes;
  h->device_count = static_cast<std::uint32_t>(devices.size());
  h->creator_uid = creator_uid;
  built = copy_field(h->key, kKeyBytes, key);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    built = built && copy_field(h->devices[d].uuid, kUuidBytes, devices[d].uuid);
    h->devices[d].quota = devices[d].quota;
    h->devices[d].memory = devices[d].memory;
  }
  h->crc = header_crc(*h);
  pthread_mutexattr_t attr;
  built = built && pthread_mutexattr_init(&attr) == 0;
  if (built) {
    built = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
            pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 && pthread_mutex_init(&h->mutex, &attr) == 0;
    pthread_mutexattr_destroy(&attr);
  }
  munmap(map, kLedgerFileBytes);
  return built;
}

bool valid_text(std::string_view text, std::size_t field_bytes) {
  return !text.empty() && text.size() < field_bytes && text.find('\0') == std::string_view::npos;
}

}  // namespace

bool Ledger::create_file(const OpenOptions& options) {
  char tmp[PATH_MAX + 32];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path_, static_cast<long>(getpid()));
  char buffer[128];
  char problem[PATH_MAX + 192];
  unlink(tmp);  // a leftover of a dead process that had our pid
  const int fd = ::open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    snprintf(problem, sizeof problem, "cannot create %s: %s", tmp, error_text(errno, buffer, sizeof buffer));
    return refuse(problem, "check the directory's mount and permissions (mode 1777)");
  }
  const bool built = build_file(fd, options.key, options.devices, static_cast<std::uint32_t>(options.uid));
  ::close(fd);
  if (!built) {
    unlink(tmp);
    return refuse("cannot build a new ledger file", "check the directory's free space and permissions");
  }
  // Publish: link() fails with EEXIST for every creator but one; all then open the winner's.
  const int linked = link(tmp, path_) == 0 ? 0 : errno;
  unlink(tmp);
  if (linked != 0 && linked != EEXIST) {
    snprintf(problem, sizeof problem, "cannot publish %s: %s", tmp, error_text(linked, buffer, sizeof buffer));
    return refuse(problem, "check the directory's mount and permissions (mode 1777)");
  }
  return true;
}

Prepared prepare_ledger(const PrepareOptions& options) {
  Prepared out;
  char buffer[128];
  auto fail = [&](const char* what, int error) {
    snprintf(out.message, sizeof out.message, "ledger in %.*s: %s%s%s", static_cast<int>(options.directory.size()),
             options.directory.data(), what, error ? ": " : "", error ? error_text(error, buffer, sizeof buffer) : "");
    return out;
  };
  if (options.devices.empty() || options.devices.size() > kMaxDevices) return fail("1 to 16 devices are needed", 0);
  if (!valid_text(options.key, kKeyBytes)) return fail("the key is empty, too long or holds a NUL", 0);
  for (const auto& d : options.devices)
    if (!valid_text(d.uuid, kUuidBytes)) return fail("a device UUID is empty, too long or holds a NUL", 0);
  char path[PATH_MAX];
  if (options.directory.empty() || options.directory.size() + 48 >= sizeof path) return fail("the directory name is empty or too long", 0);
  snprintf(path, sizeof path, "%.*s/%s", static_cast<int>(options.directory.size()), options.directory.data(), kFileName);

  // What the path holds now: never followed, never written.
  const int old = ::open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (old >= 0) {
    struct stat st {};
    if (fstat(old, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == static_cast<off_t>(kLedgerFileBytes)) {
      // A live process holds a slot while it holds an OFD lock on the slot's
      // byte. F_OFD_GETLK names one conflicting lock, not necessarily the
      // first: ask for the whole range, then count byte by byte if any.
      auto held = [&](std::size_t first, std::size_t count) {
        struct flock lock {};
        lock.l_type = F_RDLCK;  // conflicts with a holder's write lock; needs only a read descriptor
        lock.l_whence = SEEK_SET;
        lock.l_start = static_cast<off_t>(first);
        lock.l_len = static_cast<off_t>(count);
        return fcntl(old, F_OFD_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
      };
      if (held(0, kSlotCount))
        for (std::size_t i = 0; i < kSlotCount; ++i) out.holders += held(i, 1) ? 1 : 0;
      if (out.holders > 0) {
        void* map = mmap(nullptr, kHeaderBytes, PROT_READ, MAP_SHARED, old, 0);
        if (map != MAP_FAILED) {
          const Header& h = *static_cast<const Header*>(map);
          bool same = memcmp(h.magic, kLedgerMagic, sizeof h.magic) == 0 && h.version == kLedgerVersion &&
                      header_crc(h) == h.crc && h.device_count == options.devices.size() &&
                      field_equals(h.key, kKeyBytes, options.key);
          for (std::size_t d = 0; same && d < options.devices.size(); ++d)
            same = field_equals(h.devices[d].uuid, kUuidBytes, options.devices[d].uuid) &&
                   h.devices[d].quota == options.devices[d].quota;
          munmap(map, kHeaderBytes);
          if (same) {
            ::close(old);
            out.ok = out.reused = true;
            return out;
          }
        }
      }
    }
    ::close(old);
  }

  // Build a new one aside and rename it over the path: a process that still
  // maps the old file keeps it, every process from now on opens this one.
  static std::atomic<unsigned> counter{0};
  char tmp[PATH_MAX + 64];
  snprintf(tmp, sizeof tmp, "%s.new.%ld.%u", path, static_cast<long>(getpid()), counter.fetch_add(1));
  unlink(tmp);
  const int fd = ::open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return fail("cannot create a new ledger", errno);
  const bool built = build_file(fd, options.key, options.devices, static_cast<std::uint32_t>(geteuid()));
  const int build_error = errno;
  ::close(fd);
  if (!built) {
    unlink(tmp);
    return fail("cannot build a new ledger", build_error);
  }
  if (rename(tmp, path) != 0) {
    const int error = errno;
    unlink(tmp);
    return fail("cannot put the new ledger in place", error);
  }
  out.ok = true;
  if (out.holders > 0)
    snprintf(out.message, sizeof out.message,
             "ledger %s: replaced while %u process(es) still held the old one (its devices or quotas differ); "
             "they keep it, new processes use the new one",
             path, out.holders);
  return out;
}

namespace {

// Whether the process that claimed a slot (its pid, and CLOCK_BOOTTIME when
// it claimed) still runs: /proc/<pid>/stat names a process that is not a
// zombie and started no later than the claim (a pid reused since started
// after it). Only asked of a slot whose lock is free, which a dead process's
// is, and which a live tenant can make its own by unlocking it
// (F_OFD_SETLK, F_UNLCK on the library's descriptor): its charges stay.
// Anything unreadable but a missing entry counts as alive: keep the charge.
bool claimer_runs(std::int32_t pid, std::uint64_t claimed_ns) {
  if (pid <= 0) return false;
  char path[40];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT && errno != ESRCH;
  char text[1024];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return n < 0 && errno != ESRCH;  // a process gone between open and read reads ESRCH
  text[n] = '\0';
  // "pid (comm) state ppid ... starttime": comm may hold spaces and parentheses; fields follow the last ')'.
  const char* p = strrchr(text, ')');
  if (p == nullptr) return true;
  ++p;
  char state = 0;
  unsigned long long start_ticks = 0;
  for (int field = 3; field <= 22; ++field) {  // 1-based, as proc(5) numbers them
    while (*p == ' ') ++p;
    if (*p == '\0') return true;
    if (field == 3) state = *p;
    if (field == 22) start_ticks = strtoull(p, nullptr, 10);
    while (*p != ' ' && *p != '\0') ++p;
  }
  if (state == 'Z' || state == 'X') return false;  // exited: its descriptors and GPU memory are gone
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return true;
  const std::uint64_t tick_ns = 1000000000ULL / static_cast<std::uint64_t>(hz);
  return start_ticks * tick_ns <= claimed_ns + 2 * tick_ns;  // starttime is whole ticks
}

}  // namespace

bool Ledger::slot_alive(std::size_t index) const {
  if (static_cast<int>(index) == slot()) return true;  // our own lock never conflicts with us
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = static_cast<off_t>(index);
  lock.l_len = 1;
  if (fcntl(fd_, F_OFD_GETLK, &lock) != 0) return true;  // cannot tell: keep it
  if (lock.l_type != F_UNLCK) return true;
  const Slot& s = slot_at(index);
  return claimer_runs(__atomic_load_n(&s.pid, __ATOMIC_RELAXED), __atomic_load_n(&s.claimed_ns, __ATOMIC_RELAXED));
}

// Under the mutex: frees every live-marked slot whose lock nobody holds, taking its charges off.
void Ledger::reap() {
  for (std::size_t i = 0; i < kSlotCount; ++i) {
    Slot& s = slot_at(i);
    if (slot_state(s) != layout::kSlotLive || slot_alive(i)) continue;
    for (std::size_t d = 0; d < kMaxDevices; ++d) {
      const std::uint64_t mine = s.charged[d];
      const std::uint64_t total = load(header_->charged[d]);
      store(header_->charged[d], total - (mine < total ? mine : total));
      s.charged[d] = 0;
      std::atomic_ref<std::uint32_t>(s.releasing_mib[d]).store(0);  // its frees under way died with it
    }
    s.pid = 0;
    std::atomic_ref<std::uint32_t>(s.state).store(layout::kSlotFree, std::memory_order_release);
  }
}

bool Ledger::lock() {
  const int rc = pthread_mutex_lock(&header_->mutex);
  if (rc == 0) return true;
  if (rc != EOWNERDEAD) return false;  // ENOTRECOVERABLE
  // The owner died inside the critical section: whatever it half did is in its own (dead) slot
  // and in the totals, so reap the dead and recompute the totals from the living.
  reap();
  for (std::size_t d = 0; d < kMaxDevices; ++d) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < kSlotCount; ++i) {
      const Slot& s = slot_at(i);
      if (slot_state(s) == layout::kSlotLive) sum += s.charged[d];
    }
    store(header_->charged[d], sum);
  }
  store(header_->repairs, load(header_->repairs) + 1);
  pthread_mutex_consistent(&header_->mutex);
  return true;
}

void Ledger::unlock() { pthread_mutex_unlock(&header_->mutex); }

// Lock-free: a slot whose byte we lock and whose state we turn free -> live is ours.
int Ledger::claim_slot() {
  const auto start = static_cast<std::size_t>((static_cast<std::uint32_t>(getpid()) * 2654435761u) >> 22);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t k = 0; k < kSlotCount; ++k) {
      const std::size_t i = (start + k) % kSlotCount;
      Slot& s = slot_at(i);
      if (slot_state(s) != layout::kSlotFree) continue;
      if (!ofd_lock(fd_, i, F_WRLCK)) continue;
      std::uint32_t expected = layout::kSlotFree;
      if (!std::atomic_ref<std::uint32_t>(s.state)
               .compare_exchange_strong(expected, layout::kSlotLive, std::memory_order_acq_rel)) {
        ofd_lock(fd_, i, F_UNLCK);
        continue;
      }
      struct timespec now {};
      clock_gettime(CLOCK_BOOTTIME, &now);
      __atomic_store_n(&s.claimed_ns,
                       static_cast<std::uint64_t>(now.tv_sec) * 1000000000u + static_cast<std::uint64_t>(now.tv_nsec),
                       __ATOMIC_RELAXED);
      __atomic_store_n(&s.pid, static_cast<std::int32_t>(getpid()), __ATOMIC_RELAXED);
      std::atomic_ref<int>(slot_).store(static_cast<int>(i), std::memory_order_release);
      return static_cast<int>(i);
    }
    if (pass == 0) {  // no slot free: free the dead ones and look again
      if (!lock()) return -1;
      reap();
      unlock();
    }
  }
  return -1;
}

int Ledger::ensure_slot() {
  int current = slot();
  if (current >= 0) return current;
  pthread_mutex_lock(&claim_mutex_);
  current = slot();
  if (current < 0) current = claim_slot();
  pthread_mutex_unlock(&claim_mutex_);
  return current;
}

bool Ledger::check_device(std::uint32_t device, Outcome& out) const {
  if (header_ == nullptr || !usable_) return false;
  if (device >= device_count_) {
    out.status = Status::bad_device;
    return false;
  }
  out.quota = quota_[device];
  return true;
}

Outcome Ledger::charge(std::uint32_t device, std::uint64_t bytes) {
  Outcome out;
  if (!check_device(device, out)) return out;
  const int index = ensure_slot();
  if (index < 0) {
    out.status = Status::no_slot;
    out.charged = usage(device);
    return out;
  }
  if (!lock()) return out;
  std::uint64_t charged = load(header_->charged[device]);
  auto over = [&] { return bytes > out.quota || charged > out.quota - bytes; };
  if (over()) {
    reap();
    charged = load(header_->charged[device]);
    if (over()) {
      unlock();
      out.status = Status::over_quota;
      out.charged = charged;
      return out;
    }
  }
  store(header_->charged[device], charged + bytes);
  slot_at(static_cast<std::size_t>(index)).charged[device] += bytes;
  unlock();
  out.status = Status::ok;
  out.applied = bytes;
  out.charged = charged + bytes;
  return out;
}

Outcome Ledger::uncharge(std::uint32_t device, std::uint64_t bytes) {
  Outcome out;
  if (!check_device(device, out)) return out;
  const int index = slot();
  if (index < 0) {  // nothing charged by this process since it started or forked
    out.status = bytes == 0 ? Status::ok : Status::exceeds_recorded;
    out.charged = usage(device);
    return out;
  }
  if (!lock()) return out;
  Slot& s = slot_at(static_cast<std::size_t>(index));
  const std::uint64_t mine = s.charged[device];
  const std::uint64_t taken = bytes < mine ? bytes : mine;
  const std::uint64_t total = load(header_->charged[device]);
  s.charged[device] = mine - taken;
  store(header_->charged[device], total - (taken < total ? taken : total));
  out.charged = load(header_->charged[device]);
  unlock();
  out.status = taken == bytes ? Status::ok : Status::exceeds_recorded;
  out.applied = taken;
  return out;
}

Audit Ledger::audit(std::uint32_t device) {
  Audit out;
  if (header_ == nullptr || !usable_ || device >= device_count_ || !lock()) return out;
  out.charged = load(header_->charged[device]);
  for (std::size_t i = 0; i < kSlotCount; ++i) {
    const Slot& s = slot_at(i);
    if (slot_state(s) != layout::kSlotLive) continue;
    ++out.slots_marked;
    out.slot_sum += s.charged[device];
    if (slot_alive(i)) ++out.slots_alive;
  }
  out.repairs = load(header_->repairs);
  unlock();
  out.ok = true;
  return out;
}

bool Ledger::test_lock_mid_charge(std::uint32_t device, std::uint64_t bytes) {
  if (header_ == nullptr || !usable_ || device >= device_count_ || ensure_slot() < 0 || !lock()) return false;
  store(header_->charged[device], load(header_->charged[device]) + bytes);
  return true;
}

void Ledger::close() {
  if (registered_) ForkRegistry::remove(this);
  const int index = slot();
  if (header_ != nullptr && usable_ && index >= 0 && lock()) {
    Slot& s = slot_at(static_cast<std::size_t>(index));
    for (std::size_t d = 0; d < kMaxDevices; ++d) {
      const std::uint64_t total = load(header_->charged[d]);
      store(header_->charged[d], total - (s.charged[d] < total ? s.charged[d] : total));
      s.charged[d] = 0;
      std::atomic_ref<std::uint32_t>(s.releasing_mib[d]).store(0);
    }
    s.pid = 0;
    std::atomic_ref<std::uint32_t>(s.state).store(layout::kSlotFree, std::memory_order_release);
    unlock();
  }
  std::atomic_ref<int>(slot_).store(-1, std::memory_order_release);
  if (header_ != nullptr) munmap(header_, kLedgerFileBytes);
  header_ = nullptr;
  if (fd_ >= 0) ::close(fd_);  // drops the slot's lock
  fd_ = -1;
  usable_ = false;
  device_count_ = 0;
}

// In the child after fork(), single-threaded: give up the parent's open file description, and
// so its slot lock, and open the file again; the child claims its own slot on first use. Both the
// descriptor and the mapping hold that description (the kernel drops an OFD lock only when the
// last reference goes), so the mapping is replaced by one of the new description at the same
// address: same file, same shared pages.
void Ledger::after_fork_child() {
  pthread_mutex_init(&claim_mutex_, nullptr);
  std::atomic_ref<int>(slot_).store(-1, std::memory_order_relaxed);
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_, kOpenFlags);
  struct stat st {};
  usable_ = fd_ >= 0 && fstat(fd_, &st) == 0 && st.st_dev == file_dev_ && st.st_ino == file_ino_;
  if (header_ == nullptr) return;
  if (usable_) {
    usable_ = mmap(header_, kLedgerFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, 0) !=
              MAP_FAILED;
  }
  if (!usable_) {  // drop the parent's mapping all the same
    munmap(header_, kLedgerFileBytes);
    header_ = nullptr;
  }
}

}  // namespace tessera::quota
