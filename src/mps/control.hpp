// Talking to NVIDIA's MPS control program, `nvidia-cuda-mps-control`, the way
// an operator does (NVIDIA MPS documentation, "Tools and Interface Reference";
// docs/design-mps.md):
//   - `nvidia-cuda-mps-control -f` runs the control daemon in the foreground:
//     it stays the child of whoever started it, so its death is seen through
//     a pidfd at once and a kill can name exactly that process;
//   - without arguments the program is a client: one command on its standard
//     input, the daemon's reply on its standard output, exit status 0 when
//     the daemon took the command.
// Both run with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY naming the
// daemon's directories and, for `-f`, CUDA_VISIBLE_DEVICES naming the one GPU
// or MIG device the daemon serves. Every command has a deadline: a daemon
// that never answers costs one timeout, never a hung supervisor.
//
// Nothing here reads a pid from a file: the pipe directory is mounted
// read-write into the daemon's clients, so its pid file is theirs to write.
// The only process this code signals is a DaemonProcess it started itself.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

#include "core/error.hpp"

namespace tessera::mps {

struct Dirs {
  std::string pipe;  // CUDA_MPS_PIPE_DIRECTORY
  std::string log;   // CUDA_MPS_LOG_DIRECTORY
  bool operator==(const Dirs&) const = default;
};

struct ControlOptions {
  // A path, or a name looked up on PATH. A path's directory goes first on
  // the daemon's PATH: the daemon runs nvidia-cuda-mps-server from its PATH
  // (NVIDIA k8s-device-plugin issue #1614), and a driver root mounted into a
  // container is on nobody's PATH.
  std::string binary = "nvidia-cuda-mps-control";
  // The driver's library directory, first on the daemon's LD_LIBRARY_PATH
  // (its servers load libcuda.so.1 from there); empty: the loader's own path.
  std::string library_dir;
  std::chrono::milliseconds timeout{5000};
};

// A control daemon this process started (`-f`): its pid and a pidfd on it.
// The pidfd turns readable when the daemon exits, and signals go through it,
// so they reach this very process even after its pid is reused. Move-only;
// destruction closes the descriptors without signalling (stop it first).
class DaemonProcess {
 public:
  DaemonProcess() = default;
  DaemonProcess(pid_t pid, int pidfd, int output) : pid_(pid), pidfd_(pidfd), output_(output) {}
  DaemonProcess(DaemonProcess&& other) noexcept;
  DaemonProcess& operator=(DaemonProcess&& other) noexcept;
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess();

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_; }
  int output() const { return output_; }  // its stdout and stderr (a pipe, non-blocking), -1 when none
  bool running() const;                   // not exited yet
  bool signal(int sig) const;             // through the pidfd
  // Waits until it exits or `within` passes; true once it has exited.
  bool wait_exit(std::chrono::milliseconds within) const;
  // After it exited: reaps it; its exit status in words ("exited with status 1",
  // "was killed by signal 9").
  std::string reap();
  // What it printed lately (the output pipe drained into a small tail).
  const std::string& output_tail();

 private:
  void close_all();
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int output_ = -1;
  std::string tail_;
};

// `binary -f` (with `-M` when `multi_user`: one server for clients of every
// user id) for `device` (CUDA_VISIBLE_DEVICES), in its own process group,
// with default signal handling and an empty signal mask. Returns once it is
// started, not once it answers. Errors name the binary and the reason.
[[nodiscard]] Result<DaemonProcess> start_foreground(const ControlOptions& options, const Dirs& dirs,
                                                     const std::string& device, bool multi_user = false);

// One command through the client; the reply's text, trimmed. Errors: the
// binary could not run (Errc::not_found), the deadline passed (Errc::timeout;
// the client is killed), `abort_fd` turned readable first (Errc::conflict:
// the daemon's pidfd says it exited meanwhile; the client is killed), or it
// exited non-zero (Errc::io, its output quoted).
[[nodiscard]] Result<std::string> command(const ControlOptions& options, const Dirs& dirs, const std::string& line,
                                          int abort_fd = -1);

}  // namespace tessera::mps
