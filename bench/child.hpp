// A child process for the benchmarks that run tessera as a user would:
// spawned with its output in a log file (truncated), waited on for a line of
// it, stopped with SIGTERM (SIGKILL after 10 s); run() waits for its exit.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tessera::bench {

struct Child {
  pid_t pid = -1;
  std::string log;
  Child(const std::vector<std::string>& argv, std::string log_path) : log(std::move(log_path)) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  std::string output() const {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  bool wait_for(const std::string& text, int ms) const {
    for (int i = 0; i < ms / 20; ++i) {
      if (output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  void stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500 && waitpid(pid, &status, WNOHANG) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (waitpid(pid, &status, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    pid = -1;
  }
  ~Child() { stop(); }
};

inline int run(const std::vector<std::string>& argv) {
  Child c(argv, "/dev/null");
  int status = 0;
  waitpid(c.pid, &status, 0);
  c.pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace tessera::bench
