#include "mps/host.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/text.hpp"

namespace tessera::mps {
namespace {

using nlohmann::json;

constexpr size_t kMaxLine = 1u << 20;    // one document
constexpr size_t kMaxQueued = 4u << 20;  // unsent to one client before it is dropped

json spec_json(const DaemonSpec& s) {
  return {{"uuid", s.uuid},
          {"resource", s.resource},
          {"pipe", s.dirs.pipe},
          {"log", s.dirs.log},
          {"pinned_mem_limit_mib", s.pinned_mem_limit_mib},
          {"active_thread_percentage", s.active_thread_percentage},
          {"multi_user", s.multi_user}};
}

DaemonSpec spec_of(const json& j) {
  DaemonSpec s;
  s.uuid = j.at("uuid").get<std::string>();
  s.resource = j.value("resource", "");
  s.dirs.pipe = j.at("pipe").get<std::string>();
  s.dirs.log = j.at("log").get<std::string>();
  s.pinned_mem_limit_mib = j.value("pinned_mem_limit_mib", std::uint64_t{0});
  s.active_thread_percentage = j.value("active_thread_percentage", std::uint32_t{100});
  s.multi_user = j.value("multi_user", false);
  return s;
}

bool socket_address(const std::string& path, sockaddr_un& addr) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return true;
}

// A connected socket to `path`, or -1 with errno set.
int connect_to(const std::string& path) {
  sockaddr_un addr{};
  if (!socket_address(path, addr)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Takes the complete lines out of `buf`.
std::vector<std::string> lines_of(std::string& buf) {
  std::vector<std::string> out;
  for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
    out.push_back(buf.substr(0, nl));
    buf.erase(0, nl + 1);
  }
  return out;
}

}  // namespace

std::string encode_want(const std::vector<DaemonSpec>& wanted) {
  json list = json::array();
  for (const auto& s : wanted) list.push_back(spec_json(s));
  return json{{"want", list}}.dump() + "\n";
}

std::string encode_status(const std::vector<DaemonStatus>& status) {
  json list = json::array();
  for (const auto& d : status) {
    json j = spec_json(d.spec);
    j["up"] = d.up;
    j["pid"] = d.pid;
    j["since"] = d.since;
    j["failures"] = d.failures;
    j["retry_in_ms"] = d.retry_in_ms;
    j["error"] = d.error;
    j["limits"] = d.limits;
    j["clients"] = d.clients;
    j["note"] = d.note;
    list.push_back(std::move(j));
  }
  return json{{"daemons", list}}.dump() + "\n";
}

Result<std::vector<DaemonSpec>> decode_want(const std::string& line) {
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("want") || !j["want"].is_array())
    return fail(Errc::parse, "not a request ({\"want\": [...]}): " + quote(line));
  try {
    std::vector<DaemonSpec> out;
    for (const auto& e : j["want"]) out.push_back(spec_of(e));
    return out;
  } catch (const json::exception& e) {
    return fail(Errc::parse, std::string("a wanted daemon is malformed: ") + e.what());
  }
}

Result<std::vector<DaemonStatus>> decode_status(const std::string& line) {
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(Errc::parse, "not a JSON document: " + quote(line));
  if (j.contains("error")) return fail(Errc::invalid_argument, "tessera mps-host: " + j["error"].dump());
  if (!j.contains("daemons") || !j["daemons"].is_array()) return fail(Errc::parse, "no daemons: " + quote(line));
  try {
    std::vector<DaemonStatus> out;
    for (const auto& e : j["daemons"]) {
      DaemonStatus d;
      d.spec = spec_of(e);
      d.up = e.value("up", false);
      d.pid = e.value("pid", -1);
      d.since = e.value("since", "");
      d.failures = e.value("failures", 0u);
      d.retry_in_ms = e.value("retry_in_ms", std::int64_t{0});
      d.error = e.value("error", "");
      d.limits = e.value("limits", "");
      d.clients = e.value("clients", -1);
      d.note = e.value("note", "");
      out.push_back(std::move(d));
    }
    return out;
  } catch (const json::exception& e) {
    return fail(Errc::parse, std::string("a daemon's state is malformed: ") + e.what());
  }
}

// ---------------------------------------------------------------- the host

struct HostServer::Connection {
  int fd = -1;
  pid_t pid = -1;
  std::string in, out;
  bool wanted = false;  // has sent a `want` on this connection
};

HostServer::HostServer(HostOptions options) : options_(std::move(options)), supervisor_(options_.supervisor) {}

Result<std::unique_ptr<HostServer>> HostServer::start(HostOptions options) {
  sockaddr_un addr{};
  if (!socket_address(options.socket, addr))
    return fail(Errc::invalid_argument, "the socket path " + quote(options.socket) + " is empty or longer than " +
                                            std::to_string(sizeof addr.sun_path - 1) + " bytes");
  const auto dir = std::filesystem::path(options.socket).parent_path();
  std::error_code ec;
  if (!dir.empty()) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(Errc::io, "cannot create " + dir.string() + ": " + ec.message());
    // Only this user (root on a node) may reach the daemons' owner.
    if (::chmod(dir.c_str(), 0700) != 0)
      spdlog::warn("cannot make {} private (mode 0700): {}", dir.string(), std::strerror(errno));
  }
  if (int other = connect_to(options.socket); other >= 0) {
    ::close(other);
    return fail(Errc::conflict, "another tessera mps-host answers on " + options.socket);
  }
  ::unlink(options.socket.c_str());  // a dead host's socket
  std::unique_ptr<HostServer> host(new HostServer(std::move(options)));
  host->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (host->listen_fd_ < 0 || ::bind(host->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::chmod(host->options_.socket.c_str(), 0600) != 0 || ::listen(host->listen_fd_, 16) != 0)
    return fail(Errc::io, "cannot listen on " + host->options_.socket + ": " + std::strerror(errno));
  host->thread_ = std::thread([h = host.get()] { h->run(); });
  return host;
}

HostServer::~HostServer() { stop(); }

size_t HostServer::connections() const {
  std::lock_guard lock(mutex_);
  return connections_;
}

void HostServer::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_.notify();
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    ::unlink(options_.socket.c_str());
  }
  supervisor_.stop();
}

void HostServer::run() {
  std::vector<Connection> conns;
  std::string last_sent;  // the last document, so an unchanged one is not sent again
  auto queue_all = [&](const std::string& line) {
    for (auto& c : conns) c.out += line;
  };
  auto flush = [](Connection& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      c.out.erase(0, static_cast<size_t>(n));
    }
    return true;
  };
  auto close_conn = [&](Connection& c, const std::string& why) {
    spdlog::info("mps-host: client pid {} {}; the daemons keep running", c.pid, why);
    ::close(c.fd);
    c.fd = -1;
  };
  for (;;) {
    std::vector<pollfd> fds{{stop_.fd(), POLLIN, 0}, {listen_fd_, POLLIN, 0}, {supervisor_.changed_fd(), POLLIN, 0}};
    for (const auto& c : conns) fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      spdlog::error("mps-host: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[0].revents) break;
    if (fds[2].revents) {
      supervisor_.drain();
      std::string doc = encode_status(supervisor_.status());
      if (doc != last_sent) {
        queue_all(doc);
        last_sent = std::move(doc);
      }
    }
    if (fds[1].revents) {
      for (int fd; (fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;) {
        ucred cred{};
        socklen_t len = sizeof cred;
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
            (cred.uid != ::geteuid() && cred.uid != 0)) {
          spdlog::warn("mps-host: refused a client running as uid {} (pid {}): only uid {} or root may connect",
                       cred.uid, cred.pid, ::geteuid());
          ::close(fd);
          continue;
        }
        Connection c;
        c.fd = fd;
        c.pid = cred.pid;
        // What it finds: the daemons as they are, to adopt.
        c.out = encode_status(supervisor_.status());
        spdlog::info("mps-host: client pid {} connected", c.pid);
        conns.push_back(std::move(c));
      }
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      if (i + 3 >= fds.size()) break;  // accepted in this turn: polled from the next
      auto& c = conns[i];
      const auto revents = fds[3 + i].revents;
      if (c.fd < 0) continue;
      if (revents & POLLIN) {
        char buf[8192];
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          close_conn(c, n == 0 ? "disconnected" : std::string("lost: ") + std::strerror(errno));
          continue;
        }
        if (n > 0) c.in.append(buf, static_cast<size_t>(n));
        for (const auto& line : lines_of(c.in)) {
          if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
          auto wanted = decode_want(line);
          if (!wanted) {
            spdlog::warn("mps-host: client pid {}: {}", c.pid, wanted.error().message);
            c.out += json{{"error", wanted.error().message}}.dump() + "\n";
            continue;
          }
          std::vector<std::string> names;
          for (const auto& s : *wanted) names.push_back(s.uuid);
          spdlog::info("mps-host: client pid {} wants {} daemon(s){}{}", c.pid, wanted->size(),
                       names.empty() ? "" : ": ", join(names));
          // Its first: the daemons it keeps are read back for it.
          supervisor_.set(std::move(*wanted), !c.wanted);
          c.wanted = true;
        }
        if (c.in.size() > kMaxLine) {
          close_conn(c, "sent a line longer than 1 MiB");
          continue;
        }
      } else if (revents & (POLLHUP | POLLERR)) {
        close_conn(c, "disconnected");
        continue;
      }
    }
    for (auto& c : conns) {
      if (c.fd < 0 || c.out.empty()) continue;
      if (!flush(c)) close_conn(c, std::string("lost: ") + std::strerror(errno));
      else if (c.out.size() > kMaxQueued) close_conn(c, "does not read what it is sent");
    }
    std::erase_if(conns, [](const Connection& c) { return c.fd < 0; });
    std::lock_guard lock(mutex_);
    connections_ = conns.size();
  }
  for (auto& c : conns)
    if (c.fd >= 0) ::close(c.fd);
}

// ---------------------------------------------------------------- the client

HostClient::HostClient(std::string socket) : socket_(std::move(socket)) {
  unreachable_ = "not connected to tessera mps-host at " + socket_ + " yet";
  thread_ = std::thread([this] { run(); });
}

HostClient::~HostClient() { shutdown(); }

void HostClient::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify();
  if (thread_.joinable()) thread_.join();
}

void HostClient::want(std::vector<DaemonSpec> wanted) {
  {
    std::lock_guard lock(mutex_);
    wanted_ = std::move(wanted);
    want_unsent_ = true;
  }
  wake_.notify();
  changed_.notify();
}

bool HostClient::connected() const {
  std::lock_guard lock(mutex_);
  return connected_;
}

std::vector<DaemonStatus> HostClient::status() const {
  std::lock_guard lock(mutex_);
  std::vector<DaemonStatus> out;
  if (!wanted_) return out;
  for (const auto& spec : *wanted_) {
    auto it = host_.find(spec.uuid);
    // The same daemon: its directories and its mode (-M only at start: another mode is another daemon).
    if (connected_ && it != host_.end() && it->second.spec.dirs == spec.dirs &&
        it->second.spec.multi_user == spec.multi_user) {
      out.push_back(it->second);
      continue;
    }
    DaemonStatus d;
    d.spec = spec;
    d.error = connected_ ? "tessera mps-host at " + socket_ + " has not started it yet" : unreachable_;
    out.push_back(std::move(d));
  }
  return out;
}

std::set<std::string> HostClient::up() const {
  std::set<std::string> out;
  for (const auto& d : status())
    if (d.up) out.insert(d.spec.uuid);
  return out;
}

void HostClient::apply(std::vector<DaemonStatus> daemons, bool first) {
  std::map<std::string, DaemonStatus> fresh, old;
  for (auto& d : daemons) fresh.emplace(d.spec.uuid, std::move(d));
  std::vector<DaemonSpec> wanted;
  {
    std::lock_guard lock(mutex_);
    old = host_;
    host_ = fresh;
    if (wanted_) wanted = *wanted_;
  }
  changed_.notify();
  if (first) {
    initial_.clear();
    reported_.clear();
    for (const auto& [uuid, d] : fresh)
      if (d.up) initial_.emplace(uuid, d.pid);
  }
  // The plugin's log says what the host saw, for the daemons it wants (which
  // may reach the host after its first document: adopted is said then).
  for (const auto& spec : wanted) {
    auto it = fresh.find(spec.uuid);
    if (it == fresh.end() || !(it->second.spec.dirs == spec.dirs) || it->second.spec.multi_user != spec.multi_user)
      continue;
    const DaemonStatus& now = it->second;
    auto o = old.find(spec.uuid);
    const DaemonStatus* before = (o == old.end() || first) ? nullptr : &o->second;
    const bool unreported = now.up && !reported_.contains(spec.uuid);
    if (now.up) reported_.insert(spec.uuid);
    if (now.up && (unreported || !before || !before->up || before->pid != now.pid)) {
      auto adopted = initial_.find(spec.uuid);
      if (unreported && adopted != initial_.end() && adopted->second == now.pid)
        spdlog::info("MPS daemon for {} ({}): adopted from tessera mps-host: pid {}, up since {}, pipe directory {}, "
                     "limits {}", spec.uuid, spec.resource, now.pid, now.since, now.spec.dirs.pipe, now.limits);
      else
        spdlog::info("MPS daemon for {} ({}) is up (tessera mps-host): pid {}, pipe directory {}, limits {}", spec.uuid,
                     spec.resource, now.pid, now.spec.dirs.pipe, now.limits);
    } else if (!now.up && (!before || before->up || before->error != now.error)) {
      spdlog::error("MPS daemon for {} ({}) is down: {}; its shares are Unhealthy (tessera mps-host retries in {} ms)",
                    spec.uuid, spec.resource, now.error, now.retry_in_ms);
    }
    if (!now.note.empty() && (!before || before->note != now.note))
      spdlog::info("MPS daemon for {} ({}), pid {}: {}", spec.uuid, spec.resource, now.pid, now.note);
    else if (now.up && before && before->up && before->pid == now.pid && before->limits != now.limits)
      spdlog::info("MPS daemon for {} ({}), pid {}: limits read back: {}", spec.uuid, spec.resource, now.pid,
                   now.limits);
  }
}

void HostClient::lost(const std::string& why) {
  bool had;
  {
    std::lock_guard lock(mutex_);
    had = connected_ || unreachable_ != why;
    connected_ = false;
    unreachable_ = why;
    host_.clear();
  }
  if (had) {
    spdlog::error("{}: the MPS shares are Unhealthy until it answers", why);
    changed_.notify();
  }
}

void HostClient::run() {
  std::chrono::milliseconds backoff{100};
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    const int fd = connect_to(socket_);
    if (fd < 0) {
      lost("cannot reach tessera mps-host at " + socket_ + ": " + std::strerror(errno));
      pollfd p{wake_.fd(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(backoff.count())) > 0) wake_.drain();
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      continue;
    }
    backoff = std::chrono::milliseconds(100);
    {
      std::lock_guard lock(mutex_);
      connected_ = true;
      unreachable_.clear();
      want_unsent_ = wanted_.has_value();
    }
    spdlog::info("connected to tessera mps-host at {}", socket_);
    std::string buf;
    bool first = true;
    std::string why;
    for (;;) {
      std::string request;
      {
        std::lock_guard lock(mutex_);
        if (stopping_) break;
        if (want_unsent_ && wanted_) request = encode_want(*wanted_);
        want_unsent_ = false;
      }
      // Small, and the host reads at once: a blocking send, bounded.
      size_t done = 0;
      while (done < request.size()) {
        const ssize_t n = ::send(fd, request.data() + done, request.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      if (done < request.size()) {
        why = std::string("lost tessera mps-host at ") + socket_ + ": " + std::strerror(errno);
        break;
      }
      pollfd p[2] = {{fd, POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        why = std::string("poll: ") + std::strerror(errno);
        break;
      }
      if (p[1].revents) wake_.drain();
      if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char chunk[16384];
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = "lost tessera mps-host at " + socket_ + ": " + (n == 0 ? "it closed the connection" : std::strerror(errno));
        break;
      }
      buf.append(chunk, static_cast<size_t>(n));
      for (const auto& line : lines_of(buf)) {
        auto doc = decode_status(line);
        if (!doc) {
          spdlog::warn("tessera mps-host at {}: {}", socket_, doc.error().message);
          continue;
        }
        apply(std::move(*doc), first);
        first = false;
      }
      if (buf.size() > kMaxLine) {
        why = "tessera mps-host at " + socket_ + " sent a line longer than 1 MiB";
        break;
      }
    }
    ::close(fd);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    lost(why);
  }
}

}  // namespace tessera::mps
