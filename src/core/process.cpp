#include "core/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/text.hpp"

extern char** environ;

namespace tessera {

using Clock = std::chrono::steady_clock;

Result<Child> spawn(const std::string& binary, std::vector<std::string> args, const std::vector<std::string>& env,
                    SpawnOptions options) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1]})
      if (fd >= 0) ::close(fd);
  };
  if ((options.with_stdin && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0) {
    close_all();
    return fail(Errc::io, std::string("cannot make a pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.with_stdin) posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  else posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (options.own_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  args.insert(args.begin(), binary);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  // posix_spawnp searches PATH for a bare name, as a shell would.
  const int rc = ::posix_spawnp(&pid, binary.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    close_all();
    return fail(Errc::not_found, std::strerror(rc));
  }
  Child c{pid, in[1], out[0]};
  if (in[0] >= 0) ::close(in[0]);
  ::close(out[1]);
  return c;
}

int reap(pid_t pid, Clock::time_point deadline, bool& timed_out) {
  timed_out = false;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (r < 0 && errno != EINTR) return -1;
    if (Clock::now() >= deadline) {
      timed_out = true;
      ::kill(pid, SIGKILL);  // the child this process started, not yet reaped: its pid is still its own
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(1000);
  }
}

std::string path_with_first(const char* name, const std::string& first, const std::string& otherwise) {
  const char* old = std::getenv(name);
  const std::string rest = old && *old ? old : otherwise;
  return std::string(name) + "=" + first + (rest.empty() ? "" : ":" + rest);
}

std::vector<std::string> environment_with(const std::vector<std::string>& drop, const std::vector<std::string>& add) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view v(*e);
    bool dropped = false;
    for (const auto& name : drop)
      if (v.size() > name.size() && v.starts_with(name) && v[name.size()] == '=') dropped = true;
    if (!dropped) env.emplace_back(v);
  }
  env.insert(env.end(), add.begin(), add.end());
  return env;
}

Result<Finished> run_program(const std::string& binary, const std::vector<std::string>& args,
                             const std::vector<std::string>& env, std::chrono::milliseconds timeout) {
  auto child = spawn(binary, args, env, {});
  if (!child) return fail(Errc::not_found, "cannot run " + quote(binary) + ": " + child.error().message);
  const auto deadline = Clock::now() + timeout;
  Finished done;
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
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed it: the program is ending
    if (done.output.size() < (64u << 10)) done.output.append(buf, static_cast<size_t>(n));
  }
  ::close(child->out);
  bool late = false;
  done.status = reap(child->pid, timed_out ? Clock::now() : deadline, late);
  if (timed_out || late)
    return fail(Errc::timeout, quote(binary) + " did not finish within " + std::to_string(timeout.count()) + " ms");
  return done;
}

}  // namespace tessera
