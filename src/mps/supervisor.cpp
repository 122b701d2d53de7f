#include "mps/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "core/text.hpp"

namespace tessera::mps {

Notifier::Notifier() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
Notifier::~Notifier() {
  if (fd_ >= 0) ::close(fd_);
}
void Notifier::notify() const {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
}
void Notifier::drain() const {
  std::uint64_t count = 0;
  [[maybe_unused]] auto n = ::read(fd_, &count, sizeof count);
}

std::string local_time_now() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &local);
  return buf;
}

namespace {

// The process listening on a unix socket in directory `dir` (the control
// daemon's; NVIDIA names it `control`): SO_PEERCRED of a connection to each
// socket there gives the credentials of the process that called listen on
// it. -1 when no socket there answers.
pid_t listener_pid(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_socket(ec)) continue;
    const std::string path = entry.path().string();
    sockaddr_un addr{};
    if (path.size() >= sizeof addr.sun_path) continue;
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    ucred cred{};
    socklen_t len = sizeof cred;
    const bool answered = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                          ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
    ::close(fd);
    if (answered) return cred.pid;
  }
  return -1;
}

// "20096M", "20096 MB", "2G", "1073741824": a size in bytes (units are powers
// of 1024, as in CUDA_MPS_PINNED_DEVICE_MEM_LIMIT); nullopt when it is none.
std::optional<std::uint64_t> size_of(const std::string& text) {
  size_t i = 0;
  std::uint64_t v = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  if (i == 0) return std::nullopt;
  while (i < text.size() && text[i] == ' ') ++i;
  std::string unit = text.substr(i);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  int shift = 0;
  if (unit == "K" || unit == "k") shift = 10;
  else if (unit == "M" || unit == "m") shift = 20;
  else if (unit == "G" || unit == "g") shift = 30;
  else if (unit == "T" || unit == "t") shift = 40;
  else if (!unit.empty()) return std::nullopt;
  if (shift && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

// NVIDIA does not document the pinned limit's reply: a value that reads as
// another size is a refusal; one that does not read at all is taken.
bool memory_matches(const std::string& got, std::uint64_t mib) {
  const auto bytes = size_of(got);
  return !bytes || *bytes == mib << 20;
}

bool percentage_matches(const std::string& got, std::uint32_t percent) {
  char* end = nullptr;
  const double v = std::strtod(got.c_str(), &end);
  return end != got.c_str() && v == static_cast<double>(percent);
}

// The pids a reply lists, one per line (get_server_list, get_client_list).
std::vector<std::string> pids_in(const std::string& reply) {
  std::vector<std::string> out;
  std::istringstream in(reply);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) out.push_back(line);
  }
  return out;
}

// Its lines joined with "; ", for a message.
std::string one_line(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

// One daemon's life, on a thread of its own.
class Supervisor::Worker {
 public:
  Worker(const SupervisorOptions& options, DaemonSpec spec, const Notifier& changed,
         std::shared_ptr<Worker> predecessor)
      : options_(options), changed_(changed), predecessor_(std::move(predecessor)),
        wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), wanted_(spec), wanted_unlocked_(spec) {
    status_.spec = std::move(spec);
    status_.error = "starting";
    thread_ = std::thread([this] { run(); });
  }
  ~Worker() {
    retire();
    if (thread_.joinable()) thread_.join();
    if (wake_ >= 0) ::close(wake_);
  }

  const DaemonSpec& spec() const { return wanted_unlocked_; }

  void update(DaemonSpec spec) {
    {
      std::lock_guard lock(m_);
      const bool limits = spec.pinned_mem_limit_mib != wanted_.pinned_mem_limit_mib ||
                          spec.active_thread_percentage != wanted_.active_thread_percentage;
      wanted_ = spec;
      status_.spec = spec;
      limits_changed_ = limits_changed_ || limits;
    }
    wanted_unlocked_ = std::move(spec);
    wake();
  }
  void verify() {
    {
      std::lock_guard lock(m_);
      verify_ = true;
    }
    wake();
  }
  void retire() {
    {
      std::lock_guard lock(m_);
      retire_ = true;
    }
    wake();
  }
  bool finished() const { return finished_.load(); }
  DaemonStatus status() const {
    std::lock_guard lock(m_);
    return status_;
  }

 private:
  enum class Woke { timeout, woken, died };

  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_, &one, sizeof one);
  }

  // Waits until `until`, a wake-up, or the daemon's exit; reads its output meanwhile.
  Woke wait(Clock::time_point until) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return Woke::timeout;
      pollfd p[3] = {{wake_, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
      if (child_) {
        p[1].fd = child_->pidfd();
        p[2].fd = child_->output();
      }
      const int n = ::poll(p, 3, static_cast<int>(std::min<std::int64_t>(left, 60000)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      if (p[2].revents) child_->output_tail();
      if (p[1].revents) return Woke::died;
      if (p[0].revents) {
        std::uint64_t count = 0;
        [[maybe_unused]] auto r = ::read(wake_, &count, sizeof count);
        return Woke::woken;
      }
    }
  }

  void publish(const std::function<void(DaemonStatus&)>& change) {
    {
      std::lock_guard lock(m_);
      change(status_);
    }
    changed_.notify();
  }

  void run() {
    for (;;) {
      bool retire, limits, verify;
      DaemonSpec want;
      {
        std::lock_guard lock(m_);
        retire = retire_;
        limits = limits_changed_;
        verify = verify_;
        want = wanted_;
        limits_changed_ = verify_ = false;
      }
      if (retire) {
        stop_daemon(want);
        publish([](DaemonStatus& s) {
          s.up = false;
          s.pid = -1;
          s.since.clear();
          s.error = "stopped";
        });
        finished_ = true;
        return;
      }
      if (!child_) {
        if (predecessor_ && !predecessor_->finished()) {
          wait(Clock::now() + std::chrono::milliseconds(20));  // the device's previous daemon is still stopping
          continue;
        }
        predecessor_.reset();
        if (Clock::now() < next_) {
          wait(next_);
          continue;
        }
        start(want);
        continue;
      }
      if (limits || verify) {
        sync(want, limits);
        continue;
      }
      const Woke woke = wait(next_);
      if (woke == Woke::died) {
        died(want);
        continue;
      }
      if (woke == Woke::woken) continue;
      // Still answering? With a deadline; the daemon's exit cuts it short.
      auto answer = command(options_.control, want.dirs, "get_default_active_thread_percentage", child_->pidfd());
      if (answer) {
        if (failures_ > 0) {
          failures_ = 0;
          backoff_ = std::chrono::milliseconds(0);
          publish([](DaemonStatus& s) { s.failures = 0; });
        }
        next_ = Clock::now() + options_.check_interval;
        continue;
      }
      if (answer.error().code == Errc::conflict || !child_->running()) {
        died(want);
        continue;
      }
      kill_child(want, answer.error().message + "; killed it (pid " + std::to_string(child_->pid()) + ")");
    }
  }

  // Marks the daemon down (failures, backoff) and says so; its shares follow.
  void down(const DaemonSpec& want, const std::string& why) {
    ++failures_;
    backoff_ = backoff_.count() == 0 ? options_.backoff_min : std::min(backoff_ * 2, options_.backoff_max);
    next_ = Clock::now() + backoff_;
    std::string previous;
    publish([&](DaemonStatus& s) {
      previous = s.error;
      s.up = false;
      s.pid = -1;
      s.since.clear();
      s.failures = failures_;
      s.retry_in_ms = backoff_.count();
      s.error = why;
    });
    // Logged when it starts failing and whenever the reason changes; repeats
    // of one reason only at debug, so a dead dependency does not flood the log.
    if (failures_ == 1 || why != previous)
      spdlog::error("MPS daemon for {} ({}) is down: {}; its shares are Unhealthy; next try in {} ms", want.uuid,
                    want.resource, why, backoff_.count());
    else
      spdlog::debug("MPS daemon for {}: still down ({} failures): {}", want.uuid, failures_, why);
  }

  void died(const DaemonSpec& want) {
    const pid_t pid = child_->pid();
    const std::string how = child_->reap();
    const std::string said = last_line(child_->output_tail());
    child_.reset();
    down(want, "the MPS control daemon (pid " + std::to_string(pid) + ") " + how +
                   (said.empty() ? "" : ": " + excerpt(said, 200)));
  }

  // Kills the daemon this worker started (through its pidfd), then down.
  void kill_child(const DaemonSpec& want, const std::string& why) {
    if (child_) {
      child_->signal(SIGKILL);
      child_->wait_exit(std::chrono::milliseconds(2000));
      child_->reap();
      child_.reset();
    }
    down(want, why);
  }

  void start(const DaemonSpec& want) {
    // The daemon listens on <pipe>/control, a unix socket: its path must fit
    // sockaddr_un's 108 bytes, NUL included (unix(7)).
    constexpr size_t kSocketPathMax = 107;
    if (want.dirs.pipe.size() + std::string_view("/control").size() > kSocketPathMax)
      return down(want, "the pipe directory " + want.dirs.pipe + " is too long (" +
                            std::to_string(want.dirs.pipe.size()) +
                            " bytes): the daemon's socket in it must fit a unix socket path of " +
                            std::to_string(kSocketPathMax) + " bytes; choose a shorter mpsRoot");
    for (const auto& dir : {want.dirs.pipe, want.dirs.log}) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) return down(want, "cannot create " + dir + ": " + ec.message());
      if (::access(dir.c_str(), W_OK) != 0) return down(want, dir + " is not writable");
    }
    // A daemon answering here already is not this supervisor's child (a
    // tenant's squatter, or one left by a tessera that was SIGKILLed): it is
    // neither adopted (its death could not be seen) nor killed (it may be
    // anyone's), but it loses the directory: every file in it goes, so this
    // supervisor's own daemon takes the socket path clients connect to.
    std::string displaced;
    if (auto other = command(options_.control, want.dirs, "get_default_active_thread_percentage"); other) {
      const pid_t foreign = listener_pid(want.dirs.pipe);
      displaced = "a control daemon this supervisor did not start answered in " + want.dirs.pipe + " (pid " +
                  (foreign > 0 ? std::to_string(foreign) : std::string("unknown")) +
                  "); its files there were removed and it was not killed";
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(want.dirs.pipe, ec)) {
        std::filesystem::remove_all(entry.path(), ec);
        if (ec) return down(want, displaced + ", but " + entry.path().string() + " cannot be removed: " + ec.message());
      }
      if (ec) return down(want, displaced + ", but " + want.dirs.pipe + " cannot be read: " + ec.message());
      spdlog::warn("mps: GPU {}: {}", want.uuid, displaced);
    }
    auto started = start_foreground(options_.control, want.dirs, want.uuid, want.multi_user);
    if (!started) return down(want, started.error().message);
    child_ = std::move(*started);
    const pid_t pid = child_->pid();
    // Up once it answers; a daemon that exits first says why on its output.
    const auto deadline = Clock::now() + options_.control.timeout;
    for (;;) {
      auto answer = command(options_.control, want.dirs, "get_default_active_thread_percentage", child_->pidfd());
      if (answer && child_->running()) break;
      if (!child_->running() || (!answer && answer.error().code == Errc::conflict)) {
        const std::string how = child_->reap();
        const std::string said = one_line(child_->output_tail());
        child_.reset();
        std::string why = quote(options_.control.binary) + " -f for " + want.uuid + " (pid " + std::to_string(pid) +
                          ") " + how + " before it answered" + (said.empty() ? "" : ": " + excerpt(said, 300));
        if (said.find("already running") != std::string::npos)
          why += " (a control daemon this supervisor did not start serves " + want.dirs.pipe +
                 "; it is never killed from here: stop it, or choose another mpsRoot)";
        else if (!displaced.empty())
          why = displaced + "; " + why;
        return down(want, why);
      }
      if (answer.error().code == Errc::timeout || Clock::now() >= deadline)
        return kill_child(want, "the MPS control daemon (pid " + std::to_string(pid) + ") started but " +
                                    (answer.error().code == Errc::timeout
                                         ? answer.error().message
                                         : "did not answer within " + std::to_string(options_.control.timeout.count()) +
                                               " ms: " + answer.error().message) +
                                    "; killed it");
      if (child_->wait_exit(std::chrono::milliseconds(10))) continue;  // exited: said on the next turn
    }
    auto limits = set_defaults(want);
    if (!limits) {
      if (!child_ || !child_->running()) return died(want);
      return kill_child(want, limits.error().message + "; killed it (pid " + std::to_string(pid) + ")");
    }
    applied_ = want;
    next_ = Clock::now() + options_.check_interval;
    const unsigned failures = failures_;
    publish([&](DaemonStatus& s) {
      s.up = true;
      s.pid = pid;
      s.since = local_time_now();
      s.error.clear();
      s.retry_in_ms = 0;
      s.limits = *limits;
      s.clients = 0;
      s.note = displaced;
    });
    spdlog::info("MPS daemon for {} ({}) is up: pid {}, pipe directory {}, limits {}{}", want.uuid, want.resource, pid,
                 want.dirs.pipe, *limits, failures ? " (after " + std::to_string(failures) + " failures)" : "");
  }

  // One command on the running daemon; a failure to get an answer at all is
  // an error (a refusal is a reply, checked by the caller).
  Result<std::string> ask(const DaemonSpec& want, const std::string& line) {
    return command(options_.control, want.dirs, line, child_->pidfd());
  }

  // The daemon's defaults set to `want`'s limits and read back; the limits in
  // words. A command the daemon rejects may still exit 0: each value is read back.
  Result<std::string> set_defaults(const DaemonSpec& want) {
    std::string mem = "no pinned limit";
    if (want.pinned_mem_limit_mib > 0) {
      const std::string value = std::to_string(want.pinned_mem_limit_mib) + "M";
      if (auto done = ask(want, "set_default_device_pinned_mem_limit 0 " + value); !done) return unexpected(done.error());
      auto now = ask(want, "get_default_device_pinned_mem_limit 0");
      if (!now) return unexpected(now.error());
      if (!memory_matches(*now, want.pinned_mem_limit_mib))
        return fail(Errc::driver, "the MPS control daemon in " + want.dirs.pipe + " did not take " +
                                      quote("set_default_device_pinned_mem_limit 0 " + value) +
                                      ": 'get_default_device_pinned_mem_limit 0' answers " + quote(*now));
      mem = *now + " pinned per client";
    }
    const std::string set = "set_default_active_thread_percentage " + std::to_string(want.active_thread_percentage);
    if (auto done = ask(want, set); !done) return unexpected(done.error());
    auto now = ask(want, "get_default_active_thread_percentage");
    if (!now) return unexpected(now.error());
    if (!percentage_matches(*now, want.active_thread_percentage))
      return fail(Errc::driver, "the MPS control daemon in " + want.dirs.pipe + " did not take " + quote(set) +
                                    ": 'get_default_active_thread_percentage' answers " + quote(*now));
    return mem + ", " + *now + "% of threads";
  }

  // New limits for a running daemon (`limits`), or the old ones read back
  // again (verify): without quitting it. The defaults reach the servers it
  // starts from now on; each running server is given them for the clients
  // that connect to it afterwards; clients connected before keep theirs
  // (NVIDIA's MPS documentation, set_active_thread_percentage and
  // set_device_pinned_mem_limit: "Existing clients are not affected").
  void sync(const DaemonSpec& want, bool limits_changed) {
    const pid_t pid = child_->pid();
    auto gone = [&](const Error& e) {
      if (e.code == Errc::conflict || !child_->running()) return died(want);
      kill_child(want, e.message + "; killed it (pid " + std::to_string(pid) + ")");
    };
    std::vector<std::string> refused;
    // What it has now: unchanged values are not set again.
    bool defaults_match = true;
    auto pct = ask(want, "get_default_active_thread_percentage");
    if (!pct) return gone(pct.error());
    defaults_match = percentage_matches(*pct, want.active_thread_percentage);
    if (want.pinned_mem_limit_mib > 0) {
      auto mem = ask(want, "get_default_device_pinned_mem_limit 0");
      if (!mem) return gone(mem.error());
      defaults_match = defaults_match && memory_matches(*mem, want.pinned_mem_limit_mib);
    }
    if (applied_.pinned_mem_limit_mib > 0 && want.pinned_mem_limit_mib == 0)
      refused.push_back("a pinned memory limit cannot be taken off a running daemon (there is no command for it)");
    std::string words;
    if (!defaults_match || limits_changed) {
      auto set = set_defaults(want);
      if (!set) {
        if (set.error().code != Errc::driver) return gone(set.error());
        refused.push_back(set.error().message);
      } else {
        words = *set;
      }
    } else {
      words = (want.pinned_mem_limit_mib ? std::to_string(want.pinned_mem_limit_mib) + "M pinned per client, " : "") +
              *pct + "% of threads";
    }
    auto servers = ask(want, "get_server_list");
    if (!servers) return gone(servers.error());
    int clients = 0, kept_old = 0;
    for (const auto& server : pids_in(*servers)) {
      auto list = ask(want, "get_client_list " + server);
      if (!list) return gone(list.error());
      const int n = static_cast<int>(pids_in(*list).size());
      clients += n;
      auto spct = ask(want, "get_active_thread_percentage " + server);
      if (!spct) return gone(spct.error());
      bool match = percentage_matches(*spct, want.active_thread_percentage);
      if (want.pinned_mem_limit_mib > 0) {
        auto smem = ask(want, "get_device_pinned_mem_limit " + server + " 0");
        if (!smem) return gone(smem.error());
        match = match && memory_matches(*smem, want.pinned_mem_limit_mib);
      }
      if (match) continue;
      kept_old += n;  // connected with the server's old limits
      const std::string mem_value = std::to_string(want.pinned_mem_limit_mib) + "M";
      if (want.pinned_mem_limit_mib > 0) {
        if (auto r = ask(want, "set_device_pinned_mem_limit " + server + " 0 " + mem_value); !r) return gone(r.error());
        auto back = ask(want, "get_device_pinned_mem_limit " + server + " 0");
        if (!back) return gone(back.error());
        if (!memory_matches(*back, want.pinned_mem_limit_mib))
          refused.push_back("server " + server + " did not take 'set_device_pinned_mem_limit " + server + " 0 " +
                            mem_value + "' (it answers " + quote(*back) + ")");
      }
      const std::string p = std::to_string(want.active_thread_percentage);
      if (auto r = ask(want, "set_active_thread_percentage " + server + " " + p); !r) return gone(r.error());
      auto back = ask(want, "get_active_thread_percentage " + server);
      if (!back) return gone(back.error());
      if (!percentage_matches(*back, want.active_thread_percentage))
        refused.push_back("server " + server + " did not take 'set_active_thread_percentage " + server + " " + p +
                          "' (it answers " + quote(*back) + ")");
    }
    const bool changed = limits_changed || !defaults_match || kept_old > 0;
    if (refused.empty()) applied_ = want;
    std::string note;
    if (!refused.empty() && clients == 0) {
      // Nobody uses it: a restart costs nothing, and gives every limit.
      spdlog::info("MPS daemon for {} ({}): {}; no client uses it: restarting it with the new limits", want.uuid,
                   want.resource, join(refused, "; "));
      stop_daemon(want);
      next_ = Clock::now();
      return start(want);
    }
    if (!refused.empty())
      note = "the new limits (" + std::to_string(want.pinned_mem_limit_mib) + "M pinned per client, " +
             std::to_string(want.active_thread_percentage) + "% of threads) need a restart of the daemon: " +
             join(refused, "; ") + "; it has " + std::to_string(clients) +
             " client(s), so it is not restarted: they apply when it next starts";
    else if (changed)
      note = "limits changed to " + words + " without a restart: clients that connect from now on get them" +
             (kept_old > 0
                  ? "; " + std::to_string(kept_old) + " client(s) connected before keep theirs until they reconnect"
                  : "");
    publish([&](DaemonStatus& s) {
      s.limits = words.empty() ? s.limits : words;
      s.clients = clients;
      if (!note.empty()) s.note = note;
    });
    if (!refused.empty())
      spdlog::warn("MPS daemon for {} ({}), pid {}: {}", want.uuid, want.resource, pid, note);
    else if (changed)
      spdlog::info("MPS daemon for {} ({}), pid {}: {}", want.uuid, want.resource, pid, note);
    else
      spdlog::info("MPS daemon for {} ({}), pid {}: limits read back: {}; {} client(s)", want.uuid, want.resource, pid,
                   words, clients);
  }

  // `quit` (a request through the pipe directory, which its clients can
  // reach too: never trusted to have worked), then the kill through the pidfd.
  void stop_daemon(const DaemonSpec& want) {
    if (!child_) return;
    const pid_t pid = child_->pid();
    spdlog::info("stopping the MPS daemon for {} (pid {})", want.uuid, pid);
    ControlOptions quick = options_.control;
    quick.timeout = std::min(quick.timeout, options_.quit_grace);
    auto answer = command(quick, want.dirs, "quit", child_->pidfd());
    if (!child_->wait_exit(options_.quit_grace)) {
      spdlog::warn("MPS daemon {} for {} did not quit{}; killing it", pid, want.uuid,
                   answer ? "" : " (" + answer.error().message + ")");
      child_->signal(SIGKILL);
      child_->wait_exit(std::chrono::milliseconds(2000));
    }
    child_->reap();
    child_.reset();
  }

  SupervisorOptions options_;
  const Notifier& changed_;
  std::shared_ptr<Worker> predecessor_;
  int wake_ = -1;
  std::thread thread_;
  std::atomic<bool> finished_{false};

  mutable std::mutex m_;
  DaemonSpec wanted_;  // under m_
  bool limits_changed_ = false, verify_ = false, retire_ = false;
  DaemonStatus status_;
  DaemonSpec wanted_unlocked_;  // the supervisor's copy (its own lock)

  // The thread's own.
  std::optional<DaemonProcess> child_;
  DaemonSpec applied_;
  Clock::time_point next_{};
  std::chrono::milliseconds backoff_{0};
  unsigned failures_ = 0;
};

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

Supervisor::~Supervisor() { stop(); }

void Supervisor::set(std::vector<DaemonSpec> wanted, bool verify_kept) {
  std::lock_guard lock(mutex_);
  reap_retired();
  std::map<std::string, DaemonSpec> next;
  for (auto& s : wanted) next.emplace(s.uuid, std::move(s));
  for (auto it = workers_.begin(); it != workers_.end();) {
    auto w = next.find(it->first);
    const DaemonSpec& current = it->second->spec();
    // Limits change in place; the directories and -M only with a new daemon.
    if (w != next.end() && w->second.dirs == current.dirs && w->second.multi_user == current.multi_user) {
      if (!(w->second == current)) it->second->update(w->second);
      else if (verify_kept) it->second->verify();
      next.erase(w);
      ++it;
      continue;
    }
    spdlog::info("MPS daemon for {} ({}): {}; stopping it", it->first, current.resource,
                 w == next.end()                    ? "no longer wanted"
                 : w->second.dirs == current.dirs ? (w->second.multi_user ? "multi-user mode wanted" : "single-user mode wanted")
                                                  : "its directories changed");
    it->second->retire();
    retired_.push_back(std::move(it->second));
    it = workers_.erase(it);
  }
  for (auto& [uuid, spec] : next) {
    std::shared_ptr<Worker> predecessor;
    for (const auto& r : retired_)
      if (r->spec().uuid == uuid) predecessor = r;
    workers_.emplace(uuid, std::make_shared<Worker>(options_, spec, changed_, predecessor));
  }
  changed_.notify();
}

void Supervisor::reap_retired() {
  std::erase_if(retired_, [](const std::shared_ptr<Worker>& w) { return w->finished(); });
}

std::vector<DaemonStatus> Supervisor::status() const {
  std::lock_guard lock(mutex_);
  std::vector<DaemonStatus> out;
  for (const auto& [uuid, w] : workers_) out.push_back(w->status());
  return out;
}

DaemonStatus Supervisor::status(const std::string& uuid) const {
  std::lock_guard lock(mutex_);
  auto it = workers_.find(uuid);
  if (it == workers_.end()) {
    DaemonStatus none;
    none.spec.uuid = uuid;
    none.error = "not wanted";
    return none;
  }
  return it->second->status();
}

std::set<std::string> Supervisor::up() const {
  std::lock_guard lock(mutex_);
  std::set<std::string> out;
  for (const auto& [uuid, w] : workers_)
    if (w->status().up) out.insert(uuid);
  return out;
}

std::set<std::string> Supervisor::down() const {
  std::lock_guard lock(mutex_);
  std::set<std::string> out;
  for (const auto& [uuid, w] : workers_)
    if (!w->status().up) out.insert(uuid);
  return out;
}

void Supervisor::stop() {
  std::vector<std::shared_ptr<Worker>> all;
  {
    std::lock_guard lock(mutex_);
    for (auto& [uuid, w] : workers_) all.push_back(std::move(w));
    workers_.clear();
    for (auto& w : retired_) all.push_back(std::move(w));
    retired_.clear();
  }
  for (auto& w : all) w->retire();  // all at once: each quits its own daemon
  all.clear();                      // joins each
  changed_.notify();
}

}  // namespace tessera::mps
