#include "support/run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace tessera::testing {
namespace {

// argv and the environment (ours plus `extra`) as posix_spawn wants them.
struct SpawnArgs {
  std::vector<std::string> env_strings;
  std::vector<char*> argv, envp;
  SpawnArgs(const std::vector<std::string>& args, const std::vector<std::string>& extra) {
    // Entries in `extra` replace ours of the same name.
    auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      bool replaced = std::any_of(extra.begin(), extra.end(), [&](const std::string& x) { return name_of(x) == name_of(entry); });
      if (!replaced) env_strings.push_back(entry);
    }
    env_strings.insert(env_strings.end(), extra.begin(), extra.end());
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
};

}  // namespace

RunResult run(const std::vector<std::string>& argv, const std::string& input, const std::vector<std::string>& env) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC))
    throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  SpawnArgs args(argv, env);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.argv.data(), args.envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw std::runtime_error("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  // Feed stdin while draining stdout and stderr, so no pipe fills up.
  RunResult result;
  size_t written = 0;
  int in_fd = in_pipe[1];
  if (input.empty()) { close(in_fd); in_fd = -1; }
  bool out_open = true, err_open = true;
  while (out_open || err_open || in_fd >= 0) {
    pollfd fds[3];
    int n = 0;
    if (out_open) fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_open) fds[n++] = {err_pipe[0], POLLIN, 0};
    if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
    if (poll(fds, static_cast<nfds_t>(n), -1) < 0) break;
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == in_fd) {
        ssize_t w = write(in_fd, input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 || written == input.size()) { close(in_fd); in_fd = -1; }
        continue;
      }
      char buf[65536];
      ssize_t r = read(fds[i].fd, buf, sizeof buf);
      bool is_out = fds[i].fd == out_pipe[0];
      if (r <= 0) (is_out ? out_open : err_open) = false;
      else (is_out ? result.out : result.err).append(buf, static_cast<size_t>(r));
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

Process::Process(const std::vector<std::string>& argv, const std::string& log_path, const std::vector<std::string>& env)
    : log_path_(log_path) {
  int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + log_path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  SpawnArgs args(argv, env);
  int rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.argv.data(), args.envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  if (rc != 0) throw std::runtime_error("cannot run " + argv[0] + ": " + std::strerror(rc));
}

Process::~Process() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void Process::signal(int sig) const {
  if (!exited_) kill(pid_, sig);
}

int Process::wait(int timeout_ms) {
  for (int waited = 0;; waited += 10) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (waited >= timeout_ms) return -1;
    usleep(10000);
  }
}

std::string Process::output() const {
  std::ifstream in(log_path_);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool Process::wait_for_output(const std::string& text, int timeout_ms) const {
  for (int waited = 0; waited <= timeout_ms; waited += 20) {
    if (output().find(text) != std::string::npos) return true;
    usleep(20000);
  }
  return false;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string p = path_ + "/" + name;
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

std::string proc_stat(int pid) {
  if (pid <= 0) return "";
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[1024];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return text;  // a read that fails (ESRCH: the process went) ends the text
}

int parent_of(int pid) {
  const std::string stat = proc_stat(pid);
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string state;
  int ppid = -1;
  fields >> state >> ppid;
  return ppid;
}

bool process_running(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  const std::string stat = proc_stat(pid);
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

bool process_stops(int pid) {
  for (int i = 0; i < 300 && process_running(pid); ++i) ::usleep(10000);
  return !process_running(pid);
}

}  // namespace tessera::testing
