// tessera mps-host: the owner of a node's MPS control daemons, in a process
// (and, deployed, a DaemonSet) of its own, so that they outlive the plugin
// (docs/design-mps.md, "Daemons that outlive the agent").
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/numbers.hpp"
#include "cli/commands.hpp"
#include "cli/nvml_driver.hpp"
#include "cli/output.hpp"
#include "mps/host.hpp"

namespace tessera::cli {
namespace {

struct MpsHostArgs {
  std::string socket = mps::kDefaultHostSocket;
  std::string mps_control = "nvidia-cuda-mps-control";
  double timeout_seconds = 5;
  double check_seconds = 2;
};

// As PID 1 of a container nothing else reaps the orphans this process's
// daemons leave (an MPS server whose control daemon died is re-parented to
// PID 1), so PID 1 becomes a small init: it forwards SIGTERM, SIGINT and
// SIGHUP to the real mps-host, its child, reaps every orphan, and exits with
// the child's status. Returns only in the child (or when not PID 1).
void become_init_if_pid_1() {
  if (::getpid() != 1) return;
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "tessera mps-host: fork: " << std::strerror(errno) << " (running as PID 1 without an init)\n";
    sigprocmask(SIG_UNBLOCK, &mask, nullptr);
    return;
  }
  if (child == 0) {
    sigprocmask(SIG_UNBLOCK, &mask, nullptr);
    return;
  }
  const int fd = signalfd(-1, &mask, SFD_CLOEXEC);
  for (;;) {
    signalfd_siginfo info{};
    if (read(fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    if (info.ssi_signo != SIGCHLD) {
      ::kill(child, static_cast<int>(info.ssi_signo));  // its own child, not yet reaped
      continue;
    }
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;)
      if (pid == child) ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
}

int run_mps_host(const MpsHostArgs& args) {
  become_init_if_pid_1();
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);  // before any thread starts
  const int signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
  mps::HostOptions options;
  options.socket = args.socket;
  options.supervisor.control.binary = args.mps_control;
  if (const char* nvml = std::getenv("TESSERA_NVML_LIBRARY"); nvml && *nvml)
    options.supervisor.control.library_dir = driver_library_dir(nvml);
  options.supervisor.control.timeout = millis(args.timeout_seconds);
  options.supervisor.check_interval = millis(args.check_seconds);
  auto host = mps::HostServer::start(options);
  if (!host) {
    std::cerr << "tessera mps-host: " << host.error().message << '\n';
    return kExitInvalid;
  }
  spdlog::info("mps-host: serving {} (pid {}); control program {}", args.socket, ::getpid(), args.mps_control);
  std::cout << "tessera mps-host: ready: " << args.socket << std::endl;
  for (;;) {
    signalfd_siginfo info{};
    if (read(signal_fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    if (info.ssi_signo == SIGHUP) {
      spdlog::info("mps-host: SIGHUP: nothing to reload (the plugin says what it wants)");
      continue;
    }
    spdlog::info("mps-host: signal {}: stopping the daemons", info.ssi_signo);
    break;
  }
  (*host)->stop();
  close(signal_fd);
  std::cout << "tessera mps-host: stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void add_mps_host_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MpsHostArgs>();
  auto* cmd = app.add_subcommand(
      "mps-host",
      "Own this node's MPS control daemons so that they outlive `tessera plugin` and `tessera node`: run it\n"
      "beside them (deployed: a DaemonSet of its own that a tessera upgrade does not touch) and start the\n"
      "plugin with --mps-host SOCKET. The plugin says which daemons it wants (device, pipe and log\n"
      "directories, limits); this process starts each as its child (`nvidia-cuda-mps-control -f`), sees\n"
      "it exit at once through a pidfd and tells the plugin, checks on a thread per daemon that it\n"
      "answers, restarts it with backoff, applies new limits without quitting it, and keeps every daemon\n"
      "when the plugin goes: a plugin that starts again adopts them. The only processes it signals are its\n"
      "own children, never a pid read from a file. SIGTERM quits the daemons and stops.");
  cmd->add_option("--socket", args->socket,
                  "The unix socket the plugin connects to (its directory is made mode 0700). Put it where no\n"
                  "tenant can reach it: not under mpsRoot, whose pipe directories are mounted into clients")
      ->capture_default_str();
  cmd->add_option("--mps-control", args->mps_control,
                  "NVIDIA's MPS control program (a path, or a name on PATH). A path's directory goes first on\n"
                  "the daemons' PATH, where they find nvidia-cuda-mps-server; with TESSERA_NVML_LIBRARY set (a\n"
                  "driver root mounted into the container), its directory goes first on their LD_LIBRARY_PATH")
      ->capture_default_str();
  cmd->add_option("--mps-timeout", args->timeout_seconds,
                  "Seconds an MPS control command may take before its daemon counts as not answering")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--check-interval", args->check_seconds,
                  "Seconds between the checks that each daemon still answers (a daemon's exit needs no check:\n"
                  "it is seen at once)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->callback([args, &exit_code] { exit_code = run_mps_host(*args); });
}

}  // namespace tessera::cli
