// The node decides the quota (docs/design-memory-quotas.md §2, §4): the
// device plugin writes the container's limits file and creates its ledger at
// Allocate, before any process of the container exists; the library reads
// its quota from that file, mounted read-only at /run/tessera/limits. Each
// case here runs the real library over the simulated driver in a container
// as the node makes one: a private mount namespace whose /run/tessera/limits
// is the plugin's file (read-only), /run/tessera/ledger/ledger the plugin's
// ledger, and, where a case says so, /etc/ld.so.preload naming the library,
// as Allocate mounts them. So a process that drops its environment (env -i,
// a login shell, ssh, nsenter into the container's mounts) still finds its
// limits. What the device holds comes from the simulator's own accounting.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_quota/env.h"
#include "cuda_quota/ledger.hpp"
#include "cuda_quota/limits.hpp"
#include "client_output.hpp"
#include "support/run.hpp"

namespace {

using tessera::testing::RunResult;
using tessera::testing::Line;
using tessera::testing::find;
using tessera::testing::code;
using tessera::testing::value;
using tessera::testing::bytes;
using tessera::testing::TempDir;
namespace quota = tessera::quota;

constexpr std::uint64_t kMiB = 1ULL << 20, kGiB = 1ULL << 30;
// The simulator's one device when TESSERA_SIM_CUDA_DEVICES is unset: what a
// process with an empty environment sees.
constexpr const char* kDefaultUuid = "GPU-5e55e2a0-0000-4000-8000-000000000000";
constexpr const char* kUuid = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kKey = "nvidia.com_gpu-0123456789abcdef";
constexpr int kOk = 0, kOutOfMemory = 2, kNotPermitted = 800, kInvalidContext = 201;
constexpr int kCannotIsolate = 97;  // the child could not make its mount namespace

// What a sanitizer runtime needs in any environment, empty ones included
// (design §5: ASan refuses a preload that comes before it unless told).
std::vector<std::string> sanitizer_env() {
#if defined(__SANITIZE_ADDRESS__)
  return {tessera::testing::kLateSanitizerEnv};
#else
  return {};
#endif
}

void write_file(const std::string& path, const std::string& text, mode_t mode = 0644) {
  const std::string aside = path + ".new";
  {
    std::ofstream f(aside, std::ios::binary | std::ios::trunc);
    f << text;
  }
  ::chmod(aside.c_str(), mode);
  ASSERT_EQ(::rename(aside.c_str(), path.c_str()), 0) << path;
}

// How the container's mounts are made for one process.
struct Mounts {
  bool limits = true;            // /run/tessera/limits exists (a file mount)
  bool limits_read_only = true;  // as Allocate mounts it
  bool ledger = true;            // /run/tessera/ledger/ledger
  bool preload = false;          // /etc/ld.so.preload names the library
  std::string limits_source;     // what is mounted there; default the plugin's limits file
  uid_t uid = 0;                 // run as this uid after the mounts (0: stay root)
};

// A replica of one device as the device plugin leaves it at Allocate: the
// host directory <ledger root>/<key> holding the limits file and a fresh
// ledger, both written with the code the plugin uses.
class Share {
 public:
  explicit Share(std::uint64_t quota, std::string uuid = kUuid, std::uint64_t context = 0,
                 std::uint64_t memory = 80 * kGiB)
      : uuid_(std::move(uuid)) {
    ::mkdir((dir_.path() + "/sim").c_str(), 01777);
    ::mkdir((dir_.path() + "/host").c_str(), 0755);
    ::mkdir(host().c_str(), 0755);
    set_limits(quota, context);
    make_ledger(quota, memory);
  }

  std::string host() const { return dir_.path() + "/host/" + kKey; }
  std::string limits_path() const { return host() + "/" TESSERA_LIMITS_FILE_NAME; }
  std::string ledger_path() const { return host() + "/" TESSERA_LEDGER_FILE_NAME; }
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
  const std::string& uuid() const { return uuid_; }

  // The limits file's text, as the plugin writes it.
  static std::string limits_text(const std::string& uuid, std::uint64_t quota, std::uint64_t context = 0,
                                 const char* key = kKey) {
    quota::Limits l;
    l.device_count = 1;
    std::snprintf(l.key, sizeof l.key, "%s", key);
    std::snprintf(l.devices[0].uuid, sizeof l.devices[0].uuid, "%s", uuid.c_str());
    l.devices[0].quota = quota;
    l.devices[0].context = context;
    char text[quota::kLimitsMaxBytes + 1];
    const std::size_t n = quota::format_limits(l, text, sizeof text);
    EXPECT_GT(n, 0u);
    return std::string(text, n);
  }

  void set_limits(std::uint64_t quota, std::uint64_t context = 0) {
    write_file(limits_path(), limits_text(uuid_, quota, context));
  }
  void set_limits_text(const std::string& text, mode_t mode = 0644) { write_file(limits_path(), text, mode); }

  void make_ledger(std::uint64_t quota, std::uint64_t memory = 80 * kGiB, const char* key = kKey) {
    const quota::DeviceQuota device{uuid_, quota, memory};
    const std::string dir = host();
    const quota::PrepareOptions options{dir, key, {&device, 1}};
    const quota::Prepared p = quota::prepare_ledger(options);
    ASSERT_TRUE(p.ok) << p.message;
  }

  // The hardware the simulated driver models: the device and the shared accounting.
  // (`shared`: the accounting every process of the test sees; a process of
  // another uid cannot reach the test's directory, so it runs without.)
  std::vector<std::string> hardware(bool shared = true) const {
    std::vector<std::string> env = sanitizer_env();
    env.push_back("TESSERA_SIM_CUDA_DEVICES=" + uuid_ + ":80G");
    if (shared) env.push_back("TESSERA_SIM_CUDA_DIR=" + dir_.path() + "/sim");
    return env;
  }

  // Runs the client with exactly `env` in a container with `mounts`.
  RunResult run(const std::vector<std::string>& steps, const std::vector<std::string>& env, const Mounts& mounts = {},
                const std::vector<std::string>& command = {}) const {
    return finish(start(steps, env, mounts, command));
  }
  struct Started {
    pid_t pid = -1;
    std::string out, err;
  };
  // The same in the background; finish() waits for it.
  Started start(const std::vector<std::string>& steps, const std::vector<std::string>& env, const Mounts& mounts = {},
                const std::vector<std::string>& command = {}) const;
  static RunResult finish(const Started& s);

 private:
  TempDir dir_;
  std::string uuid_;
  mutable int runs_ = 0;
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// In the child: nothing but system calls and what was prepared before fork.
[[noreturn]] void fail_child(int code, const char* what) {
  dprintf(2, "harness: %s: %s\n", what, std::strerror(errno));
  _exit(code);
}

void touch(const char* path) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail_child(kCannotIsolate, path);
  ::close(fd);
}

Share::Started Share::start(const std::vector<std::string>& steps, const std::vector<std::string>& env,
                            const Mounts& m, const std::vector<std::string>& command) const {
  const std::string tag = std::to_string(++runs_);
  const std::string out_path = path("out." + tag), err_path = path("err." + tag);
  const std::string limits_source = m.limits_source.empty() ? limits_path() : m.limits_source;
  struct stat source_stat {};
  const bool source_is_dir = ::stat(limits_source.c_str(), &source_stat) == 0 && S_ISDIR(source_stat.st_mode);
  const std::string ledger = ledger_path();
  const std::string overlay = path("etc." + tag), upper = overlay + "/upper", work = overlay + "/work";
  const std::string preload_list = upper + "/ld.so.preload", preload_text = TESSERA_CUDA_QUOTA_LIBRARY "\n";
  const std::string overlay_options = "lowerdir=/etc,upperdir=" + upper + ",workdir=" + work;
  ::mkdir(overlay.c_str(), 0755);
  std::vector<std::string> argv = command;
  argv.push_back(TESSERA_CUDA_CLIENT);
  argv.insert(argv.end(), steps.begin(), steps.end());
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const uid_t uid = ::geteuid(), gid = ::getegid();

  const pid_t pid = fork();
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0 || err < 0) _exit(kCannotIsolate);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::unshare(uid == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) != 0) fail_child(kCannotIsolate, "unshare");
    if (uid != 0) {  // an unprivileged run: be root in a user namespace of our own
      char map[64];
      const int setgroups = ::open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
      if (setgroups >= 0) {
        if (::write(setgroups, "deny", 4) != 4) fail_child(kCannotIsolate, "setgroups");
        ::close(setgroups);
      }
      for (const char* file : {"/proc/self/uid_map", "/proc/self/gid_map"}) {
        const int n = std::snprintf(map, sizeof map, "0 %u 1", file[11] == 'u' ? uid : gid);
        const int fd = ::open(file, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ::write(fd, map, static_cast<std::size_t>(n)) != n) fail_child(kCannotIsolate, file);
        ::close(fd);
      }
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail_child(kCannotIsolate, "private /");
    // The container's own /run: the runtime makes the mount points of Allocate's files.
    if (::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) fail_child(kCannotIsolate, "/run");
    ::mkdir("/run/tessera", 0755);
    ::mkdir("/run/tessera/ledger", 0755);
    if (m.limits) {
      if (source_is_dir) ::mkdir(TESSERA_CONTAINER_LIMITS_FILE, 0755);
      else touch(TESSERA_CONTAINER_LIMITS_FILE);
      if (::mount(limits_source.c_str(), TESSERA_CONTAINER_LIMITS_FILE, nullptr, MS_BIND, nullptr) != 0)
        fail_child(kCannotIsolate, "bind the limits file");
      if (m.limits_read_only &&
          ::mount(nullptr, TESSERA_CONTAINER_LIMITS_FILE, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
        fail_child(kCannotIsolate, "read-only limits file");
    }
    if (m.ledger) {
      touch(TESSERA_CONTAINER_LEDGER_FILE);
      if (::mount(ledger.c_str(), TESSERA_CONTAINER_LEDGER_FILE, nullptr, MS_BIND, nullptr) != 0)
        fail_child(kCannotIsolate, "bind the ledger");
    }
    if (m.preload) {
      // /etc as the image has it, with Allocate's ld.so.preload on top.
      if (::mount("tmpfs", overlay.c_str(), "tmpfs", 0, "mode=0755") != 0) fail_child(kCannotIsolate, "overlay tmpfs");
      ::mkdir(upper.c_str(), 0755);
      ::mkdir(work.c_str(), 0755);
      const int fd = ::open(preload_list.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0 || ::write(fd, preload_text.data(), preload_text.size()) != static_cast<ssize_t>(preload_text.size()))
        fail_child(kCannotIsolate, "ld.so.preload");
      ::close(fd);
      if (::mount("overlay", "/etc", "overlay", 0, overlay_options.c_str()) != 0) fail_child(kCannotIsolate, "overlay /etc");
    }
    if (m.uid != 0) {
      if (uid != 0) fail_child(kCannotIsolate, "another uid needs a root test run");
      if (::setgroups(0, nullptr) != 0 || ::setgid(m.uid) != 0 || ::setuid(m.uid) != 0) fail_child(kCannotIsolate, "setuid");
    }
    ::execve(args[0], args.data(), envp.data());
    fail_child(127, "execve");
  }
  return Started{pid, out_path, err_path};
}

RunResult Share::finish(const Started& s) {
  RunResult r;
  int status = 0;
  ::waitpid(s.pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_all(s.out);
  r.err = read_all(s.err);
  return r;
}

// Without namespaces (an unprivileged run on a host that forbids user
// namespaces) the case cannot run; as root (./x test, CI) it must.
#define SKIP_IF_NO_NAMESPACES(r)                                                                        \
  if ((r).exit_code == kCannotIsolate) {                                                              \
    if (::geteuid() == 0) FAIL() << "as root a container must be possible here: " << (r).err;         \
    GTEST_SKIP() << "cannot make a container here without root: " << (r).err;                         \
  }                                                                                                   \
  static_assert(true)

// The variables Allocate sets, for the cases where a process keeps them.
std::vector<std::string> allocate_env(std::vector<std::string> env, std::uint64_t quota, const std::string& uuid = kUuid) {
  env.push_back("LD_PRELOAD=" TESSERA_CUDA_QUOTA_LIBRARY);
  env.push_back(TESSERA_ENV_LIMITS_FILE "=" TESSERA_CONTAINER_LIMITS_FILE);
  env.push_back(std::string(TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=") + std::to_string(quota));
  env.push_back(std::string(TESSERA_ENV_DEVICE_UUID_PREFIX "0=") + uuid);
  env.push_back(TESSERA_ENV_LEDGER_DIR "=" TESSERA_CONTAINER_LEDGER_DIR);
  env.push_back(std::string(TESSERA_ENV_LEDGER_KEY "=") + kKey);
  return env;
}

// ------------------------------------------------------------------ escapes that drop the environment

// A process that unsets every variable of the quota (but keeps LD_PRELOAD):
// the limits file still holds it.
TEST(LimitsFile, UnsettingTheVariablesKeepsTheQuota) {
  Share share(1 * kGiB);
  std::vector<std::string> env = share.hardware();
  env.push_back("LD_PRELOAD=" TESSERA_CUDA_QUOTA_LIBRARY);
  const auto r = share.run({"init", "alloc:" + bytes(600 * kMiB), "alloc:" + bytes(600 * kMiB) + ":again", "info",
                            "usage"},
                           env);
  SKIP_IF_NO_NAMESPACES(r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB)), kOk);
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB) + ":again"), kOutOfMemory) << r.err;
  EXPECT_EQ(value(r, "info", 1), 1 * kGiB) << "total is the quota";
  EXPECT_EQ(value(r, "usage", 0), 600 * kMiB) << "the device holds only what the quota let through";
  EXPECT_EQ(r.err.find("no limits file"), std::string::npos) << r.err;
}

// env -i: nothing in the environment at all (the simulated driver is found
// as a container finds its driver, and runs its default device); ld.so loads
// the library through /etc/ld.so.preload, the library finds the limits file.
TEST(LimitsFile, AnEmptyEnvironmentKeepsTheQuota) {
  Share share(1 * kGiB, kDefaultUuid);
  Mounts m;
  m.preload = true;
  const auto r = share.run({"init", "info", "alloc:" + bytes(600 * kMiB), "alloc:" + bytes(600 * kMiB) + ":again",
                            "pointer:cuMemAlloc:3020:0", "usage"},
                           sanitizer_env(), m);
  SKIP_IF_NO_NAMESPACES(r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(find(r, "pointer:cuMemAlloc:3020:0")[2], "libtessera-cuda.so") << "loaded without LD_PRELOAD";
  EXPECT_EQ(value(r, "info", 1), 1 * kGiB);
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB)), kOk);
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB) + ":again"), kOutOfMemory);
  EXPECT_EQ(value(r, "usage", 0), 600 * kMiB);
}

// A login shell of another user (su -, ssh into the container): a fresh
// environment, another uid, the container's mounts. The ledger is the
// plugin's, mode 0666, so any uid charges it.
TEST(LimitsFile, ALoginShellOfAnotherUserKeepsTheQuota) {
  if (::geteuid() != 0) GTEST_SKIP() << "running as another uid needs a root test run";
  Share share(1 * kGiB, kDefaultUuid);
  Mounts m;
  m.preload = true;
  m.uid = 65534;
  std::string script = "exec";
  for (const char* a : {TESSERA_CUDA_CLIENT, "init", "info"}) script += std::string(" ") + a;
  script += " alloc:" + bytes(600 * kMiB) + " alloc:" + bytes(600 * kMiB) + ":again usage";
  const auto r = share.run({}, sanitizer_env(), m, {"/bin/sh", "-l", "-c", script, "sh"});
  SKIP_IF_NO_NAMESPACES(r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(value(r, "info", 1), 1 * kGiB);
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB)), kOk) << r.err;
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB) + ":again"), kOutOfMemory);
  EXPECT_EQ(value(r, "usage", 0), 600 * kMiB);
}

// Two processes, one with Allocate's environment and one that dropped it,
// share the container's quota through the plugin's ledger.
TEST(LimitsFile, ProcessesWithAndWithoutTheEnvironmentShareOneQuota) {
  Share share(1 * kGiB);
  const std::string go = share.path("go");
  std::vector<std::string> awaits;
  for (int i = 0; i < 3; ++i) awaits.push_back("await:" + go);  // 10 s each at most
  std::vector<std::string> steps{"init", "alloc:" + bytes(700 * kMiB)};
  steps.insert(steps.end(), awaits.begin(), awaits.end());
  const auto holder = share.start(steps, allocate_env(share.hardware(), 1 * kGiB));
  std::vector<std::string> bare = share.hardware();
  bare.push_back("LD_PRELOAD=" TESSERA_CUDA_QUOTA_LIBRARY);
  // Wait until the holder holds its memory (the simulator's accounting says
  // so). The probe allocates nothing: an allocation of its own, charged while
  // the holder's is still on its way, would take the holder's room.
  RunResult probe;
  for (int i = 0; i < 500; ++i) {
    probe = share.run({"init", "usage"}, bare);
    if (probe.exit_code == kCannotIsolate || value(probe, "usage", 1) == 700 * kMiB) break;
    ::usleep(20000);
  }
  const auto second =
      share.run({"init", "usage", "info", "alloc:" + bytes(400 * kMiB), "alloc:" + bytes(300 * kMiB)}, bare);
  std::ofstream(go) << "go\n";
  const auto first = Share::finish(holder);
  SKIP_IF_NO_NAMESPACES(first);
  EXPECT_EQ(code(first, "alloc:" + bytes(700 * kMiB)), kOk) << first.err;
  EXPECT_EQ(value(second, "info", 0), 1 * kGiB - 700 * kMiB) << "the other process's charge, live\n" << second.err;
  EXPECT_EQ(code(second, "alloc:" + bytes(400 * kMiB)), kOutOfMemory);
  EXPECT_EQ(code(second, "alloc:" + bytes(300 * kMiB)), kOk);
}

// ------------------------------------------------------------------ the file cannot be changed from inside

// The limits file and the ledger are single-file mounts: a process of the
// container, root in it, can neither rewrite the limits nor put another file
// in either place.
TEST(LimitsFile, TheContainerCannotRewriteOrReplaceItsLimitsOrLedger) {
  Share share(1 * kGiB);
  const auto r = share.run({"write:" TESSERA_CONTAINER_LIMITS_FILE, "replace:" TESSERA_CONTAINER_LIMITS_FILE,
                            "replace:" TESSERA_CONTAINER_LEDGER_FILE, "init", "alloc:" + bytes(2 * kGiB)},
                           allocate_env(share.hardware(), 1 * kGiB));
  SKIP_IF_NO_NAMESPACES(r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "write:" TESSERA_CONTAINER_LIMITS_FILE), EROFS);
  EXPECT_EQ(code(r, "replace:" TESSERA_CONTAINER_LIMITS_FILE), EBUSY) << "a mount point is not renamed over";
  EXPECT_EQ(code(r, "replace:" TESSERA_CONTAINER_LEDGER_FILE), EBUSY);
  EXPECT_EQ(code(r, "alloc:" + bytes(2 * kGiB)), kOutOfMemory);
  EXPECT_NE(read_all(share.limits_path()).find(" 1073741824\n"), std::string::npos) << "the plugin's file, untouched";
  // Had the file been rewritten all the same (on the host, say), it no longer
  // matches the ledger the plugin made for it: caught, no context.
  share.set_limits(40 * kGiB);
  const auto raised = share.run({"init", "alloc:" + bytes(2 * kGiB), "usage"}, allocate_env(share.hardware(), 40 * kGiB));
  EXPECT_EQ(code(raised, "init"), kNotPermitted) << raised.err;
  EXPECT_EQ(value(raised, "usage", 0), 0u);
}

// Were the limits raised behind the ledger's back (the file rewritten on the
// host, or mounted writable), the library notices and creates no context.
TEST(LimitsFile, RaisedLimitsAreCaughtAgainstTheLedger) {
  Share share(1 * kGiB);
  share.set_limits(40 * kGiB);  // the ledger still says 1 GiB
  const auto r = share.run({"init", "alloc:" + bytes(2 * kGiB), "usage"}, allocate_env(share.hardware(), 40 * kGiB));
  SKIP_IF_NO_NAMESPACES(r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "init"), kNotPermitted) << r.err;
  EXPECT_EQ(code(r, "alloc:" + bytes(2 * kGiB)), kInvalidContext) << "no context: nothing allocated";
  EXPECT_EQ(value(r, "usage", 0), 0u);
  EXPECT_NE(r.err.find("device 0's quota in it is 1073741824 bytes, the limits file's 42949672960"), std::string::npos)
      << r.err;
}

// ------------------------------------------------------------------ the ledger is the plugin's

// A tenant that makes a ledger of its own (with a quota of its choosing) and
// points the environment at it gains nothing: with a limits file the ledger
// is the one at the fixed path, which the plugin made.
TEST(LimitsFile, ALedgerTheTenantMadeIsNeverUsed) {
  Share share(1 * kGiB);
  const std::string own = share.path("tenant-ledger");
  ::mkdir(own.c_str(), 01777);
  const quota::DeviceQuota device{kUuid, 80 * kGiB, 80 * kGiB};
  ASSERT_TRUE(quota::prepare_ledger({own, kKey, {&device, 1}}).ok);
  std::vector<std::string> env = share.hardware();
  env.push_back("LD_PRELOAD=" TESSERA_CUDA_QUOTA_LIBRARY);
  env.push_back(std::string(TESSERA_ENV_DEVICE_UUID_PREFIX "0=") + kUuid);
  env.push_back(std::string(TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=") + std::to_string(80 * kGiB));
  env.push_back(TESSERA_ENV_LEDGER_DIR "=" + own);
  env.push_back(std::string(TESSERA_ENV_LEDGER_KEY "=") + kKey);
  const auto r = share.run({"init", "alloc:" + bytes(2 * kGiB), "info", "usage"}, env);
  SKIP_IF_NO_NAMESPACES(r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "alloc:" + bytes(2 * kGiB)), kOutOfMemory) << r.err;
  EXPECT_EQ(value(r, "info", 1), 1 * kGiB);
  EXPECT_EQ(value(r, "usage", 0), 0u);
  quota::Reading theirs;
  ASSERT_TRUE(quota::read_ledger(own.c_str(), theirs));
  EXPECT_EQ(theirs.devices[0].charged, 0u) << "the tenant's ledger was never charged";
}

// The ledger at the fixed path replaced on the host by one not made for these
// limits (another key, another quota), or missing: no context, a message.
TEST(LimitsFile, ALedgerThatDoesNotMatchOrIsMissingRefusesTheContext) {
  {
    Share share(1 * kGiB);
    share.make_ledger(1 * kGiB, 80 * kGiB, "someone-else");
    const auto r = share.run({"init", "usage"}, allocate_env(share.hardware(), 1 * kGiB));
    SKIP_IF_NO_NAMESPACES(r);
    EXPECT_EQ(code(r, "init"), kNotPermitted);
    EXPECT_NE(r.err.find("it belongs to key \"someone-else\""), std::string::npos) << r.err;
  }
  {
    Share share(1 * kGiB);
    ASSERT_EQ(::unlink(share.ledger_path().c_str()), 0);
    Mounts m;
    m.ledger = false;  // nothing at /run/tessera/ledger/ledger: the container cannot make one there
    const auto r = share.run({"init", "usage"}, allocate_env(share.hardware(), 1 * kGiB), m);
    EXPECT_EQ(code(r, "init"), kNotPermitted);
    EXPECT_NE(r.err.find("ledger " TESSERA_CONTAINER_LEDGER_FILE " refused: it does not exist"), std::string::npos)
        << r.err;
    struct stat st {};
    EXPECT_NE(::stat(share.ledger_path().c_str(), &st), 0);
  }
}

// ------------------------------------------------------------------ a context's own memory

// A context's own memory is charged at its creation: a process's first one
// at the limits file's figure (no context exists yet to measure it with),
// later ones and modules as the drop in the driver's free memory across the
// call; each is returned with its context or module.
TEST(LimitsFile, ContextsAndModulesAreChargedWhenMade) {
  Share share(1 * kGiB, kUuid, 256 * kMiB);
  std::vector<std::string> env = allocate_env(share.hardware(), 1 * kGiB);
  env.push_back("TESSERA_SIM_CUDA_CONTEXT_BYTES=256M");
  env.push_back("TESSERA_SIM_CUDA_MODULE_BYTES=64M");
  const auto r = share.run({"init", "info", "alloc:" + bytes(800 * kMiB), "alloc:" + bytes(512 * kMiB), "module",
                            "ctx-create", "module-unload:1", "ctx-create:again", "info:full", "usage"},
                           env);
  SKIP_IF_NO_NAMESPACES(r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "init"), kOk);
  EXPECT_EQ(value(r, "info", 0), 1 * kGiB - 256 * kMiB) << "the primary context's 256 MiB are the container's";
  EXPECT_EQ(code(r, "alloc:" + bytes(800 * kMiB)), kOutOfMemory) << "800 MiB would pass the quota with the context";
  EXPECT_EQ(code(r, "alloc:" + bytes(512 * kMiB)), kOk);
  EXPECT_EQ(code(r, "module"), kOk);  // 832 MiB now
  EXPECT_EQ(code(r, "ctx-create"), kOutOfMemory) << "a second context, measured: 256 MiB more do not fit\n" << r.err;
  EXPECT_EQ(code(r, "module-unload:1"), kOk);
  EXPECT_EQ(code(r, "ctx-create:again"), kOk) << r.err;
  EXPECT_EQ(value(r, "info:full", 0), 0u);
  EXPECT_EQ(value(r, "usage", 0), 1 * kGiB) << "the device holds two contexts and 512 MiB: the quota exactly";
}

// ------------------------------------------------------------------ bad limits files

struct BadLimits {
  const char* name;
  std::string text;   // the limits file; empty: see `mounts`
  Mounts mounts;
  const char* message;
};

TEST(LimitsFile, ABadLimitsFileRefusesTheContextWithAMessage) {
  const std::string good = Share::limits_text(kUuid, 1 * kGiB);
  Mounts writable;
  writable.limits_read_only = false;
  Mounts none;
  none.limits = false;
  const BadLimits cases[] = {
      {"missing", good, none, "limits file /run/tessera/limits: does not exist, though TESSERA_LIMITS_FILE="},
      {"on a writable mount", good, writable, "is on a writable mount"},
      {"empty", "", {}, "is malformed: it is empty"},
      {"not ours", "0 " + std::string(kUuid) + " 1024\n", {}, "line 1 is not \"tessera-limits 1\""},
      {"another version", "tessera-limits 2\nkey k\n0 " + std::string(kUuid) + " 1\n", {}, "format version other than 1"},
      {"no key", "tessera-limits 1\n0 " + std::string(kUuid) + " 1024\n", {}, "it has no \"key\" line"},
      {"no device", "tessera-limits 1\nkey " + std::string(kKey) + "\n", {}, "it names no device"},
      {"a suffix", "tessera-limits 1\nkey " + std::string(kKey) + "\n0 " + kUuid + " 1G\n", {},
       "line 3 has no plain decimal number of bytes"},
      {"not a UUID", "tessera-limits 1\nkey " + std::string(kKey) + "\n0 GPU-x:yz 1024\n", {},
       "line 3 has no GPU or MIG UUID"},
      {"out of order", "tessera-limits 1\nkey " + std::string(kKey) + "\n1 " + kUuid + " 1024\n", {}, "is out of order"},
      {"no newline", good.substr(0, good.size() - 1), {}, "its last line does not end with a newline"},
      {"control character", "tessera-limits 1\nkey " + std::string(kKey) + "\n0 " + kUuid + " 1024\x1b[2J\n", {},
       "line 3 holds a control"},
      {"too big", good + std::string(5000, '#') + "\n", {}, "more than a limits file can be (4096)"},
      {"above the device", Share::limits_text(kUuid, 81 * kGiB), {},
       "has quota 86973087744 bytes, above the device's memory (85899345920 bytes)"},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.name);
    Share share(1 * kGiB);
    share.set_limits_text(bad.text);
    const auto r = share.run({"init", "alloc:4096", "ctx-create", "usage"}, allocate_env(share.hardware(), 1 * kGiB),
                             bad.mounts);
    SKIP_IF_NO_NAMESPACES(r);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(code(r, "init"), kNotPermitted) << r.err;
    EXPECT_NE(code(r, "alloc:4096"), kOk);
    EXPECT_EQ(code(r, "ctx-create"), kNotPermitted);
    EXPECT_EQ(value(r, "usage", 0), 0u);
    EXPECT_NE(r.err.find(bad.message), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no CUDA context is created"), std::string::npos) << r.err;
  }
}

// Unreadable: a directory at the path; a file its uid may not read.
TEST(LimitsFile, AnUnreadableLimitsFileRefusesTheContext) {
  Share share(1 * kGiB);
  const std::string dir = share.path("a-directory");
  ::mkdir(dir.c_str(), 0755);
  Mounts m;
  m.limits_source = dir;
  auto r = share.run({"init", "usage"}, allocate_env(share.hardware(), 1 * kGiB), m);
  SKIP_IF_NO_NAMESPACES(r);
  EXPECT_EQ(code(r, "init"), kNotPermitted);
  EXPECT_NE(r.err.find("limits file /run/tessera/limits: is not a regular file"), std::string::npos) << r.err;
  if (::geteuid() != 0) return;
  share.set_limits_text(Share::limits_text(kUuid, 1 * kGiB), 0600);
  Mounts other;
  other.uid = 65534;
  r = share.run({"init", "usage"}, allocate_env(share.hardware(false), 1 * kGiB), other);
  EXPECT_EQ(code(r, "init"), kNotPermitted);
  EXPECT_NE(r.err.find("limits file /run/tessera/limits: cannot be opened: Permission denied"), std::string::npos)
      << r.err;
}

}  // namespace
