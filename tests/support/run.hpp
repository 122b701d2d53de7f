// Runs a program the way a user would and captures what it says.
#pragma once

#include <string>
#include <vector>

namespace tessera::testing {

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string out;
  std::string err;
};

// The environment entry for a program of the build that is never
// sanitizer-instrumented (the quota library's client, tessera-memory-hook)
// but loads a library that is in the asan preset (the simulated NVML and
// driver): the sanitizer's runtime then loads late, and is told not to insist
// on coming first (google/sanitizers #786) nor to report leaks it could not
// have tracked. Without sanitizers it means nothing.
inline constexpr const char* kLateSanitizerEnv = "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0";

// How much slower the build under test runs than the product as shipped: the sanitizer build's
// instrumentation (every load and store checked) makes a latency that a test bounds several
// times longer, while the bound itself is the dev and release builds' claim.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int kSlowdown = 3;
#else
inline constexpr int kSlowdown = 1;
#endif

// Runs `argv` (argv[0] is a path) with optional standard input and extra
// environment entries ("NAME=value").
RunResult run(const std::vector<std::string>& argv, const std::string& input = "",
              const std::vector<std::string>& env = {});

// A program running in the background; its output goes to a file. Killed
// (SIGKILL) on destruction if still running.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log_path,
          const std::vector<std::string>& env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  int pid() const { return pid_; }
  void signal(int sig) const;
  // Waits for exit; returns the exit code (-1 when killed by a signal or timed out).
  int wait(int timeout_ms);
  // What it printed so far.
  std::string output() const;
  // Waits until its output contains `text`.
  bool wait_for_output(const std::string& text, int timeout_ms) const;

 private:
  int pid_ = -1;
  bool exited_ = false;
  std::string log_path_;
};

// The text of /proc/<pid>/stat, "" when the process is gone (also when it
// goes while being read: never throws, unlike an ifstream there).
std::string proc_stat(int pid);
// Its parent's pid, -1 when it is gone.
int parent_of(int pid);
// Whether process `pid` runs: it exists and is not a zombie (one that exited
// but that its parent has not reaped, as a daemonised child can stay).
bool process_running(int pid);
// Waits up to 3 s for `pid` to stop running; true once it has.
bool process_stops(int pid);

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace tessera::testing
