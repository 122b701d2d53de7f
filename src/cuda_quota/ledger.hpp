// The per-container memory ledger of the planned quota library
// (docs/design-memory-quotas.md §2): one fixed-size file, `<directory>/ledger`,
// mapped MAP_SHARED by every process of a container. It holds per device the
// quota and the bytes charged, one robust process-shared mutex, and 1024 slots,
// one per live process, each with what that process charged.
//
// Rules this code keeps:
// - glibc/POSIX and the C++ language runtime only; no exception leaves the API
//   (the target builds with -fno-exceptions); no heap allocation at all.
// - Start-up (`open`) takes no lock and is O(1) in the number of processes:
//   open, fstat, mmap, header checks, a slot claimed from hash(pid) onwards.
// - A process owns a slot while it holds an open-file-description lock
//   (F_OFD_SETLK) on the byte at the slot's index; the kernel drops it when the
//   process dies, SIGKILL included. A `live` slot whose byte is unlocked, and
//   whose claimer no longer runs (/proc/<pid>/stat: gone, a zombie, or a newer
//   process under a reused pid), is dead and is reaped (its charges subtracted, the slot freed) under the mutex: on
//   EOWNERDEAD, before refusing a charge, and when no slot is free.
// - A slot and the header's `charged` are written together, only under the
//   mutex, and a slot only by its own process; so the repair after EOWNERDEAD is
//   always: reap dead slots, recompute each `charged` as the sum of live slots,
//   pthread_mutex_consistent.
//
// Fork policy: the ledger's descriptor is O_CLOEXEC, so an exec'd program never
// inherits it. A forked child inherits the parent's open file description twice,
// through the descriptor and through the mapping, and either would keep the
// parent's slot lock (and so its slot) alive after the parent dies. A
// pthread_atfork child handler therefore closes the inherited descriptor, opens
// the file again and maps the new description over the old mapping (MAP_FIXED:
// same address, same shared pages). The child has no slot; it claims one of its
// own on its first charge. If the path no longer names the same file, the
// child's ledger is unmapped and unusable (Status::unusable).
//
// Thread safety: charge, uncharge, usage and audit may be called from any
// thread of a process once `open` has returned true; open and close may not
// race with them.
#pragma once

#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tessera::quota {

inline constexpr std::size_t kMaxDevices = 16;
inline constexpr std::size_t kSlotCount = 1024;
inline constexpr std::size_t kHeaderBytes = 4096;
inline constexpr std::size_t kSlotBytes = 256;
inline constexpr std::size_t kLedgerFileBytes = kHeaderBytes + kSlotCount * kSlotBytes;
inline constexpr std::size_t kUuidBytes = 96;  // NUL-terminated, so at most 95 characters
inline constexpr std::size_t kKeyBytes = 128;  // NUL-terminated, so at most 127 characters
inline constexpr std::uint32_t kLedgerVersion = 1;
inline constexpr char kLedgerMagic[8] = {'T', 'S', 'R', 'L', 'E', 'D', 'G', 'R'};

// The file's layout, fixed by kLedgerVersion. Everything up to `crc` is written
// once, by the creator, and covered by the CRC (CRC-32, IEEE polynomial).
namespace layout {

struct Device {
  char uuid[kUuidBytes];
  std::uint64_t quota;   // bytes
  std::uint64_t memory;  // the device's memory in bytes; `charged` above it is refused
};

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;
  std::uint32_t slot_bytes;
  std::uint32_t slot_count;
  std::uint64_t file_bytes;
  std::uint32_t device_count;
  std::uint32_t creator_uid;
  char key[kKeyBytes];
  Device devices[kMaxDevices];
  std::uint32_t crc;  // of every byte before it
  std::uint32_t reserved;
  // Changed under `mutex` only.
  alignas(64) std::uint64_t charged[kMaxDevices];
  std::uint64_t repairs;  // times a dead lock owner's state was repaired
  alignas(64) pthread_mutex_t mutex;
  // A context's own memory on each device as a process of the container
  // measured it, with kContextMeasured set; 0: not yet; kContextProbing with a
  // CLOCK_MONOTONIC millisecond: a process is measuring it since then. Read,
  // written and claimed atomically, without the mutex. Zero in a file an
  // older library made, which reads as "not yet".
  alignas(64) std::uint64_t context_bytes[kMaxDevices];
  // Frees of known size the container's processes began on each device, in
  // MiB (each rounded up), since the file was made; with the slots'
  // `releasing` (those under way) a measurement across a module load or a
  // context's creation adds back what another process freed meanwhile
  // (design §7, "measured"). Added to atomically, without the mutex. Zero in
  // a file an older library made.
  alignas(64) std::uint64_t releases_begun_mib[kMaxDevices];
};

inline constexpr std::uint64_t kContextMeasured = 1ULL << 63;
inline constexpr std::uint64_t kContextProbing = 1ULL << 62;

inline constexpr std::uint32_t kSlotFree = 0;
inline constexpr std::uint32_t kSlotLive = 1;

struct alignas(64) Slot {
  std::uint32_t state;  // kSlotFree or kSlotLive; free -> live by CAS, live -> free under the mutex
  std::int32_t pid;     // getpid() of the claimer: alive while its lock is held, or while this process runs
  std::uint64_t claimed_ns;  // CLOCK_BOOTTIME when claimed (a pid reused later started after it)
  std::uint64_t charged[kMaxDevices];
  // MiB of this process's frees under way on each device (begun, not yet
  // ended); written atomically by its process, and zeroed by whoever reaps or
  // frees the slot (a process that died mid-free leaves nothing under way).
  std::uint32_t releasing_mib[kMaxDevices];
  std::uint8_t reserved[kSlotBytes - 16 - 8 * kMaxDevices - 4 * kMaxDevices];
};

static_assert(sizeof(Header) <= kHeaderBytes);
static_assert(sizeof(Slot) == kSlotBytes);  // slot i starts at kHeaderBytes + i * kSlotBytes

}  // namespace layout

// One device of this container, in the order the caller indexes devices.
struct DeviceQuota {
  std::string_view uuid;
  std::uint64_t quota = 0;   // bytes
  std::uint64_t memory = 0;  // the device's total memory in bytes
};

struct OpenOptions {
  std::string_view directory;  // the file is `<directory>/ledger`
  std::string_view key;        // the container's key; must match an existing ledger's
  std::span<const DeviceQuota> devices;  // 1..kMaxDevices; must match an existing ledger's UUIDs
  uid_t uid = ::geteuid();     // whose files are trusted besides root's (tests inject another)
  // Create the file when it is absent (the environment's mode). Off where the
  // device plugin made it before the container started (the limits file's):
  // a missing ledger is then refused, so no process of the container can be
  // the one that makes it.
  bool create = true;
  // Refuse a ledger whose quota for any device differs from the caller's
  // (instead of enforcing the smaller): with a limits file both come from the
  // node, so a difference means one of them was not written for this
  // container.
  bool exact_quota = false;
};

// What the device plugin asks of a container's ledger at Allocate.
struct PrepareOptions {
  std::string_view directory;            // the file is `<directory>/ledger`
  std::string_view key;
  std::span<const DeviceQuota> devices;  // 1..kMaxDevices
};

struct Prepared {
  bool ok = false;
  bool reused = false;       // an existing ledger a live process holds, with these exact devices and quotas
  std::uint32_t holders = 0; // processes holding a slot of the ledger found at the path (0 when none was)
  char message[PATH_MAX + 256] = {};  // why not ok; or, when a held ledger had to be replaced, that it was
};

// Makes `<directory>/ledger` a fresh ledger for these devices, built aside
// (mode 0666, so a process of any uid can charge) and renamed over whatever
// the path held, never written through a symlink or into an existing file.
// One exception: a ledger some live process still holds a slot of is kept
// when its key, UUIDs and quotas are exactly these (a second Allocate for a
// running container must not split its accounting). The directory must
// exist. For the device plugin, before any process of the container exists.
Prepared prepare_ledger(const PrepareOptions& options);

enum class Status {
  ok,
  over_quota,        // charge refused: `charged` + request would pass `quota`
  exceeds_recorded,  // uncharge of more than this process charged; only what it charged was taken
  bad_device,        // device index out of range
  no_slot,           // every slot is held by a live process
  unusable,          // not open, or the mutex is not recoverable, or (after fork) the file changed
};

struct Outcome {
  Status status = Status::unusable;
  std::uint64_t applied = 0;  // bytes added (charge) or taken off (uncharge)
  std::uint64_t charged = 0;  // the device's charged bytes after the call
  std::uint64_t quota = 0;    // the quota enforced
};

// What the ledger holds for one device, read under the mutex (repairing first
// if a lock owner died). Reaps nothing.
struct Audit {
  bool ok = false;                  // false: not open or bad device or mutex not recoverable
  std::uint64_t charged = 0;        // the header's figure
  std::uint64_t slot_sum = 0;       // the sum over slots marked live
  std::uint32_t slots_marked = 0;   // slots marked live
  std::uint32_t slots_alive = 0;    // of those, slots whose lock is held
  std::uint64_t repairs = 0;
};

// What an observer (the metrics exporter) reads of a container's ledger
// without joining it.
struct DeviceReading {
  char uuid[kUuidBytes];
  std::uint64_t quota;    // bytes
  std::uint64_t memory;   // the device's memory in bytes
  std::uint64_t charged;  // bytes charged when read
};

struct Reading {
  std::uint32_t device_count = 0;
  char key[kKeyBytes] = {};
  DeviceReading devices[kMaxDevices] = {};
  char message[PATH_MAX + 256] = {};  // why read_ledger returned false
};

// Maps `<directory>/ledger` read-only (its header page only), checks magic,
// version, geometry and CRC, copies each device's UUID, quota and charged
// bytes, and unmaps. Takes no lock, claims no slot and writes nothing, so it
// never waits on the container's processes; `charged` is a relaxed load, as
// Ledger::usage reads it. False with out.message naming the path and the
// problem when the file is absent, not a regular file or not a valid ledger.
bool read_ledger(const char* directory, Reading& out);

class Ledger {
 public:
  Ledger();
  ~Ledger();  // close()
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Opens `<directory>/ledger`, creating it if absent, and claims a slot. On
  // false the ledger is closed and message() names the path, the problem and
  // the fix; a refused file is left exactly as it was.
  bool open(const OpenOptions& options);
  // Releases the slot (its charges are subtracted) and unmaps. Idempotent.
  void close();

  bool is_open() const { return header_ != nullptr; }
  const char* message() const { return message_; }
  int slot() const;  // this process's slot index, -1 when none
  std::uint32_t device_count() const { return device_count_; }
  // min(the caller's quota, the ledger's quota) for `device`; 0 when out of range.
  std::uint64_t quota(std::uint32_t device) const;

  Outcome charge(std::uint32_t device, std::uint64_t bytes);
  Outcome uncharge(std::uint32_t device, std::uint64_t bytes);
  // The device's charged bytes, read live without the lock; 0 when out of range.
  std::uint64_t usage(std::uint32_t device) const;
  // What one CUDA context takes on `device`, as measured by a process of the
  // container: `measured` (with `bytes`); `probe`: this process has claimed
  // the measurement and must end it with note_context_size or
  // abandon_context_probe; `wait`: another process is measuring (a claim
  // older than `stale_ms` is taken over, its process presumed dead);
  // `unavailable`: no open ledger or no such device, nothing to wait for.
  enum class ContextSize { measured, probe, wait, unavailable };
  ContextSize context_size(std::uint32_t device, std::uint64_t& bytes, std::uint64_t stale_ms = 2000);
  void note_context_size(std::uint32_t device, std::uint64_t bytes);
  void abandon_context_probe(std::uint32_t device);
  Audit audit(std::uint32_t device);

  // A free of `bytes` by this process on `device`, for the container's
  // measurements: begun before the driver's call, ended after it (counted in
  // whole MiB, rounded up). False, and nothing recorded, when this process has
  // no slot or the device is out of range: the caller counts it itself.
  bool release_begin(std::uint32_t device, std::uint64_t bytes);
  void release_end(std::uint32_t device, std::uint64_t bytes);
  // The container's frees on `device`: bytes begun since the file was made,
  // and bytes under way now (live slots only). A measurement reads both
  // before its first read of the driver's free memory and `begun` after its
  // second: what another process freed meanwhile is at most
  // begun(after) - begun(before) + under_way(before).
  struct Releases {
    std::uint64_t begun = 0;
    std::uint64_t under_way = 0;
  };
  Releases releases(std::uint32_t device) const;

  // Test hook: takes the mutex and adds `bytes` to the device's charged figure
  // but not yet to this process's slot (the middle of a charge), then returns
  // holding the mutex. Only for a process about to die (tests raise SIGKILL).
  bool test_lock_mid_charge(std::uint32_t device, std::uint64_t bytes);

 private:
  friend struct ForkRegistry;

  bool refuse(const char* problem, const char* fix);
  bool create_file(const OpenOptions& options);
  bool check_header(const OpenOptions& options);
  int ensure_slot();
  // What charge and uncharge check first: a usable ledger and a known device
  // (then out.quota is set); false with `out` saying why otherwise.
  bool check_device(std::uint32_t device, Outcome& out) const;
  int claim_slot();
  bool lock();
  void unlock();
  void reap();
  bool slot_alive(std::size_t index) const;
  void after_fork_child();
  layout::Slot& slot_at(std::size_t index) const;

  layout::Header* header_ = nullptr;
  int fd_ = -1;
  bool usable_ = false;
  int slot_ = -1;  // accessed atomically
  std::uint32_t device_count_ = 0;
  std::uint64_t quota_[kMaxDevices] = {};
  dev_t file_dev_ = 0;
  ino_t file_ino_ = 0;
  pthread_mutex_t claim_mutex_;  // process-local: one slot claim at a time
  Ledger* prev_ = nullptr;       // fork registry
  Ledger* next_ = nullptr;
  bool registered_ = false;
  char path_[PATH_MAX] = {};
  char message_[PATH_MAX + 256] = {};
};

}  // namespace tessera::quota
