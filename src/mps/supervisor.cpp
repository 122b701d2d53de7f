#include "mps/supervisor.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

namespace tessera::mps {

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
  if (spec.pinned_mem_limit_mib > 0)
    if (auto set = command(options_.control, spec.dirs,
                           "set_default_device_pinned_mem_limit 0 " + std::to_string(spec.pinned_mem_limit_mib) + "M");
        !set)
      return unexpected(set.error());
  if (auto set = command(options_.control, spec.dirs,
                         "set_default_active_thread_percentage " + std::to_string(spec.active_thread_percentage));
      !set)
    return unexpected(set.error());
  return {};
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
