#include "mps/supervisor.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <string_view>
#include <thread>

#include "core/text.hpp"

namespace tessera::mps {

namespace {

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

}  // namespace

Supervisor::~Supervisor() { stop(); }

void Supervisor::set(std::vector<DaemonSpec> wanted) {
  std::map<std::string, DaemonSpec> next;
  for (auto& s : wanted) next.emplace(s.uuid, std::move(s));
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    auto w = next.find(it->first);
    if (w != next.end() && w->second == it->second.spec) {
      next.erase(w);
      ++it;
      continue;
    }
    spdlog::info("MPS daemon for {} ({}): {}; stopping it", it->first, it->second.spec.resource,
                 w == next.end() ? "no longer wanted" : "its directories or limits changed");
    quit(it->second.spec);
    it = daemons_.erase(it);
  }
  for (auto& [uuid, spec] : next) {
    Daemon d;
    d.spec = std::move(spec);
    daemons_.emplace(uuid, std::move(d));
  }
}

bool Supervisor::tick(Clock::time_point now) {
  bool changed = false;
  for (auto& [uuid, d] : daemons_) {
    if (now < d.next) continue;
    if (!d.up) {
      auto started = start(d.spec);
      if (started) {
        spdlog::info("MPS daemon for {} ({}) is up: pipe directory {}, {} MiB pinned per client, {}% of threads{}",
                     uuid, d.spec.resource, d.spec.dirs.pipe, d.spec.pinned_mem_limit_mib,
                     d.spec.active_thread_percentage, d.failures ? " (after " + std::to_string(d.failures) + " failures)" : "");
        d.up = true;
        d.failures = 0;
        d.backoff = std::chrono::milliseconds(0);
        d.error.clear();
        d.next = now + options_.check_interval;
        changed = true;
      } else {
        failed(d, now, started.error().message);
      }
      continue;
    }
    auto answer = command(options_.control, d.spec.dirs, "get_default_active_thread_percentage");
    if (answer) {
      d.next = now + options_.check_interval;
      continue;
    }
    d.up = false;
    changed = true;
    failed(d, now, answer.error().message);
  }
  return changed;
}

void Supervisor::failed(Daemon& d, Clock::time_point now, const std::string& why) {
  ++d.failures;
  d.backoff = d.backoff.count() == 0 ? options_.backoff_min : std::min(d.backoff * 2, options_.backoff_max);
  d.next = now + d.backoff;
  // Logged when it starts failing and whenever the reason changes; repeats of
  // one reason only at debug, so a dead dependency does not flood the log.
  if (d.failures == 1 || why != d.error)
    spdlog::error("MPS daemon for {} ({}) is down: {}; its shares are Unhealthy; next try in {} ms", d.spec.uuid,
                  d.spec.resource, why, d.backoff.count());
  else
    spdlog::debug("MPS daemon for {}: still down ({} failures): {}", d.spec.uuid, d.failures, why);
  d.error = why;
}

Result<void> Supervisor::start(const DaemonSpec& spec) {
  // The daemon listens on <pipe>/control, a unix socket: its path must fit
  // sockaddr_un's 108 bytes, NUL included (unix(7)).
  constexpr size_t kSocketPathMax = 107;
  if (spec.dirs.pipe.size() + std::string_view("/control").size() > kSocketPathMax)
    return fail(Errc::invalid_argument, "the pipe directory " + spec.dirs.pipe + " is too long (" +
                                            std::to_string(spec.dirs.pipe.size()) +
                                            " bytes): the daemon's socket in it must fit a unix socket path of " +
                                            std::to_string(kSocketPathMax) + " bytes; choose a shorter mpsRoot");
  for (const auto& dir : {spec.dirs.pipe, spec.dirs.log}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(Errc::io, "cannot create " + dir + ": " + ec.message());
    if (::access(dir.c_str(), W_OK) != 0) return fail(Errc::io, dir + " is not writable");
  }
  // A daemon already answering here (from before a restart of tessera) is kept.
  if (!command(options_.control, spec.dirs, "get_default_active_thread_percentage")) {
    // One that is alive but does not answer is killed by the pid it wrote.
    if (pid_t stuck = daemon_pid(spec.dirs); stuck > 0) {
      spdlog::warn("MPS daemon {} in {} does not answer; killing it", stuck, spec.dirs.pipe);
      ::kill(stuck, SIGKILL);
      for (int i = 0; i < 100 && daemon_pid(spec.dirs) == stuck; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (auto started = start_daemon(options_.control, spec.dirs, spec.uuid); !started) return started;
  }
  // A command the daemon rejects may still exit 0: each value is read back.
  auto apply = [&](const std::string& set, const std::string& get, auto matches) -> Result<void> {
    if (auto done = command(options_.control, spec.dirs, set); !done) return unexpected(done.error());
    auto now = command(options_.control, spec.dirs, get);
    if (!now) return unexpected(now.error());
    if (!matches(*now))
      return fail(Errc::driver, "the MPS control daemon in " + spec.dirs.pipe + " did not take " + quote(set) +
                                    ": " + quote(get) + " answers " + quote(*now));
    return {};
  };
  if (spec.pinned_mem_limit_mib > 0) {
    const std::string value = std::to_string(spec.pinned_mem_limit_mib) + "M";
    if (auto r = apply("set_default_device_pinned_mem_limit 0 " + value, "get_default_device_pinned_mem_limit 0",
                       [&](const std::string& got) {
                         // NVIDIA does not document this reply's form: a value that reads as
                         // another size is a refusal; one that does not read at all is taken.
                         const auto bytes = size_of(got);
                         return !bytes || *bytes == spec.pinned_mem_limit_mib << 20;
                       });
        !r)
      return r;
  }
  return apply("set_default_active_thread_percentage " + std::to_string(spec.active_thread_percentage),
               "get_default_active_thread_percentage", [&](const std::string& got) {
                 char* end = nullptr;
                 const double v = std::strtod(got.c_str(), &end);
                 return end != got.c_str() && v == static_cast<double>(spec.active_thread_percentage);
               });
}

void Supervisor::quit(const DaemonSpec& spec) {
  const pid_t pid = daemon_pid(spec.dirs);
  auto answer = command(options_.control, spec.dirs, "quit");
  if (pid <= 0) return;
  for (int i = 0; i < 200 && daemon_pid(spec.dirs) == pid; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (daemon_pid(spec.dirs) == pid) {
    spdlog::warn("MPS daemon {} for {} did not quit{}; killing it", pid, spec.uuid,
                 answer ? "" : " (" + answer.error().message + ")");
    ::kill(pid, SIGKILL);
  }
}

bool Supervisor::healthy(const std::string& uuid) const {
  auto it = daemons_.find(uuid);
  return it != daemons_.end() && it->second.up;
}

std::set<std::string> Supervisor::down() const {
  std::set<std::string> out;
  for (const auto& [uuid, d] : daemons_)
    if (!d.up) out.insert(uuid);
  return out;
}

std::set<std::string> Supervisor::up() const {
  std::set<std::string> out;
  for (const auto& [uuid, d] : daemons_)
    if (d.up) out.insert(uuid);
  return out;
}

std::string Supervisor::last_error(const std::string& uuid) const {
  auto it = daemons_.find(uuid);
  return it == daemons_.end() ? std::string() : it->second.error;
}

unsigned Supervisor::failures(const std::string& uuid) const {
  auto it = daemons_.find(uuid);
  return it == daemons_.end() ? 0 : it->second.failures;
}

void Supervisor::stop() {
  for (auto& [uuid, d] : daemons_) {
    spdlog::info("stopping the MPS daemon for {}", uuid);
    quit(d.spec);
  }
  daemons_.clear();
}

}  // namespace tessera::mps
