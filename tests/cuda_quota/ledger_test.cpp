// The per-container ledger with real processes: each test forks, sequences the
// processes with pipes and checks what the shared file then holds. No timing.
#include "cuda_quota/ledger.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/run.hpp"

namespace tessera::quota {
namespace {

using tessera::testing::TempDir;

constexpr DeviceQuota kDevices[] = {
    {"GPU-11111111-2222-3333-4444-555555555555", 1000, 4000},
    {"MIG-66666666-7777-8888-9999-000000000000", 500, 2000},
};
constexpr std::string_view kKey = "sharing-gpu-3f9a";
constexpr std::uint64_t kMiB = 1ULL << 20;

OpenOptions options_for(const std::string& dir) {
  OpenOptions options;
  options.directory = dir;
  options.key = kKey;
  options.devices = kDevices;
  return options;
}

// A pipe; children close the ends they do not use, so EOF releases waiters.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(pipe2(fd, O_CLOEXEC), 0); }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() {
    if (fd[0] >= 0) ::close(fd[0]);
    fd[0] = -1;
  }
  void close_write() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
  bool put(const void* data, std::size_t size) const { return write(fd[1], data, size) == static_cast<ssize_t>(size); }
  bool get(void* data, std::size_t size) const {
    auto* p = static_cast<char*>(data);
    while (size > 0) {
      const ssize_t n = read(fd[0], p, size);
      if (n <= 0) return false;
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }
  // Blocks until every write end is closed.
  void wait_eof() const {
    char c;
    while (read(fd[0], &c, 1) > 0) {
    }
  }
};

// Runs `body` in a child process that ends with _exit(body()).
template <class Body>
pid_t spawn(Body&& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
bool killed(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void patch(const std::string& path, std::size_t offset, const void* data, std::size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, data, size, static_cast<off_t>(offset)), static_cast<ssize_t>(size));
  ::close(fd);
}

// A child that opens the ledger in `dir`, charges `bytes` on device 0, says so
// on `ready`, and holds them until every write end of `hold` is closed (then
// exits normally, releasing them) or it is killed. Exit code 1 if it could not.
pid_t spawn_holder(const TempDir& dir, std::uint64_t bytes, const Pipe& ready, Pipe& hold) {
  return spawn([&] {
    hold.close_write();
    Ledger mine;
    if (!mine.open(options_for(dir.path())) || mine.charge(0, bytes).status != Status::ok) return 1;
    ready.put("x", 1);
    hold.wait_eof();
    return 0;
  });
}

// A ledger created by a process that has since exited normally.
std::string make_ledger(const TempDir& dir) {
  Ledger ledger;
  EXPECT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  return dir.path() + "/ledger";
}

// A context's size: one process of the container claims the measurement,
// the others wait; an abandoned claim goes back to "not yet", a stale one
// (its process presumed dead) is taken over; a measurement is seen by every
// process that maps the ledger.
TEST(LedgerContextSize, OneProcessMeasuresTheOthersWaitAndEveryoneSeesTheFigure) {
  TempDir dir;
  Ledger first, second;
  ASSERT_TRUE(first.open(options_for(dir.path()))) << first.message();
  ASSERT_TRUE(second.open(options_for(dir.path()))) << second.message();
  std::uint64_t bytes = 7;
  EXPECT_EQ(first.context_size(0, bytes), Ledger::ContextSize::probe);
  EXPECT_EQ(second.context_size(0, bytes), Ledger::ContextSize::wait) << "one measurement at a time";
  first.abandon_context_probe(0);
  EXPECT_EQ(second.context_size(0, bytes), Ledger::ContextSize::probe) << "an abandoned claim is free again";
  EXPECT_EQ(first.context_size(0, bytes, 0), Ledger::ContextSize::probe) << "a stale claim is taken over";
  first.note_context_size(0, 512u << 20);
  EXPECT_EQ(second.context_size(0, bytes), Ledger::ContextSize::measured);
  EXPECT_EQ(bytes, 512u << 20);
  second.abandon_context_probe(0);  // too late: a measurement stays
  EXPECT_EQ(first.context_size(0, bytes), Ledger::ContextSize::measured);
  first.note_context_size(0, 0);
  EXPECT_EQ(second.context_size(0, bytes), Ledger::ContextSize::measured);
  EXPECT_EQ(bytes, 0u) << "zero is a measurement too";
  EXPECT_EQ(first.context_size(kMaxDevices, bytes), Ledger::ContextSize::unavailable)
      << "no such device: never a claim, nothing to wait for";
  Ledger closed;
  EXPECT_EQ(closed.context_size(0, bytes), Ledger::ContextSize::unavailable) << "no open ledger: nothing to wait for";
}

TEST(LedgerCharge, TwoProcessesAddUpAndAThirdIsRefusedWithTheNumbers) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  EXPECT_EQ(ledger.quota(0), 1000u);
  Pipe ready, go;
  std::vector<pid_t> children;
  // They exit normally when `go` closes: each destructor releases its slot and charges.
  for (const std::uint64_t bytes : {400u, 500u}) children.push_back(spawn_holder(dir, bytes, ready, go));
  char two[2];
  ASSERT_TRUE(ready.get(two, 2));
  EXPECT_EQ(ledger.usage(0), 900u);

  const Outcome refused = ledger.charge(0, 200);
  EXPECT_EQ(refused.status, Status::over_quota);
  EXPECT_EQ(refused.charged, 900u);
  EXPECT_EQ(refused.quota, 1000u);
  EXPECT_EQ(refused.applied, 0u);
  EXPECT_EQ(ledger.usage(0), 900u);

  const Outcome fits = ledger.charge(0, 100);
  EXPECT_EQ(fits.status, Status::ok);
  EXPECT_EQ(fits.charged, 1000u);
  EXPECT_EQ(ledger.charge(0, 1).status, Status::over_quota);
  EXPECT_EQ(ledger.usage(1), 0u);  // devices are separate
  EXPECT_EQ(ledger.charge(1, 500).status, Status::ok);

  go.close_write();
  for (const pid_t pid : children) EXPECT_TRUE(exited_ok(wait_for(pid)));
  EXPECT_EQ(ledger.usage(0), 100u);
  const Audit audit = ledger.audit(0);
  ASSERT_TRUE(audit.ok);
  EXPECT_EQ(audit.slots_marked, 1u);
  EXPECT_EQ(audit.slot_sum, 100u);
}

TEST(LedgerCharge, UnchargeNeverUnderflowsNorTakesAnotherProcesssCharges) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  ASSERT_EQ(ledger.charge(0, 100).status, Status::ok);

  Outcome out = ledger.uncharge(0, 150);
  EXPECT_EQ(out.status, Status::exceeds_recorded);
  EXPECT_EQ(out.applied, 100u);
  EXPECT_EQ(out.charged, 0u);
  out = ledger.uncharge(0, 1);
  EXPECT_EQ(out.status, Status::exceeds_recorded);
  EXPECT_EQ(out.applied, 0u);
  EXPECT_EQ(ledger.usage(0), 0u);

  Pipe ready, go;
  const pid_t child = spawn_holder(dir, 300, ready, go);
  char c;
  ASSERT_TRUE(ready.get(&c, 1));
  out = ledger.uncharge(0, 50);
  EXPECT_EQ(out.status, Status::exceeds_recorded);
  EXPECT_EQ(out.applied, 0u);
  EXPECT_EQ(ledger.usage(0), 300u);
  EXPECT_EQ(ledger.charge(7, 1).status, Status::bad_device);
  EXPECT_EQ(ledger.uncharge(7, 1).status, Status::bad_device);
  go.close_write();
  EXPECT_TRUE(exited_ok(wait_for(child)));
  EXPECT_EQ(ledger.usage(0), 0u);
}

TEST(LedgerCrash, KilledWhileHoldingTheMutexIsRepairedAndReclaimed) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  ASSERT_EQ(ledger.charge(0, 100).status, Status::ok);
  const pid_t child = spawn([&] {
    Ledger mine;
    if (!mine.open(options_for(dir.path())) || mine.charge(0, 300).status != Status::ok) return 1;
    if (!mine.test_lock_mid_charge(0, 50)) return 2;
    raise(SIGKILL);
    return 3;
  });
  ASSERT_TRUE(killed(wait_for(child)));
  EXPECT_EQ(ledger.usage(0), 450u);  // the dead child's charge and its half-done one

  const Outcome out = ledger.charge(0, 10);  // EOWNERDEAD: repaired, not stuck
  EXPECT_EQ(out.status, Status::ok);
  EXPECT_EQ(out.charged, 110u);
  const Audit audit = ledger.audit(0);  // the mutex is consistent again: it locks
  ASSERT_TRUE(audit.ok);
  EXPECT_EQ(audit.repairs, 1u);
  EXPECT_EQ(audit.charged, 110u);
  EXPECT_EQ(audit.slot_sum, 110u);
  EXPECT_EQ(audit.slots_marked, 1u);
  EXPECT_EQ(ledger.charge(0, 890).status, Status::ok);

  const pid_t other = spawn([&] {  // another process locks it as well
    Ledger mine;
    return mine.open(options_for(dir.path())) && mine.uncharge(0, 0).status == Status::ok &&
                   mine.charge(0, 1).status == Status::over_quota
               ? 0
               : 1;
  });
  EXPECT_TRUE(exited_ok(wait_for(other)));
}

TEST(LedgerCrash, RandomKillsLeaveChargedEqualToTheLiveSlots) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  ASSERT_EQ(ledger.charge(0, 50).status, Status::ok);
  std::mt19937 rng(20240611);
  int kills_in_lock = 0;
  for (int iteration = 0; iteration < 50; ++iteration) {
    const int ops = static_cast<int>(rng() % 40) + 1;
    const bool in_lock = rng() % 5 == 0;
    const std::uint32_t child_seed = rng();
    kills_in_lock += in_lock;
    Pipe progress;
    const pid_t child = spawn([&] {
      progress.close_read();
      Ledger mine;
      if (!mine.open(options_for(dir.path()))) return 1;
      std::mt19937 local(child_seed);
      std::uint64_t held = 0;
      for (int n = 0;; ++n) {
        if (in_lock && n == ops) {
          mine.test_lock_mid_charge(0, 7);
          raise(SIGKILL);
        }
        if (local() % 2 == 0) {
          const std::uint64_t bytes = local() % 100 + 1;
          if (mine.charge(0, bytes).status == Status::ok) held += bytes;
        } else {
          held -= mine.uncharge(0, local() % (held + 1)).applied;
        }
        progress.put("o", 1);
      }
    });
    progress.close_write();
    std::vector<char> seen(static_cast<std::size_t>(ops));
    ASSERT_TRUE(progress.get(seen.data(), seen.size())) << "iteration " << iteration;
    if (!in_lock) kill(child, SIGKILL);  // else it kills itself holding the mutex
    ASSERT_TRUE(killed(wait_for(child))) << "iteration " << iteration;
    const Audit audit = ledger.audit(0);
    ASSERT_TRUE(audit.ok) << "iteration " << iteration;
    EXPECT_EQ(audit.charged, audit.slot_sum) << "iteration " << iteration;
  }
  ASSERT_GT(kills_in_lock, 0);
  // Everything the dead charged comes back: the whole quota fits.
  const Outcome out = ledger.charge(0, 950);
  EXPECT_EQ(out.status, Status::ok);
  const Audit audit = ledger.audit(0);
  ASSERT_TRUE(audit.ok);
  EXPECT_EQ(audit.charged, 1000u);
  EXPECT_EQ(audit.slot_sum, 1000u);
  EXPECT_EQ(audit.slots_alive, 1u);
  EXPECT_GE(audit.repairs, static_cast<std::uint64_t>(kills_in_lock));  // random kills may add some
}

TEST(LedgerCrash, DeadProcessesSlotIsReclaimedWhenNeeded) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  Pipe ready, never;
  const pid_t child = spawn_holder(dir, 600, ready, never);
  char c;
  ASSERT_TRUE(ready.get(&c, 1));
  kill(child, SIGKILL);
  ASSERT_TRUE(killed(wait_for(child)));

  EXPECT_EQ(ledger.usage(0), 600u);  // not reaped until needed
  Audit audit = ledger.audit(0);
  EXPECT_EQ(audit.slots_marked, 2u);
  EXPECT_EQ(audit.slots_alive, 1u);

  Outcome out = ledger.charge(0, 500);  // over without reaping, fits after
  EXPECT_EQ(out.status, Status::ok);
  EXPECT_EQ(out.charged, 500u);
  audit = ledger.audit(0);
  EXPECT_EQ(audit.slots_marked, 1u);
  out = ledger.charge(0, 600);
  EXPECT_EQ(out.status, Status::over_quota);
  EXPECT_EQ(out.charged, 500u);
}

// Frees under way are seen by every process of the container: begun adds up in whole MiB, what
// is under way is the live processes' (a process killed in the middle of a free has none).
TEST(LedgerReleases, EveryProcessSeesTheFreesUnderWayAndADeadOnesAreOver) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  EXPECT_EQ(ledger.releases(0).begun, 0u);
  ASSERT_TRUE(ledger.release_begin(0, 3 * kMiB + 1));  // 4 MiB
  EXPECT_FALSE(ledger.release_begin(7, kMiB)) << "a device the ledger does not have";
  Pipe ready, done;
  const pid_t child = spawn([&] {
    Ledger mine;
    if (!mine.open(options_for(dir.path())) || mine.charge(0, 1).status != Status::ok) return 1;
    if (!mine.release_begin(0, 10 * kMiB)) return 2;
    ready.put("x", 1);
    char c;
    done.get(&c, 1);
    raise(SIGKILL);  // in the middle of its free
    return 3;
  });
  char c;
  ASSERT_TRUE(ready.get(&c, 1));
  Ledger::Releases r = ledger.releases(0);
  EXPECT_EQ(r.begun, 14 * kMiB);
  EXPECT_EQ(r.under_way, 14 * kMiB);
  done.put("x", 1);
  ASSERT_TRUE(killed(wait_for(child)));
  r = ledger.releases(0);
  EXPECT_EQ(r.begun, 14 * kMiB);
  EXPECT_EQ(r.under_way, 4 * kMiB) << "the dead process's free is over";
  ledger.release_end(0, 3 * kMiB + 1);
  EXPECT_EQ(ledger.releases(0).under_way, 0u);
  ledger.release_end(0, kMiB);  // more than begun: never below zero
  EXPECT_EQ(ledger.releases(0).under_way, 0u);
  // Reaping the dead slot (a charge past the quota asks for it) zeroes what it had under way.
  EXPECT_EQ(ledger.charge(0, 1u << 30).status, Status::over_quota);
  EXPECT_EQ(ledger.audit(0).slots_marked, 1u);
  EXPECT_EQ(ledger.releases(0).begun, 14 * kMiB);
}

// A tenant that finds the library's ledger descriptor (/proc/self/fd) and
// drops its own slot lock (F_OFD_SETLK, F_UNLCK) is still running: its
// charges are not reaped for another process to use. Once it dies they are.
TEST(LedgerCrash, ALiveProcessThatUnlocksItsSlotKeepsItsCharges) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  Pipe ready, hold;
  const pid_t child = spawn([&] {
    hold.close_write();
    Ledger mine;
    if (!mine.open(options_for(dir.path())) || mine.charge(0, 600).status != Status::ok) return 1;
    int unlocked = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink(entry.path(), ec);
      if (ec || target.filename() != "ledger") continue;
      struct flock all {};
      all.l_type = F_UNLCK;
      all.l_whence = SEEK_SET;  // l_start 0, l_len 0: every byte of the file
      if (fcntl(std::stoi(entry.path().filename().string()), F_OFD_SETLK, &all) == 0) ++unlocked;
    }
    if (unlocked == 0) return 2;
    ready.put("x", 1);
    hold.wait_eof();
    return 0;
  });
  char c;
  ASSERT_TRUE(ready.get(&c, 1));
  EXPECT_EQ(ledger.audit(0).slots_alive, 2u) << "the unlocked slot's process still runs";
  const Outcome refused = ledger.charge(0, 500);  // fits only if the 600 were reaped
  EXPECT_EQ(refused.status, Status::over_quota);
  EXPECT_EQ(refused.charged, 600u);
  // Killed, it is a zombie until waited for: dead already, its charges reaped.
  kill(child, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(ledger.charge(0, 500).status, Status::ok) << "a zombie's charges are reaped";
  EXPECT_TRUE(killed(wait_for(child)));
}

TEST(LedgerFork, ForkedChildDoesNotKeepTheParentsSlotAlive) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  Pipe report, go;
  const pid_t parent = spawn([&] {
    go.close_write();
    report.close_read();
    Ledger mine;
    if (!mine.open(options_for(dir.path())) || mine.charge(0, 100).status != Status::ok) return 1;
    const int parent_slot = mine.slot();
    Pipe from_child;
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      from_child.close_read();
      // No slot after fork; its own slot on first use.
      const bool fresh = mine.slot() == -1;
      const bool charged = mine.charge(0, 5).status == Status::ok;
      const char verdict = fresh && charged && mine.slot() >= 0 && mine.slot() != parent_slot ? 'y' : 'n';
      from_child.put(&verdict, 1);
      go.wait_eof();
      _exit(0);
    }
    from_child.close_write();
    char verdict = 'n';
    if (!from_child.get(&verdict, 1)) return 2;
    report.put(&verdict, 1);
    go.wait_eof();
    return 0;
  });
  report.close_write();
  char verdict = 0;
  ASSERT_TRUE(report.get(&verdict, 1));
  EXPECT_EQ(verdict, 'y');
  kill(parent, SIGKILL);  // the forking process dies; its child lives on
  ASSERT_TRUE(killed(wait_for(parent)));

  Audit audit = ledger.audit(0);
  ASSERT_TRUE(audit.ok);
  EXPECT_EQ(audit.charged, 105u);
  EXPECT_EQ(audit.slots_marked, 3u);
  EXPECT_EQ(audit.slots_alive, 2u);  // us and the grandchild; the dead parent's slot is free to reap
  const Outcome out = ledger.charge(0, 995);  // the dead parent's 100 reclaimed, the child's 5 kept
  EXPECT_EQ(out.status, Status::ok);
  EXPECT_EQ(out.charged, 1000u);
  go.close_write();  // the grandchild exits
}

TEST(LedgerCreate, ConcurrentCreationYieldsOneLedgerThatAllUse) {
  TempDir dir;
  constexpr int kProcesses = 32;
  Pipe go, done, slots;
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    children.push_back(spawn([&] {
      go.close_write();
      done.close_write();
      slots.close_read();
      go.wait_eof();  // all start together
      Ledger mine;
      if (!mine.open(options_for(dir.path())) || mine.charge(0, 1).status != Status::ok) return 1;
      const int slot = mine.slot();
      slots.put(&slot, sizeof slot);
      done.wait_eof();
      return 0;
    }));
  }
  go.close_write();
  std::set<int> claimed;
  for (int i = 0; i < kProcesses; ++i) {
    int slot = -1;
    ASSERT_TRUE(slots.get(&slot, sizeof slot));
    claimed.insert(slot);
  }
  EXPECT_EQ(claimed.size(), static_cast<std::size_t>(kProcesses));

  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    entries.push_back(entry.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"ledger"});  // one file, no temporary left

  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  EXPECT_EQ(ledger.usage(0), static_cast<std::uint64_t>(kProcesses));
  EXPECT_EQ(ledger.audit(0).slots_alive, static_cast<std::uint32_t>(kProcesses + 1));
  done.close_write();
  for (const pid_t pid : children) EXPECT_TRUE(exited_ok(wait_for(pid)));
  EXPECT_EQ(ledger.usage(0), 0u);
}

// Opens `dir` with `options` and expects a refusal whose message holds `problem`,
// with the file (or whatever the path names) left byte for byte as it was.
void expect_refused(const TempDir& dir, const OpenOptions& options, const std::string& problem) {
  const std::string path = dir.path() + "/ledger";
  struct stat before {};
  ASSERT_EQ(lstat(path.c_str(), &before), 0);
  const std::string bytes = S_ISREG(before.st_mode) ? read_all(path) : std::string();
  Ledger ledger;
  EXPECT_FALSE(ledger.open(options));
  EXPECT_FALSE(ledger.is_open());
  const std::string message = ledger.message();
  EXPECT_NE(message.find("ledger " + path + " refused: " + problem), std::string::npos) << message;
  struct stat after {};
  ASSERT_EQ(lstat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(after.st_ino, before.st_ino);
  if (S_ISREG(before.st_mode)) {
    EXPECT_EQ(read_all(path), bytes);
  }
}

TEST(LedgerRefusal, SymbolicLink) {
  TempDir dir, elsewhere;
  const std::string target = make_ledger(elsewhere);
  const std::string before = read_all(target);
  ASSERT_EQ(symlink(target.c_str(), (dir.path() + "/ledger").c_str()), 0);
  expect_refused(dir, options_for(dir.path()), "it is a symbolic link; remove it");
  EXPECT_EQ(read_all(target), before);
}

TEST(LedgerRefusal, NotARegularFile) {
  TempDir fifo_dir, dir_dir;
  ASSERT_EQ(mkfifo((fifo_dir.path() + "/ledger").c_str(), 0666), 0);
  expect_refused(fifo_dir, options_for(fifo_dir.path()), "it is not a regular file");
  ASSERT_EQ(mkdir((dir_dir.path() + "/ledger").c_str(), 0777), 0);
  expect_refused(dir_dir, options_for(dir_dir.path()), "it is not a regular file");
}

TEST(LedgerRefusal, WrongSize) {
  TempDir dir;
  const std::string path = make_ledger(dir);
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kLedgerFileBytes - 1)), 0);
  expect_refused(dir, options_for(dir.path()), "its size is 266239 bytes, expected 266240");
}

TEST(LedgerRefusal, BadMagicAndVersion) {
  TempDir dir;
  const std::string path = make_ledger(dir);
  const char bad = 'X';
  patch(path, offsetof(layout::Header, magic), &bad, 1);
  expect_refused(dir, options_for(dir.path()), "bad magic, not a tessera ledger");

  TempDir other;
  const std::string other_path = make_ledger(other);
  const std::uint32_t version = kLedgerVersion + 1;
  patch(other_path, offsetof(layout::Header, version), &version, sizeof version);
  expect_refused(other, options_for(other.path()), "layout version 2, expected 1");
}

TEST(LedgerRefusal, CrcMismatchOnAFlippedByte) {
  TempDir dir;
  const std::string path = make_ledger(dir);
  const std::string bytes = read_all(path);
  const std::size_t offset = offsetof(layout::Header, devices) + offsetof(layout::Device, quota);
  const char flipped = static_cast<char>(bytes[offset] ^ 0x01);
  patch(path, offset, &flipped, 1);
  expect_refused(dir, options_for(dir.path()), "CRC mismatch (stored ");
}

TEST(LedgerRefusal, WrongOwner) {
  TempDir dir;
  const std::string path = make_ledger(dir);
  OpenOptions options = options_for(dir.path());
  if (geteuid() == 0) {
    // Root trusts any owner, and everyone trusts root: a file owned by root opens for uid 4243,
    // one owned by uid 4242 does not.
    options.uid = 4243;
    Ledger trusted;
    EXPECT_TRUE(trusted.open(options)) << trusted.message();
    trusted.close();
    ASSERT_EQ(chown(path.c_str(), 4242, 4242), 0);
    expect_refused(dir, options, "it is owned by uid 4242, neither uid 4243 nor root");
  } else {
    options.uid = geteuid() + 1;
    expect_refused(dir, options,
                   "it is owned by uid " + std::to_string(geteuid()) + ", neither uid " +
                       std::to_string(options.uid) + " nor root");
  }
}

TEST(LedgerRefusal, DevicesOrKeyThatAreNotThisContainers) {
  TempDir dir;
  make_ledger(dir);
  const DeviceQuota other_uuid[] = {kDevices[0], {"MIG-aaaaaaaa-7777-8888-9999-000000000000", 500, 2000}};
  OpenOptions options = options_for(dir.path());
  options.devices = other_uuid;
  expect_refused(dir, options,
                 "device 1 is MIG-66666666-7777-8888-9999-000000000000, not this container's "
                 "MIG-aaaaaaaa-7777-8888-9999-000000000000");
  options.devices = std::span(kDevices, 1);
  expect_refused(dir, options, "it has 2 devices, this container 1");
  options = options_for(dir.path());
  options.key = "another-key";
  expect_refused(dir, options, "it belongs to key \"sharing-gpu-3f9a\", not \"another-key\"");
}

TEST(LedgerRefusal, ChargedAboveTheDevicesMemory) {
  TempDir dir;
  const std::string path = make_ledger(dir);
  const std::uint64_t charged = 4001;
  patch(path, offsetof(layout::Header, charged), &charged, sizeof charged);
  expect_refused(dir, options_for(dir.path()), "device 0 charged 4001 bytes, above its memory 4000");
}

TEST(LedgerOpen, QuotaIsTheSmallerOfTheCallersAndTheLedgers) {
  TempDir dir;
  make_ledger(dir);
  const DeviceQuota larger[] = {{kDevices[0].uuid, 5000, 4000}, {kDevices[1].uuid, 100, 2000}};
  OpenOptions options = options_for(dir.path());
  options.devices = larger;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options)) << ledger.message();
  EXPECT_EQ(ledger.quota(0), 1000u);
  EXPECT_EQ(ledger.quota(1), 100u);
  EXPECT_EQ(ledger.charge(1, 101).status, Status::over_quota);
}

TEST(LedgerSlots, ExhaustedIsAClearErrorAndDeadSlotsAreReused) {
  TempDir dir;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(options_for(dir.path()))) << ledger.message();
  Pipe ready, never;
  const pid_t child = spawn([&] {
    never.close_write();
    // One descriptor, so one open file description and one slot, per Ledger.
    std::unique_ptr<Ledger[]> many(new Ledger[kSlotCount - 1]);
    for (std::size_t i = 0; i < kSlotCount - 1; ++i)
      if (!many[i].open(options_for(dir.path()))) return 1;
    for (std::size_t i = 0; i < 10; ++i)
      if (many[i].charge(0, 1).status != Status::ok) return 2;
    ready.put("x", 1);
    never.wait_eof();
    return 0;
  });
  char c;
  ASSERT_TRUE(ready.get(&c, 1));
  Ledger extra;
  EXPECT_FALSE(extra.open(options_for(dir.path())));
  EXPECT_STREQ(extra.message(), ("ledger " + dir.path() +
                                 "/ledger: no free slot: all 1024 slots are held by live processes")
                                    .c_str());
  EXPECT_EQ(ledger.charge(0, 1).status, Status::ok);  // a process with a slot goes on

  kill(child, SIGKILL);
  ASSERT_TRUE(killed(wait_for(child)));
  EXPECT_EQ(ledger.usage(0), 11u);
  ASSERT_TRUE(extra.open(options_for(dir.path()))) << extra.message();  // reaps, then reuses
  EXPECT_EQ(ledger.usage(0), 1u);
  const Audit audit = ledger.audit(0);
  EXPECT_EQ(audit.slots_marked, 2u);
  EXPECT_EQ(audit.slots_alive, 2u);
}

// ------------------------------------------------------------------ made by the device plugin

PrepareOptions prepare_for(const std::string& dir, std::span<const DeviceQuota> devices = kDevices) {
  return PrepareOptions{dir, kKey, devices};
}

TEST(LedgerPrepare, MakesAFreshLedgerAnyUidCanChargeAndThatAProcessCannotHaveMade) {
  TempDir dir;
  const Prepared p = prepare_ledger(prepare_for(dir.path()));
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_FALSE(p.reused);
  EXPECT_EQ(p.holders, 0u);
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/ledger").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0666u);
  Reading r;
  ASSERT_TRUE(read_ledger(dir.path().c_str(), r)) << r.message;
  EXPECT_STREQ(r.key, kKey.data());
  EXPECT_EQ(r.devices[1].quota, 500u);
  // A process of the container opens it, never makes it, and must agree with its quotas exactly.
  OpenOptions open = options_for(dir.path());
  open.create = false;
  open.exact_quota = true;
  Ledger ledger;
  ASSERT_TRUE(ledger.open(open)) << ledger.message();
  EXPECT_EQ(ledger.charge(0, 1000).status, Status::ok);
  ledger.close();
  const DeviceQuota raised[] = {{kDevices[0].uuid, 1001, 4000}, kDevices[1]};
  open.devices = raised;
  EXPECT_FALSE(ledger.open(open));
  EXPECT_NE(std::string(ledger.message()).find("device 0's quota in it is 1000 bytes, the limits file's 1001"),
            std::string::npos)
      << ledger.message();
  TempDir empty;
  OpenOptions missing = options_for(empty.path());
  missing.create = false;
  EXPECT_FALSE(ledger.open(missing));
  EXPECT_NE(std::string(ledger.message()).find("refused: it does not exist; the device plugin creates it at Allocate"),
            std::string::npos)
      << ledger.message();
  EXPECT_FALSE(std::filesystem::exists(empty.path() + "/ledger"));
}

TEST(LedgerPrepare, ReplacesWhateverIsThereUnlessALiveProcessHoldsTheSameLedger) {
  TempDir dir, elsewhere;
  const std::string path = dir.path() + "/ledger";
  // Planted by a tenant of an older layout (a 1777 directory): a symlink is replaced, never followed.
  const std::string target = elsewhere.path() + "/precious";
  { std::ofstream(target) << "keep"; }
  ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0);
  ASSERT_TRUE(prepare_ledger(prepare_for(dir.path())).ok);
  EXPECT_EQ(read_all(target), "keep");
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  // A ledger a process wrote garbage into, none holding it: replaced by a fresh one.
  const std::uint64_t garbage = 999;
  patch(path, offsetof(layout::Header, charged), &garbage, sizeof garbage);
  ASSERT_TRUE(prepare_ledger(prepare_for(dir.path())).ok);
  Reading r;
  ASSERT_TRUE(read_ledger(dir.path().c_str(), r));
  EXPECT_EQ(r.devices[0].charged, 0u);
  // A live holder of the very same ledger: kept (a second Allocate must not split the accounting).
  Ledger holder;
  ASSERT_TRUE(holder.open(options_for(dir.path()))) << holder.message();
  ASSERT_EQ(holder.charge(0, 300).status, Status::ok);
  const Prepared same = prepare_ledger(prepare_for(dir.path()));
  ASSERT_TRUE(same.ok) << same.message;
  EXPECT_TRUE(same.reused);
  EXPECT_EQ(same.holders, 1u);
  ASSERT_TRUE(read_ledger(dir.path().c_str(), r));
  EXPECT_EQ(r.devices[0].charged, 300u);
  // New quotas: a new ledger for the processes to come; the holder keeps the old one.
  const DeviceQuota raised[] = {{kDevices[0].uuid, 2000, 4000}, kDevices[1]};
  const Prepared replaced = prepare_ledger(prepare_for(dir.path(), raised));
  ASSERT_TRUE(replaced.ok) << replaced.message;
  EXPECT_FALSE(replaced.reused);
  EXPECT_NE(std::string(replaced.message).find("replaced while 1 process(es) still held the old one"),
            std::string::npos)
      << replaced.message;
  ASSERT_TRUE(read_ledger(dir.path().c_str(), r));
  EXPECT_EQ(r.devices[0].quota, 2000u);
  EXPECT_EQ(r.devices[0].charged, 0u);
  EXPECT_EQ(holder.usage(0), 300u);
  EXPECT_EQ(holder.charge(0, 800).status, Status::over_quota) << "the holder keeps its own ledger's quota";
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename(), "ledger") << "no temporary left behind";
}

TEST(LedgerPrepare, BadArgumentsAreMessages) {
  TempDir dir;
  EXPECT_FALSE(prepare_ledger(PrepareOptions{dir.path(), "", kDevices}).ok);
  EXPECT_FALSE(prepare_ledger(PrepareOptions{dir.path(), kKey, {}}).ok);
  const Prepared missing = prepare_ledger(prepare_for(dir.path() + "/absent"));
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(std::string(missing.message).find("cannot create a new ledger: No such file or directory"),
            std::string::npos)
      << missing.message;
}

}  // namespace
}  // namespace tessera::quota
