#include "daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "state.hpp"

namespace tessera_mps_sim {
namespace {

constexpr const char* kProgram = "nvidia-cuda-mps-control";
constexpr const char* kServerProgram = "nvidia-cuda-mps-server";
constexpr const char* kNoDaemon = "Cannot find MPS control daemon process";
constexpr const char* kAlreadyRunning = "An instance of this daemon is already running";
constexpr int kReadyTimeoutMs = 10000;

volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string join(const std::string& dir, const char* name) { return dir + "/" + name; }

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string now_text(bool with_millis, const char* format) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local{};
  localtime_r(&ts.tv_sec, &local);
  char buf[64];
  ::strftime(buf, sizeof buf, format, &local);
  std::string out = buf;
  if (with_millis) {
    char ms[24];
    std::snprintf(ms, sizeof ms, ".%03ld", ts.tv_nsec / 1000000);
    out += ms;
  }
  return out;
}

// A directory the daemon needs: it must exist, be a directory and take new files.
// Returns an error message, empty when fine.
std::string check_directory(const std::string& dir, const char* variable) {
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0)
    return std::string(kProgram) + ": " + variable + " " + dir + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return std::string(kProgram) + ": " + variable + " " + dir + ": not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return std::string(kProgram) + ": " + variable + " " + dir + ": not writable: " + std::strerror(errno);
  return "";
}

std::string read_pid_file(const std::string& pipe_dir) {
  std::ifstream in(join(pipe_dir, kPidFileName));
  std::string pid;
  in >> pid;
  return pid;
}

class Daemon {
 public:
  Daemon(const Paths& paths, int lock_fd, int log_fd, int listen_fd, bool foreground, bool multi_user)
      : paths_(paths), lock_fd_(lock_fd), log_fd_(log_fd), listen_fd_(listen_fd), foreground_(foreground) {
    state_.multi_user = multi_user;
  }

  // Runs until `quit` or SIGTERM/SIGINT; `ready_fd` (or -1) is told "ok" once serving.
  int run(int ready_fd) {
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGINT, on_stop_signal);
    state_.pid = static_cast<int>(::getpid());
    state_.pipe_dir = paths_.pipe_dir;
    state_.log_dir = paths_.log_dir;
    state_.started_at = now_text(false, "%Y-%m-%dT%H:%M:%S%z");
    state_.hang = env_flag("TESSERA_SIM_MPS_HANG");
    // Where its servers would load the driver's libraries from, as it got it.
    if (const char* v = std::getenv("LD_LIBRARY_PATH")) state_.ld_library_path = v;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
      state_.cuda_visible_devices = v;
      std::stringstream in(v);
      for (std::string item; std::getline(in, item, ',');) {
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (!item.empty()) state_.visible.push_back(item);
      }
    }
    {
      std::ofstream pid_file(join(paths_.pipe_dir, kPidFileName), std::ios::trunc);
      pid_file << state_.pid << "\n";
    }
    // The state first: whoever sees the start lines (a foreground daemon's
    // reader) finds the daemon's record already there.
    save_state();
    log("Starting control daemon using socket " + join(paths_.pipe_dir, kSocketName));
    log("To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=" + paths_.pipe_dir);
    log("CUDA MPS Control binary version: 13000 (tessera simulator)");
    if (ready_fd >= 0) {
      write_all(ready_fd, "ok");
      ::close(ready_fd);
    }
    loop();
    return shutdown();
  }

 private:
  struct Conn {
    int fd;
    std::string buf;
    long client = 0;  // a CUDA client's connection (kClientHello): its id; 0 for a UI's
  };

  void log(const std::string& message) {
    char head[64];
    std::snprintf(head, sizeof head, " Control %5d] ", state_.pid);
    std::string line = "[" + now_text(true, "%Y-%m-%d %H:%M:%S") + head + message + "\n";
    write_all(log_fd_, line);
    if (foreground_) write_all(STDOUT_FILENO, line);
  }

  void save_state() {
    std::string path = join(paths_.pipe_dir, kStateName);
    std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << to_json(state_);
      if (!out) return;
    }
    std::rename(tmp.c_str(), path.c_str());
  }

  bool hanging() const {
    return state_.hang || ::access(join(paths_.pipe_dir, kHangFileName).c_str(), F_OK) == 0;
  }

  void loop() {
    while (!quit_ && !g_stop_signal) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const auto& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      int n = ::poll(fds.data(), fds.size(), 200);
      reap_servers();
      if (n <= 0) continue;
      // Known clients first: one that finished before the next connected is
      // logged closed before the next is accepted.
      for (size_t i = 1; i < fds.size() && !quit_; ++i)
        if (fds[i].revents) serve(fds[i].fd);
      if (!quit_ && (fds[0].revents & POLLIN)) accept_one();
      conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const Conn& c) { return c.fd < 0; }),
                   conns_.end());
    }
  }

  void accept_one() {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    conns_.push_back({fd, {}});
    if (!hanging()) {
      log("Accepting connection...");
      log("NEW UI");
    }
  }

  Conn* find(int fd) {
    for (auto& c : conns_)
      if (c.fd == fd) return &c;
    return nullptr;
  }

  void close_conn(Conn& c, bool log_it) {
    ::close(c.fd);
    c.fd = -1;
    if (c.client) {
      for (const auto& k : state_.clients)
        if (k.id == c.client)
          log("Client " + std::to_string(k.pid ? k.pid : k.reported_pid) + " disconnected (tessera simulator)");
      std::erase_if(state_.clients, [&](const Client& k) { return k.id == c.client; });
      c.client = 0;
      save_state();
      return;
    }
    if (log_it) log("UI closed");
  }

  // A CUDA client (the simulator's stand-in): a server for its user (started
  // if there is none), the limits it gets, its connection kept open for its life.
  void connect_client(Conn& c, const std::string& line) {
    std::istringstream in(line);
    std::string hello, threads, pinned;
    long reported = 0;
    in >> hello >> threads >> pinned >> reported;
    if (threads == "-") threads.clear();
    if (pinned == "-") pinned.clear();
    ucred cred{};
    socklen_t len = sizeof cred;
    ::getsockopt(c.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
    const long uid = static_cast<long>(cred.uid);
    auto reply = [&](const std::string& text) { write_all(c.fd, std::to_string(text.size()) + "\n" + text); };
    // Multi-user (-M): the one server takes every user's clients; otherwise one server per user.
    auto of_user = [&](const Server& s) { return state_.multi_user || s.uid == uid; };
    auto server = std::find_if(state_.servers.begin(), state_.servers.end(), of_user);
    if (server == state_.servers.end() && !state_.servers.empty()) {
      reply("tessera sim: a server for user " + std::to_string(state_.servers.front().uid) +
            " is running; queuing a client of another user is not modelled\n");
      return;
    }
    if (server == state_.servers.end()) {
      start_server(uid);
      server = std::find_if(state_.servers.begin(), state_.servers.end(), of_user);
      if (server == state_.servers.end()) {
        reply("tessera sim: no server could be started for user " + std::to_string(uid) + "\n");
        return;
      }
    }
    Client client = client_limits(*server, threads, pinned);
    client.id = ++clients_seen_;
    client.pid = static_cast<int>(cred.pid);
    client.reported_pid = static_cast<int>(reported);
    client.uid = uid;
    client.connected_at = now_text(true, "%Y-%m-%dT%H:%M:%S");
    state_.clients.push_back(client);
    c.client = client.id;
    std::string limits;
    for (const auto& [dev, limit] : client.pinned_mem_limits)
      limits += (limits.empty() ? "" : ",") + dev + "=" + limit.text;
    log("NEW CLIENT " + std::to_string(client.pid ? client.pid : client.reported_pid) + " from user " +
        std::to_string(uid) + ": server " + std::to_string(server->pid) + " (tessera simulator)");
    save_state();
    reply(std::to_string(server->pid) + "\n" + one_decimal(client.thread_percentage) + "\n" +
          (limits.empty() ? "none" : limits) + "\n");
  }

  void serve(int fd) {
    Conn* c = find(fd);
    if (!c) return;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      close_conn(*c, !hanging());
      return;
    }
    c->buf.append(buf, static_cast<size_t>(n));
    for (size_t nl; !quit_ && (nl = c->buf.find('\n')) != std::string::npos;) {
      std::string line = c->buf.substr(0, nl);
      c->buf.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (line.rfind(kClientHello, 0) == 0) {
        if (!c->client && !hanging()) connect_client(*c, line);
        continue;
      }
      if (c->client) continue;  // a client says nothing more
      state_.commands.push_back(line);
      if (hanging()) {  // the test hook: take the command, never answer
        save_state();
        continue;
      }
      log("Cmd:" + line);
      Outcome out = execute(state_, line);
      if (out.start_server) start_server(*out.start_server);
      std::string payload;
      for (const auto& l : out.reply) {
        log(l);
        payload += l + "\n";
      }
      save_state();
      write_all(fd, std::to_string(payload.size()) + "\n" + payload);
      if (out.quit) quit_ = true;
    }
  }

  // An MPS server for `uid`: as the real daemon does, the program
  // nvidia-cuda-mps-server found on this daemon's PATH (a daemon started
  // without the driver's directory on its PATH starts no server: NVIDIA
  // k8s-device-plugin issue #1614). The simulated server only waits, and
  // leaves when this daemon is gone (killed included) or told to. A server
  // that cannot be run is logged and the client gets none.
  void start_server(long uid) {
    int report[2];  // the child's exec error, if any; closed by a successful exec
    if (::pipe2(report, O_CLOEXEC) != 0) {
      log("Failed to start server for user " + std::to_string(uid) + ": " + std::strerror(errno));
      return;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      log("Failed to start server for user " + std::to_string(uid) + ": " + std::strerror(errno));
      ::close(report[0]);
      ::close(report[1]);
      return;
    }
    if (pid == 0) {
      std::signal(SIGTERM, SIG_DFL);
      std::signal(SIGINT, SIG_DFL);
      long max_fd = std::min(::sysconf(_SC_OPEN_MAX), 4096L);
      for (int fd = 3; fd < max_fd; ++fd)  // drops, not releases, the daemon's lock
        if (fd != report[1]) ::close(fd);
      ::execlp(kServerProgram, kServerProgram, static_cast<char*>(nullptr));
      const int error = errno;
      (void)!::write(report[1], &error, sizeof error);
      ::_exit(127);
    }
    ::close(report[1]);
    int error = 0;
    ssize_t n;
    do n = ::read(report[0], &error, sizeof error);
    while (n < 0 && errno == EINTR);
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof error)) {
      ::waitpid(pid, nullptr, 0);
      log("Failed to start server for user " + std::to_string(uid) + ": cannot run " + kServerProgram + " (PATH " +
          (std::getenv("PATH") ? std::getenv("PATH") : "unset") + "): " + std::strerror(error) + " (tessera simulator)");
      return;
    }
    log("Starting new server " + std::to_string(pid) + " for user " + std::to_string(uid));
    log("NEW SERVER " + std::to_string(pid) + ": Ready");
    state_.servers.push_back({static_cast<int>(pid), uid, state_.thread_percentage, state_.pinned_mem_limits});
  }

  void reap_servers() {
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      log("Server " + std::to_string(pid) + " exited with status " + std::to_string(code));
      std::erase_if(state_.servers, [pid](const Server& s) { return s.pid == pid; });
      // Its clients lose it.
      for (auto& c : conns_)
        if (c.fd >= 0 && c.client &&
            std::any_of(state_.clients.begin(), state_.clients.end(),
                        [&](const Client& k) { return k.id == c.client && k.server == pid; }))
          close_conn(c, false);
      save_state();
    }
  }

  int shutdown() {
    if (g_stop_signal) log("Caught signal " + std::to_string(static_cast<int>(g_stop_signal)) + " (tessera simulator)");
    for (const auto& s : state_.servers) ::kill(s.pid, SIGTERM);
    for (const auto& s : state_.servers) {
      int status = 0;
      if (::waitpid(s.pid, &status, 0) == s.pid) {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        log("Server " + std::to_string(s.pid) + " exited with status " + std::to_string(code));
      }
    }
    state_.servers.clear();
    state_.clients.clear();
    for (auto& c : conns_)
      if (c.fd >= 0) ::close(c.fd);
    conns_.clear();
    ::close(listen_fd_);
    ::unlink(join(paths_.pipe_dir, kSocketName).c_str());
    ::unlink(join(paths_.pipe_dir, kPidFileName).c_str());
    state_.running = false;
    save_state();
    log("Exit with status 0");
    ::close(log_fd_);
    ::close(lock_fd_);
    return 0;
  }

  Paths paths_;
  int lock_fd_, log_fd_, listen_fd_;
  bool foreground_;
  bool quit_ = false;
  State state_;
  std::vector<Conn> conns_;
  long clients_seen_ = 0;
};

bool socket_address(const std::string& pipe_dir, sockaddr_un& addr) {
  std::string path = join(pipe_dir, kSocketName);
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Reads a reply frame ("<bytes>\n<payload>"); false when the connection ends first.
bool read_reply(int fd, std::string& pending, std::string& payload) {
  auto fill = [&]() {
    char buf[4096];
    ssize_t n;
    do n = ::read(fd, buf, sizeof buf);
    while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    pending.append(buf, static_cast<size_t>(n));
    return true;
  };
  size_t nl;
  while ((nl = pending.find('\n')) == std::string::npos)
    if (!fill()) return false;
  size_t size = std::strtoul(pending.substr(0, nl).c_str(), nullptr, 10);
  pending.erase(0, nl + 1);
  while (pending.size() < size)
    if (!fill()) return false;
  payload = pending.substr(0, size);
  pending.erase(0, size);
  return true;
}

}  // namespace

Paths paths_from_env() {
  return {env_or("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), env_or("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")};
}

int start_daemon(const Paths& paths, bool background, bool multi_user) {
  if (const char* why = std::getenv("TESSERA_SIM_MPS_FAIL_START"); why && *why) {
    std::cerr << kProgram << ": failed to start the control daemon (TESSERA_SIM_MPS_FAIL_START: " << why << ")\n";
    return 1;
  }
  for (auto [dir, variable] : {std::pair{paths.pipe_dir, "CUDA_MPS_PIPE_DIRECTORY"},
                               std::pair{paths.log_dir, "CUDA_MPS_LOG_DIRECTORY"}}) {
    if (auto err = check_directory(dir, variable); !err.empty()) {
      std::cerr << err << "\n";
      return 1;
    }
  }
  sockaddr_un addr{};
  if (!socket_address(paths.pipe_dir, addr)) {
    std::cerr << kProgram << ": CUDA_MPS_PIPE_DIRECTORY " << paths.pipe_dir << ": path too long for a unix socket\n";
    return 1;
  }
  std::string lock_path = join(paths.pipe_dir, kLockName);
  int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    std::cerr << kProgram << ": cannot create " << lock_path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  // The lock, not the files, says whether a daemon lives: a killed daemon's
  // lock goes with it, so its leftover socket and pid file never block a new one.
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    std::cerr << kAlreadyRunning << "\n";
    std::string pid = read_pid_file(paths.pipe_dir);
    std::cerr << "(tessera simulator: pid " << (pid.empty() ? "unknown" : pid) << " serves " << paths.pipe_dir
              << ")\n";
    ::close(lock_fd);
    return 1;
  }
  std::string log_path = join(paths.log_dir, "control.log");
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    std::cerr << kProgram << ": cannot open " << log_path << ": " << std::strerror(errno) << "\n";
    ::close(lock_fd);
    return 1;
  }
  ::unlink(addr.sun_path);  // a dead daemon's socket, if any
  int listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || ::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd, 64) != 0) {
    std::cerr << kProgram << ": cannot listen on " << addr.sun_path << ": " << std::strerror(errno) << "\n";
    ::close(lock_fd);
    ::close(log_fd);
    return 1;
  }
  // Multi-user: clients of every user must reach it (the simulator's choice of
  // how; the pipe directory's own permissions still apply).
  if (multi_user) ::chmod(addr.sun_path, 0666);

  if (!background) return Daemon(paths, lock_fd, log_fd, listen_fd, true, multi_user).run(-1);

  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    std::cerr << kProgram << ": pipe: " << std::strerror(errno) << "\n";
    return 1;
  }
  std::cout.flush();
  std::cerr.flush();
  pid_t child = ::fork();
  if (child < 0) {
    std::cerr << kProgram << ": fork: " << std::strerror(errno) << "\n";
    return 1;
  }
  if (child == 0) {
    ::close(ready[0]);
    ::setsid();
    pid_t daemon = ::fork();
    if (daemon != 0) ::_exit(daemon < 0 ? 1 : 0);
    int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(null_fd, STDERR_FILENO);
      if (null_fd > STDERR_FILENO) ::close(null_fd);
    }
    ::umask(022);
    int rc = Daemon(paths, lock_fd, log_fd, listen_fd, false, multi_user).run(ready[1]);
    std::exit(rc);
  }
  ::close(ready[1]);
  ::close(lock_fd);
  ::close(log_fd);
  ::close(listen_fd);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::string answer;
  pollfd pfd{ready[0], POLLIN, 0};
  for (int waited = 0; waited < kReadyTimeoutMs && answer != "ok"; waited += 100) {
    if (::poll(&pfd, 1, 100) <= 0) continue;
    char buf[16];
    ssize_t n = ::read(ready[0], buf, sizeof buf);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(ready[0]);
  if (answer != "ok") {
    std::cerr << kProgram << ": the control daemon did not come up\n";
    return 1;
  }
  return 0;
}

// The daemon's socket, connected; -1 (with NVIDIA's message on stderr) when no daemon listens.
static int connect_daemon(const Paths& paths) {
  sockaddr_un addr{};
  int fd = -1;
  if (socket_address(paths.pipe_dir, addr)) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  if (fd < 0) std::cerr << kNoDaemon << "\n";
  return fd;
}

int run_sim_client(const Paths& paths) {
  const int fd = connect_daemon(paths);
  if (fd < 0) return 1;
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  auto env_value = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string("-");
  };
  std::string hello = std::string(kClientHello) + " " + env_value("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") + " " +
                      env_value("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") + " " + std::to_string(::getpid()) + "\n";
  std::string pending, payload;
  if (!write_all(fd, hello) || !read_reply(fd, pending, payload)) {
    std::cerr << "tessera sim MPS client: lost the connection to the control daemon\n";
    return 1;
  }
  std::istringstream reply(payload);
  std::string server, threads, pinned;
  std::getline(reply, server);
  std::getline(reply, threads);
  std::getline(reply, pinned);
  if (server.empty() || server.find_first_not_of("0123456789") != std::string::npos) {
    std::cerr << payload;
    return 1;
  }
  std::cout << "tessera sim MPS client " << ::getpid() << ": MPS server " << server << ", active thread percentage "
            << threads << ", pinned device memory limit " << pinned << std::endl;
  // Connected for its life: until a signal, or until the daemon goes.
  while (!g_stop_signal) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::cout << "tessera sim MPS client " << ::getpid() << ": lost its MPS server " << server << std::endl;
      return 1;
    }
  }
  ::close(fd);
  return 0;
}

int run_client(const Paths& paths) {
  const int fd = connect_daemon(paths);
  if (fd < 0) return 1;
  std::signal(SIGPIPE, SIG_IGN);
  std::string pending, payload;
  for (std::string line; std::getline(std::cin, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!write_all(fd, line + "\n") || !read_reply(fd, pending, payload)) {
      std::cerr << kProgram << ": lost the connection to the control daemon\n";
      ::close(fd);
      return 1;
    }
    std::cout << payload << std::flush;
    std::istringstream first(line);
    std::string word;
    first >> word;
    if (word == "quit" && payload.empty()) break;  // the daemon is going away
  }
  ::close(fd);
  return 0;
}

}  // namespace tessera_mps_sim
