// Talking to NVIDIA's MPS control program, `nvidia-cuda-mps-control`, the way
// an operator does (NVIDIA MPS documentation, "Tools and Interface Reference";
// NVIDIA's device plugin does the same, cmd/mps-control-daemon/mps/daemon.go):
//   - `nvidia-cuda-mps-control -d` starts the control daemon in the
//     background and returns once it is up;
//   - without arguments the program is a client: one command on its standard
//     input, the daemon's reply on its standard output, exit status 0 when
//     the daemon took the command.
// Both run with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY naming the
// daemon's directories and, for `-d`, CUDA_VISIBLE_DEVICES naming the one GPU
// or MIG device the daemon serves. Every run has a deadline: a daemon that
// never answers costs one timeout, never a hung supervisor.
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
  std::string binary = "nvidia-cuda-mps-control";  // a path, or a name looked up on PATH
  std::chrono::milliseconds timeout{5000};
};

// `binary -d` for `device` (CUDA_VISIBLE_DEVICES). Errors name the binary,
// the directories and what it printed.
[[nodiscard]] Result<void> start_daemon(const ControlOptions& options, const Dirs& dirs, const std::string& device);

// One command through the client; the reply's text, trimmed. Errors: the
// binary could not run, the deadline passed (the client is killed), or it
// exited non-zero (its output quoted).
[[nodiscard]] Result<std::string> command(const ControlOptions& options, const Dirs& dirs, const std::string& line);

// The pid the control daemon wrote in its pipe directory
// (nvidia-cuda-mps-control.pid), when that process is alive and is an MPS
// control program; -1 otherwise. Used to stop a daemon that no longer answers.
pid_t daemon_pid(const Dirs& dirs);

}  // namespace tessera::mps
