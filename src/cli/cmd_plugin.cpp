// tessera plugin: the kubelet device plugin for this node.
#include <iostream>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/plugin_host.hpp"

namespace tessera::cli {
namespace {

int run_plugin(const PluginArgs& args) {
  auto host = PluginHost::start(args, "tessera plugin");
  if (!host) return kExitInvalid;
  host->run();
  host->stop();
  std::cout << "tessera plugin: stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void add_plugin_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PluginArgs>();
  auto* cmd = app.add_subcommand(
      "plugin",
      "Serve this node's GPUs, MIG devices and shared replicas to the kubelet (device-plugin API v1beta1).\n"
      "Reads NVIDIA's device-plugin config; registers one resource per name; re-registers when the kubelet\n"
      "restarts; marks devices Unhealthy on critical XID/ECC events (and every GPU when NVML's event wait\n"
      "fails), and Healthy again only after a quiet period and once the GPU answers. MIG changes are seen\n"
      "at once through NVML's events. SIGHUP or a change of the config file reloads the config; SIGTERM\n"
      "stops and removes the sockets.");
  add_plugin_options(*cmd, *args);
  cmd->callback([args, &exit_code] { exit_code = run_plugin(*args); });
}

}  // namespace tessera::cli
