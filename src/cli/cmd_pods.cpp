// tessera pods: which pod and container holds which device, from the
// kubelet's pod-resources API.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cli/numbers.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/text.hpp"
#include "plugin/pod_resources.hpp"

namespace tessera::cli {
namespace {

struct PodsArgs {
  std::string socket = plugin::kDefaultPodResourcesSocket;
  std::string resource_prefix = "nvidia.com/";
  bool json = false;
  double timeout_seconds = 5;
};

// One line of the answer: a container's devices of one resource.
struct Holding {
  std::string pod_namespace;
  std::string pod;
  std::string container;
  std::string resource;
  std::vector<std::string> devices;
};

// Containers without a matching resource are left out; sorted, as the kubelet's order is its maps'.
std::vector<Holding> holdings(const std::vector<plugin::PodDevices>& pods, const std::string& prefix) {
  std::vector<Holding> out;
  for (const auto& p : pods)
    for (const auto& c : p.containers)
      for (const auto& r : c.resources)
        if (r.resource.starts_with(prefix)) out.push_back({p.pod_namespace, p.name, c.name, r.resource, r.ids});
  auto key = [](const Holding& h) { return std::tie(h.pod_namespace, h.pod, h.container, h.resource); };
  std::ranges::sort(out, {}, key);
  return out;
}

int run_pods(const PodsArgs& args) {
  auto timeout = std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(args.timeout_seconds * 1000)));
  auto pods = plugin::list_pod_resources(args.socket, timeout);
  if (!pods) {
    std::cerr << "tessera pods: " << pods.error().message << '\n';
    return kExitInvalid;
  }
  auto rows = holdings(*pods, args.resource_prefix);
  if (args.json) {
    auto j = nlohmann::json::array();
    for (const auto& h : rows)
      j.push_back({{"namespace", h.pod_namespace},
                   {"pod", h.pod},
                   {"container", h.container},
                   {"resource", h.resource},
                   {"devices", h.devices}});
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  Table table({"NAMESPACE", "POD", "CONTAINER", "RESOURCE", "DEVICES"});
  for (const auto& h : rows) table.add({h.pod_namespace, h.pod, h.container, h.resource, join(h.devices, ",")});
  table.print(std::cout);
  return kExitOk;
}

}  // namespace

void add_pods_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PodsArgs>();
  auto* cmd = app.add_subcommand(
      "pods",
      "List which pod and container holds which device, as the kubelet reports it through its pod-resources\n"
      "API (v1 List, Kubernetes 1.20 or later). One row per container and resource; containers holding no\n"
      "matching resource are left out. Device ids are those the device plugin advertised (GPU or MIG UUIDs,\n"
      "or UUID::N for shared replicas). Reading the socket usually needs root.");
  cmd->add_option("--socket", args->socket,
                  "The kubelet's pod-resources socket (<kubelet root-dir>/pod-resources/kubelet.sock)")
      ->capture_default_str();
  cmd->add_option("--resource-prefix", args->resource_prefix,
                  "Show only resources whose name starts with this; an empty value shows every resource")
      ->capture_default_str();
  cmd->add_flag("--json", args->json,
                "Print a JSON array of {namespace, pod, container, resource, devices} instead of a table");
  cmd->add_option("--timeout", args->timeout_seconds, "Seconds to wait for the kubelet's answer")
      ->check(positive_number())
      ->capture_default_str();
  cmd->footer("Exit codes: 0 listed (possibly nothing), 1 the kubelet could not be asked or refused, 2 usage.");
  cmd->callback([args, &exit_code] { exit_code = run_pods(*args); });
}

}  // namespace tessera::cli
