#include "mps/control.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/process.hpp"
#include "core/text.hpp"

namespace tessera::mps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kTailBytes = 4096;

// The system calls themselves: glibc 2.36's <sys/pidfd.h> declares its
// wrappers without C linkage, so C++ cannot link them.
int open_pidfd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u)); }
int send_signal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0u));
}

std::vector<std::string> environment(const ControlOptions& options, const Dirs& dirs, const std::string& device) {
  std::vector<std::string> add = {"CUDA_MPS_PIPE_DIRECTORY=" + dirs.pipe, "CUDA_MPS_LOG_DIRECTORY=" + dirs.log};
  std::vector<std::string> drop = {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "CUDA_VISIBLE_DEVICES"};
  if (!device.empty()) add.push_back("CUDA_VISIBLE_DEVICES=" + device);
  if (const auto slash = options.binary.rfind('/'); slash != std::string::npos) {
    drop.push_back("PATH");
    add.push_back(path_with_first("PATH", options.binary.substr(0, std::max<size_t>(slash, 1)),
                            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
  }
  if (!options.library_dir.empty()) {
    drop.push_back("LD_LIBRARY_PATH");
    add.push_back(path_with_first("LD_LIBRARY_PATH", options.library_dir));
  }
  return environment_with(drop, add);
}

// `binary args...` (core/process's spawn), its failure naming the MPS control program.
Result<Child> spawn(const ControlOptions& options, std::vector<std::string> args, const std::vector<std::string>& env,
                    bool with_stdin, bool own_group) {
  auto child = tessera::spawn(options.binary, std::move(args), env, {with_stdin, own_group});
  if (!child && child.error().code == Errc::not_found)
    return fail(Errc::not_found, "cannot run the MPS control program " + quote(options.binary) + ": " + child.error().message);
  return child;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t start = 0;
  while (start < s.size() && (s[start] == '\n' || s[start] == ' ')) ++start;
  return s.substr(start);
}

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int n;
  do n = ::poll(&p, 1, timeout_ms);
  while (n < 0 && errno == EINTR);
  return n > 0;
}

}  // namespace

DaemonProcess::DaemonProcess(DaemonProcess&& other) noexcept
    : pid_(other.pid_), pidfd_(other.pidfd_), output_(other.output_), tail_(std::move(other.tail_)) {
  other.pid_ = -1;
  other.pidfd_ = other.output_ = -1;
}

DaemonProcess& DaemonProcess::operator=(DaemonProcess&& other) noexcept {
  if (this != &other) {
    close_all();
    pid_ = other.pid_;
    pidfd_ = other.pidfd_;
    output_ = other.output_;
    tail_ = std::move(other.tail_);
    other.pid_ = -1;
    other.pidfd_ = other.output_ = -1;
  }
  return *this;
}

DaemonProcess::~DaemonProcess() { close_all(); }

void DaemonProcess::close_all() {
  if (pidfd_ >= 0) ::close(pidfd_);
  if (output_ >= 0) ::close(output_);
  pidfd_ = output_ = -1;
}

bool DaemonProcess::running() const { return pidfd_ >= 0 && !readable(pidfd_, 0); }

bool DaemonProcess::signal(int sig) const {
  return pidfd_ >= 0 && send_signal(pidfd_, sig) == 0;
}

bool DaemonProcess::wait_exit(std::chrono::milliseconds within) const {
  if (pidfd_ < 0) return true;
  return readable(pidfd_, static_cast<int>(within.count()));
}

std::string DaemonProcess::reap() {
  output_tail();  // what it said last, before the pipe goes
  if (pidfd_ < 0) return "is gone";
  siginfo_t info{};
  int rc;
  do rc = ::waitid(P_PIDFD, static_cast<id_t>(pidfd_), &info, WEXITED);
  while (rc < 0 && errno == EINTR);
  ::close(pidfd_);
  pidfd_ = -1;
  if (rc != 0) return "exited (its status was collected elsewhere)";
  if (info.si_code == CLD_EXITED) return "exited with status " + std::to_string(info.si_status);
  return "was killed by signal " + std::to_string(info.si_status) + " (" + strsignal(info.si_status) + ")";
}

const std::string& DaemonProcess::output_tail() {
  if (output_ < 0) return tail_;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(output_, buf, sizeof buf);
    if (n > 0) {
      tail_.append(buf, static_cast<size_t>(n));
      if (tail_.size() > kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {  // every writer closed it
      ::close(output_);
      output_ = -1;
    }
    break;
  }
  return tail_;
}

Result<DaemonProcess> start_foreground(const ControlOptions& options, const Dirs& dirs, const std::string& device,
                                       bool multi_user) {
  // -M as NVIDIA's DRA driver passes it for multiUser [dra-driver-nvidia-gpu mps-control-daemon.tmpl.yaml]
  std::vector<std::string> args{"-f"};
  if (multi_user) args.push_back("-M");
  auto child = spawn(options, args, environment(options, dirs, device), false, true);
  if (!child) return unexpected(child.error());
  const int pidfd = open_pidfd(child->pid);
  if (pidfd < 0) {
    const int err = errno;
    // Without a pidfd it cannot be watched or stopped safely: stop it now,
    // while it is certainly still this process's unreaped child.
    ::kill(child->pid, SIGKILL);
    ::waitpid(child->pid, nullptr, 0);
    ::close(child->out);
    return fail(Errc::io, std::string("pidfd_open: ") + std::strerror(err) + " (Linux 5.3 or newer is needed)");
  }
  // Its output is read when convenient, never waited on; a larger pipe gives
  // the daemon room to write between reads.
  ::fcntl(child->out, F_SETFL, ::fcntl(child->out, F_GETFL) | O_NONBLOCK);
  ::fcntl(child->out, F_SETPIPE_SZ, 1 << 20);
  return DaemonProcess(child->pid, pidfd, child->out);
}

Result<std::string> command(const ControlOptions& options, const Dirs& dirs, const std::string& line, int abort_fd) {
  auto child = spawn(options, {}, environment(options, dirs, {}), true, false);
  if (!child) return unexpected(child.error());
  const auto deadline = Clock::now() + options.timeout;
  // One command, then end of input: the client sends it and prints the reply.
  const std::string text = line + "\n";
  ::signal(SIGPIPE, SIG_IGN);
  [[maybe_unused]] const ssize_t wrote = ::write(child->in, text.data(), text.size());
  ::close(child->in);
  std::string reply;
  bool timed_out = false, aborted = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p[2] = {{child->out, POLLIN, 0}, {abort_fd, POLLIN, 0}};
    const int ready = ::poll(p, abort_fd >= 0 ? 2 : 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    if (abort_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      aborted = true;
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(child->out, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > (1u << 20)) break;  // a runaway client: enough to quote
  }
  ::close(child->out);
  bool late = false;
  const int status = reap(child->pid, (timed_out || aborted) ? Clock::now() : deadline, late);
  if (aborted)
    return fail(Errc::conflict, "the MPS control daemon in " + dirs.pipe + " exited while " + quote(line) + " ran");
  if (timed_out || late)
    return fail(Errc::timeout, "MPS control daemon in " + dirs.pipe + " did not answer " + quote(line) + " within " +
                                   std::to_string(options.timeout.count()) + " ms");
  if (status != 0)
    return fail(Errc::io, "MPS control daemon in " + dirs.pipe + " refused " + quote(line) + " (exit status " +
                              std::to_string(status) + "): " + excerpt(trimmed(reply), 200));
  return trimmed(reply);
}

}  // namespace tessera::mps
