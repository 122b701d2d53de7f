#include "mps/control.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "core/text.hpp"

extern char** environ;

namespace tessera::mps {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> environment(const Dirs& dirs, const std::string& device) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view v(*e);
    if (v.starts_with("CUDA_MPS_PIPE_DIRECTORY=") || v.starts_with("CUDA_MPS_LOG_DIRECTORY=") ||
        v.starts_with("CUDA_VISIBLE_DEVICES="))
      continue;
    env.emplace_back(v);
  }
  env.push_back("CUDA_MPS_PIPE_DIRECTORY=" + dirs.pipe);
  env.push_back("CUDA_MPS_LOG_DIRECTORY=" + dirs.log);
  if (!device.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + device);
  return env;
}

struct Spawned {
  pid_t pid = -1;
  int in = -1;   // the child's stdin, or -1
  int out = -1;  // the child's stdout and stderr, or -1
};

// Starts `argv` with `env`; stdin and stdout+stderr are pipes, or files when
// `output_file` is set (then stdin is /dev/null).
Result<Spawned> spawn(const ControlOptions& options, std::vector<std::string> args, const std::vector<std::string>& env,
                      const std::string& output_file = {}) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1]})
      if (fd >= 0) ::close(fd);
  };
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (output_file.empty()) {
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      close_all();
      posix_spawn_file_actions_destroy(&actions);
      return fail(Errc::io, std::string("cannot make a pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  args.insert(args.begin(), options.binary);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  // posix_spawnp searches PATH for a bare name, as a shell would.
  const int rc = ::posix_spawnp(&pid, options.binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    close_all();
    return fail(Errc::not_found, "cannot run the MPS control program " + quote(options.binary) + ": " +
                                     std::strerror(rc));
  }
  Spawned s{pid, in[1], out[0]};
  if (in[0] >= 0) ::close(in[0]);
  if (out[1] >= 0) ::close(out[1]);
  return s;
}

// Waits for `pid` until `deadline`; its exit status, or -1 after killing it.
int reap(pid_t pid, Clock::time_point deadline, bool& timed_out) {
  timed_out = false;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (r < 0 && errno != EINTR) return -1;
    if (Clock::now() >= deadline) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(2000);
  }
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t start = 0;
  while (start < s.size() && (s[start] == '\n' || s[start] == ' ')) ++start;
  return s.substr(start);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

}  // namespace

Result<void> start_daemon(const ControlOptions& options, const Dirs& dirs, const std::string& device) {
  // -d leaves a daemon behind that inherits the output descriptors: a pipe
  // would never reach end-of-file, so its output goes to a file.
  const std::string output = dirs.log + "/tessera-control-start.txt";
  auto child = spawn(options, {"-d"}, environment(dirs, device), output);
  if (!child) return unexpected(child.error());
  bool timed_out = false;
  const int status = reap(child->pid, Clock::now() + options.timeout, timed_out);
  if (timed_out)
    return fail(Errc::timeout, quote(options.binary) + " -d for " + device + " did not return within " +
                                   std::to_string(options.timeout.count()) + " ms (pipe directory " + dirs.pipe + ")");
  if (status != 0)
    return fail(Errc::io, quote(options.binary) + " -d for " + device + " exited with status " +
                              std::to_string(status) + " (pipe directory " + dirs.pipe + "): " +
                              excerpt(trimmed(read_file(output)), 200));
  return {};
}

Result<std::string> command(const ControlOptions& options, const Dirs& dirs, const std::string& line) {
  auto child = spawn(options, {}, environment(dirs, {}));
  if (!child) return unexpected(child.error());
  const auto deadline = Clock::now() + options.timeout;
  // One command, then end of input: the client sends it and prints the reply.
  const std::string text = line + "\n";
  ::signal(SIGPIPE, SIG_IGN);
  [[maybe_unused]] const ssize_t wrote = ::write(child->in, text.data(), text.size());
  ::close(child->in);
  std::string reply;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{child->out, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(child->out, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > (1u << 20)) break;  // a runaway client: enough to quote
  }
  ::close(child->out);
  bool late = false;
  const int status = reap(child->pid, timed_out ? Clock::now() : deadline, late);
  if (timed_out || late)
    return fail(Errc::timeout, "MPS control daemon in " + dirs.pipe + " did not answer " + quote(line) + " within " +
                                   std::to_string(options.timeout.count()) + " ms");
  if (status != 0)
    return fail(Errc::io, "MPS control daemon in " + dirs.pipe + " refused " + quote(line) + " (exit status " +
                              std::to_string(status) + "): " + excerpt(trimmed(reply), 200));
  return trimmed(reply);
}

pid_t daemon_pid(const Dirs& dirs) {
  std::ifstream in(dirs.pipe + "/nvidia-cuda-mps-control.pid");
  long pid = -1;
  if (!(in >> pid) || pid <= 1) return -1;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return -1;
  // The kernel keeps 15 characters of the command name: "nvidia-cuda-mps".
  std::string comm = read_file("/proc/" + std::to_string(pid) + "/comm");
  if (!comm.starts_with("nvidia-cuda-mps")) return -1;
  // An exited daemon its parent has not reaped yet (state Z) is gone.
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z' || stat[close + 2] == 'X')
    return -1;
  return static_cast<pid_t>(pid);
}

}  // namespace tessera::mps
