#include "cli/nvml_driver.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "plugin/cdi_writer.hpp"

namespace tessera::cli {

namespace fs = std::filesystem;

void add_driver_options(CLI::App& command, DriverOptions& options) {
  command.add_option("--sim", options.sim, "Use the simulated node in this directory instead of the GPUs' driver")
      ->envname("TESSERA_SIM");
  command.add_option("--nvml-library", options.nvml_library, "Load this NVML library instead of libnvidia-ml.so.1")
      ->envname("TESSERA_NVML_LIBRARY");
}

std::string simulator_library_path() {
  if (const char* env = std::getenv("TESSERA_SIM_LIBRARY"); env && *env) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "libnvidia-ml.so.1";
  return (exe.parent_path() / ".." / "sim" / "nvml" / "libnvidia-ml.so.1").lexically_normal().string();
}

std::string host_path_of(const std::string& path, const std::string& host_root, const std::string& container_root) {
  const fs::path root = fs::path(container_root).lexically_normal();
  if (container_root.empty() || root == "/") return path;
  const fs::path rest = fs::path(path).lexically_normal().lexically_relative(root);
  if (rest.empty() || rest.native().starts_with("..")) return path;
  return (fs::path(host_root.empty() ? "/" : host_root) / rest).lexically_normal().string();
}

sharing::MemoryHook memory_hook_settings(const std::string& path, const DriverOptions& options,
                                         const std::string& host_driver_root, const std::string& container_driver_root) {
  sharing::MemoryHook hook;
  if (path.empty()) return hook;
  hook.path = path;
  // The hook runs on the host (the runtime's namespaces), so it names NVML by
  // its host path: a library under the mounted driver root is the host's
  // driver root's.
  std::string nvml = options.nvml_library;
  if (nvml.empty() && !options.sim.empty()) nvml = simulator_library_path();
  if (!nvml.empty()) {
    hook.args = {"--nvml", host_path_of(nvml, host_driver_root, container_driver_root)};
  } else if (!host_driver_root.empty() && fs::path(host_driver_root).lexically_normal() != "/") {
    // NVML from the NVIDIA runtime in this container, the driver elsewhere
    // on the host (the GPU Operator's driver container): the host's linker
    // path has no NVML, so the hook names the driver root's.
    plugin::CdiOptions root;
    root.driver_root = host_driver_root;
    root.container_driver_root = container_driver_root;
    if (auto found = plugin::driver_library(root, "libnvidia-ml.so.1"); !found.empty()) hook.args = {"--nvml", found};
  }
  if (!options.sim.empty()) hook.env = {"TESSERA_SIM=" + fs::absolute(options.sim).lexically_normal().string()};
  return hook;
}

std::string driver_library_dir(const std::string& nvml_library) {
  const auto slash = nvml_library.rfind('/');
  return slash == std::string::npos ? std::string() : nvml_library.substr(0, std::max<size_t>(slash, 1));
}

void add_cdi_hook_option(CLI::App& command, std::string& path) {
  command
      .add_option("--cdi-hook", path,
                  "Host path of tessera-cdi-hook (the DaemonSet's init container puts it beside the quota\n"
                  "library): every CDI spec then has the runtime refresh the container's linker cache for the\n"
                  "driver's libraries and make libcuda.so (createContainer hooks), as NVIDIA's specs do.\n"
                  "Default: off")
      ->check([](const std::string& p) { return !p.empty() && p[0] == '/' ? std::string() : "--cdi-hook: not an absolute path: " + p; });
}

void add_memory_hook_option(CLI::App& command, std::string& path) {
  command.add_option("--memory-hook", path,
                     "Host path of tessera-memory-hook (the DaemonSet's init container puts it beside the quota\n"
                     "library): with CDI devices, each container with a memory quota gets a createRuntime hook\n"
                     "(and a poststop hook clearing it) that has the driver cap its cgroup at the quota on whole\n"
                     "GPUs where the driver offers memory limits (R615+, cgroup v2); the quota library holds the\n"
                     "rest. Default: off");
}

Result<nvml::Session> open_nvml(const DriverOptions& options) {
  std::string path = std::string(nvml::kDefaultLibrary);
  if (!options.sim.empty()) {
    if (!fs::exists(fs::path(options.sim) / "node.lock"))
      return fail(Errc::not_found, options.sim + " is not a simulated node (make one with `tessera sim create " +
                                       options.sim + " --gpu MODEL --count N`)");
    path = simulator_library_path();
    if (!fs::exists(path))
      return fail(Errc::not_found, "the simulator library " + path + " is missing (set TESSERA_SIM_LIBRARY)");
    // The simulator reads its node's directory (TESSERA_SIM, as --sim's own
    // variable) when NVML is initialised.
    setenv("TESSERA_SIM", options.sim.c_str(), 1);
  } else if (!options.nvml_library.empty()) {
    path = options.nvml_library;
  }
  auto library = nvml::Library::open(path);
  if (!library) {
    if (library.error().code == Errc::not_found && options.sim.empty())
      return fail(Errc::not_found, "no NVIDIA driver found (" + library.error().message +
                                       "); to use a simulated node instead, pass --sim DIR or set TESSERA_SIM=DIR "
                                       "(make one with `tessera sim create DIR --gpu A100-80GB --count 2`)");
    return unexpected<Error>(library.error());
  }
  auto session = nvml::Session::open(std::move(*library));
  if (!session) {
    // The library is installed but the kernel driver is not loaded.
    if (session.error().code == nvml::abi::NVML_ERROR_DRIVER_NOT_LOADED && options.sim.empty())
      return fail(Errc::driver, "no NVIDIA driver loaded (" + session.error().message() +
                                    "); to use a simulated node instead, pass --sim DIR or set TESSERA_SIM=DIR");
    return unexpected<Error>(session.error().to_error());
  }
  return std::move(*session);
}

Result<nlohmann::json> sim_control(const nlohmann::json& request) {
  std::string path = simulator_library_path();
  // RTLD_LOCAL, and closed after use: the control call needs no NVML session.
  std::unique_ptr<void, int (*)(void*)> handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL), dlclose);
  if (!handle) {
    const char* why = dlerror();
    return fail(Errc::not_found,
                "cannot load the simulator library " + path + ": " + (why ? why : "?") + " (set TESSERA_SIM_LIBRARY)");
  }
  using Control = int (*)(const char*, char**);
  using Free = void (*)(char*);
  auto control = reinterpret_cast<Control>(dlsym(handle.get(), "tesseraSimControl"));
  auto release = reinterpret_cast<Free>(dlsym(handle.get(), "tesseraSimFree"));
  if (!control || !release) return fail(Errc::unsupported, path + " is not tessera's NVML simulator");
  char* reply = nullptr;
  int rc = control(request.dump().c_str(), &reply);
  std::string text = reply ? reply : "{}";
  release(reply);
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded()) return fail(Errc::internal, "the simulator replied with bad JSON");
  if (rc != 0) return fail(Errc::validation, json.value("error", std::string("the simulator refused")));
  return json;
}

}  // namespace tessera::cli
