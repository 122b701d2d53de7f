// tessera-kubelet-sim: the kubelet peer as a program, for the demo and for
// trying a plugin by hand. Serves Registration in DIR, waits for plugins,
// prints what they advertise, and allocates like the kubelet would.
#include <CLI/CLI.hpp>

#include <iostream>
#include <thread>

#include "kubelet/fake_kubelet.hpp"

int main(int argc, char** argv) {
  CLI::App app{"A kubelet peer: serves the device-plugin Registration service in DIR, prints each plugin's\n"
               "devices, and calls Allocate for the first devices of each resource.",
               "tessera-kubelet-sim"};
  std::string dir;
  size_t resources = 1;
  int allocate = 1;
  double timeout = 10;
  app.add_option("--dir", dir, "Device-plugin directory (kubelet.sock is created here)")->required();
  app.add_option("--resources", resources, "Wait for this many registrations")->capture_default_str();
  app.add_option("--allocate", allocate, "Devices to allocate per resource, one per container")->capture_default_str();
  app.add_option("--timeout", timeout, "Seconds to wait for plugins")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  tessera::sim::FakeKubelet kubelet(dir);
  if (auto s = kubelet.start(); !s) {
    std::cerr << "tessera-kubelet-sim: " << s.error().message << '\n';
    return 1;
  }
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  if (!kubelet.wait_for_registrations(resources, wait)) {
    std::cerr << "tessera-kubelet-sim: " << kubelet.registration_count() << " of " << resources
              << " plugins registered within " << timeout << " s\n";
    return 1;
  }
  for (const auto& r : kubelet.registrations()) {
    kubelet.wait_for(r.resource, [](const auto& d) { return !d.empty(); }, wait);
    auto devices = kubelet.devices(r.resource);
    std::cout << "registered " << r.resource << " (" << r.endpoint << "): " << devices.size() << " devices, "
              << kubelet.healthy_count(r.resource) << " healthy\n";
    for (int i = 0; i < allocate && i < static_cast<int>(devices.size()); ++i) {
      auto a = kubelet.allocate(r.resource, {devices[static_cast<size_t>(i)].id});
      if (!a) {
        std::cout << "  Allocate " << devices[static_cast<size_t>(i)].id << ": error: " << a.error().message << '\n';
        continue;
      }
      std::cout << "  Allocate " << devices[static_cast<size_t>(i)].id << ":\n";
      for (const auto& [k, v] : a->envs) std::cout << "    " << k << "=" << v << '\n';
      for (const auto& [host, container] : a->mounts) std::cout << "    mount " << host << " -> " << container << '\n';
    }
  }
  kubelet.stop();
  return 0;
}
