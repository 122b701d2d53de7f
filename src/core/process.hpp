// Running another program: started with posix_spawn, its output read through
// a pipe, waited for with a deadline. The MPS control client and daemon
// (mps/control) and one-shot tools such as nvidia-smi (dra/driver) use it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace tessera {

struct SpawnOptions {
  bool with_stdin = false;  // stdin a pipe (Child::in) rather than /dev/null
  bool own_group = false;   // a process group of its own: a signal to ours does not reach it
};

struct Child {
  pid_t pid = -1;
  int in = -1;   // the child's stdin, or -1
  int out = -1;  // the child's stdout and stderr
};

// Starts `binary args...` (a path, or a name looked up on PATH) with `env`;
// stdout and stderr go to one pipe. The child gets default signal
// dispositions and an empty mask (this process may block the signals it reads
// from a signalfd). Errors (Errc::not_found) give the reason only; the caller
// says which program it was.
[[nodiscard]] Result<Child> spawn(const std::string& binary, std::vector<std::string> args,
                                  const std::vector<std::string>& env, SpawnOptions options);

// Waits for `pid` until `deadline`; its exit status (128 + the signal when
// killed), or -1 after killing it (then `timed_out`).
int reap(pid_t pid, std::chrono::steady_clock::time_point deadline, bool& timed_out);

// This process's environment, less the variables named in `drop` (by name),
// plus `add` ("NAME=value").
std::vector<std::string> environment_with(const std::vector<std::string>& drop, const std::vector<std::string>& add);

// "NAME=first:<this process's NAME>", or "NAME=first:otherwise" where this
// process has no NAME (nor `otherwise`: "NAME=first"). For a search path
// (PATH, LD_LIBRARY_PATH) with one directory put first.
std::string path_with_first(const char* name, const std::string& first, const std::string& otherwise = "");

struct Finished {
  int status = 0;      // exit status
  std::string output;  // stdout and stderr together, at most 64 KiB
};

// Runs a program to its end with stdin from /dev/null. Errors: it cannot be
// started (Errc::not_found, naming it), or it did not finish within `timeout`
// (Errc::timeout; it is killed). A non-zero exit status is not an error here.
[[nodiscard]] Result<Finished> run_program(const std::string& binary, const std::vector<std::string>& args,
                                           const std::vector<std::string>& env, std::chrono::milliseconds timeout);

}  // namespace tessera
