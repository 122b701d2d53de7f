// tessera sim ...: simulated GPU nodes. `create` makes one; the others drive
// it as hardware and workloads would (processes, activity, Xid and ECC
// events, resets, planned NVML faults). Any command given `--sim DIR` then
// talks to that node through the simulator's libnvidia-ml.so.1.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "cli/numbers.hpp"
#include "cli/commands.hpp"
#include "cli/nvml_driver.hpp"
#include "cli/output.hpp"
#include "core/text.hpp"
#include "core/units.hpp"
#include "nvml/error.hpp"

namespace tessera::cli {
namespace {

struct SimArgs {
  std::string dir;
  // create
  std::string gpu_model;
  uint32_t count = 1;
  std::string nvlink = "none";
  bool mig = false;
  uint64_t seed = 1;
  std::string driver_version;
  bool device_nodes = false;
  std::string module;  // modprobe
  // the others
  uint32_t gpu = 0;
  std::string mig_device;
  uint32_t pid = 0;
  std::string memory = "0";
  uint64_t xid = 0;
  std::string ecc;
  bool lost = false;
  bool unprivileged = false;
  std::string function;
  std::string error = "NVML_ERROR_UNKNOWN";
  uint32_t nth = 1;
  uint32_t times = 1;
  bool crash = false;
  int64_t gpu_instance = -1;
  double gpu_util = -1, memory_util = -1, sm_util = -1, sm_occupancy = -1, dram_bw = -1;
  double graphics_util = -1, tensor_util = -1;
  int64_t temperature = -1, power_mw = -1, sm_clock = -1, mem_clock = -1;
};

int report(const char* what, const Result<nlohmann::json>& r) {
  if (!r) {
    std::cerr << "tessera sim " << what << ": " << r.error().message << '\n';
    return kExitInvalid;
  }
  return kExitOk;
}

// What the driver puts outside NVML, laid out under the node's directory as
// under / on a real node, so that tessera finds a simulated node's device
// nodes and MIG capabilities where it finds a real one's, and no more than
// a driver install leaves there:
//   proc/driver/nvidia/capabilities/gpu<minor>/mig/{config,monitor} and
//   .../mig/gi<g>/access, .../mig/gi<g>/ci<c>/access, each "DeviceFileMinor: N";
//   proc/driver/nvidia-caps/mig-minors, the whole table;
//   proc/driver/nvidia/params, the driver module's parameters;
//   proc/devices, the kernel's list of character-device majors: the driver's
//   nvidia-frontend and nvidia-caps; nvidia-uvm only once `tessera sim
//   modprobe DIR nvidia-uvm` has loaded the simulated nvidia_uvm;
//   with device_nodes, dev/nvidia<minor> and dev/nvidiactl as character
//   devices: what the driver (through nvidia-modprobe or its udev rules)
//   creates. Never nvidia-uvm, nvidia-uvm-tools or the MIG capabilities'
//   dev/nvidia-caps/nvidia-cap<N>, which only nvidia-modprobe makes, on
//   request: whoever needs them in a container must name their numbers.
// Minors follow the driver's table: config 1, monitor 2, then per GPU 15 GPU
// instances of one access node and 8 compute instances each (NVIDIA MIG User
// Guide, "Device Nodes and Capabilities"). Majors: 195 for nvidia<minor> and
// nvidiactl (255), as the driver registers them; the others are dynamic on a
// real node, and the simulator takes 510 (nvidia-uvm) and 511 (nvidia-caps).
constexpr unsigned kGpuInstances = 15, kComputeInstances = 8;
constexpr unsigned kNvidiaMajor = 195, kUvmMajor = 510, kCapsMajor = 511;

unsigned gi_minor(unsigned gpu, unsigned gi) { return 3 + gpu * kGpuInstances * (1 + kComputeInstances) + gi * (1 + kComputeInstances); }

// The kernel's /proc/devices on a node with the driver loaded, and
// nvidia_uvm too when `uvm` (a few of the usual devices around them; Linux
// fs/proc/devices.c prints "%3d %s").
std::string proc_devices(bool uvm) {
  std::string text = "Character devices:\n  1 mem\n  4 /dev/vc/0\n  5 /dev/tty\n 10 misc\n" +
                     std::to_string(kNvidiaMajor) + " nvidia-frontend\n";
  if (uvm) text += std::to_string(kUvmMajor) + " nvidia-uvm\n";
  text += std::to_string(kCapsMajor) + " nvidia-caps\n\nBlock devices:\n  7 loop\n  8 sd\n";
  return text;
}

bool write_text(const std::filesystem::path& p, const std::string& text, std::string& why) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::trunc);
  out << text;
  if (!out) why = p.string() + ": " + std::strerror(errno);
  return static_cast<bool>(out);
}

bool make_char_device(const std::filesystem::path& p, unsigned major, unsigned minor, std::string& why) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  ::unlink(p.c_str());
  if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(major, minor)) == 0) return true;
  why = "mknod " + p.string() + ": " + std::strerror(errno) + (errno == EPERM ? " (--device-nodes needs root)" : "");
  return false;
}

// A new boot id, as the kernel makes one per boot (a random UUID; its
// generator is /proc/sys/kernel/random/uuid).
std::string new_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/uuid");
  std::string id;
  if (in && std::getline(in, id) && id.size() == 36) return id;
  std::random_device rd;
  char text[37];
  std::snprintf(text, sizeof text, "%08x-%04x-4%03x-%04x-%04x%08x", rd(), rd() & 0xffff, rd() & 0xfff,
                (rd() & 0x3fff) | 0x8000, rd() & 0xffff, rd());
  return text;
}

// The node's proc/sys/kernel/random/boot_id: the kernel's id of this boot.
bool write_boot_id(const std::filesystem::path& root, std::string& why) {
  return write_text(root / "proc/sys/kernel/random/boot_id", new_boot_id() + "\n", why);
}

bool write_driver_files(const std::string& dir, const nlohmann::json& gpus, bool device_nodes, std::string& why) {
  const std::filesystem::path root(dir);
  const auto caps = root / "proc/driver/nvidia/capabilities";
  std::string table = "config 1\nmonitor 2\n";
  for (unsigned g = 0; g < 32; ++g)
    for (unsigned gi = 0; gi < kGpuInstances; ++gi) {
      table += "gpu" + std::to_string(g) + "/gi" + std::to_string(gi) + "/access " + std::to_string(gi_minor(g, gi)) + "\n";
      for (unsigned ci = 0; ci < kComputeInstances; ++ci)
        table += "gpu" + std::to_string(g) + "/gi" + std::to_string(gi) + "/ci" + std::to_string(ci) + "/access " +
                 std::to_string(gi_minor(g, gi) + 1 + ci) + "\n";
    }
  if (!write_text(root / "proc/driver/nvidia-caps/mig-minors", table, why)) return false;
  if (!write_text(root / "proc/devices", proc_devices(false), why)) return false;
  // The driver's module parameters as the kernel shows them (a few of them;
  // ModifyDeviceFiles 1 by default: the driver's libraries may create
  // device nodes, which NVIDIA's runtime turns off in containers).
  if (!write_text(root / "proc/driver/nvidia/params",
                  "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n"
                  "DeviceFileGID: 0\nDeviceFileMode: 438\nEnableMSI: 1\n",
                  why))
    return false;
  if (!write_boot_id(root, why)) return false;
  auto access = [](unsigned minor) {
    return "DeviceFileMinor: " + std::to_string(minor) + "\nDeviceFileMode: 292\nDeviceFileModify: 1\n";
  };
  std::vector<std::pair<std::string, std::pair<unsigned, unsigned>>> nodes = {{"nvidiactl", {kNvidiaMajor, 255}}};
  for (const auto& gpu : gpus) {
    const unsigned minor = gpu.value("minor", 0u);
    const auto mig = caps / ("gpu" + std::to_string(minor)) / "mig";
    if (!write_text(mig / "config", access(1), why) || !write_text(mig / "monitor", access(2), why)) return false;
    nodes.push_back({"nvidia" + std::to_string(minor), {kNvidiaMajor, minor}});
    for (unsigned gi = 0; gi < kGpuInstances; ++gi) {
      const auto gdir = mig / ("gi" + std::to_string(gi));
      if (!write_text(gdir / "access", access(gi_minor(minor, gi)), why)) return false;
      for (unsigned ci = 0; ci < kComputeInstances; ++ci) {
        const unsigned m = gi_minor(minor, gi) + 1 + ci;
        if (!write_text(gdir / ("ci" + std::to_string(ci)) / "access", access(m), why)) return false;
      }
    }
  }
  if (!device_nodes) return true;
  for (const auto& [name, number] : nodes)
    if (!make_char_device(root / "dev" / name, number.first, number.second, why)) return false;
  return true;
}

int run_create(const SimArgs& a) {
  // Checked here so that every command gives an unknown --gpu the same message and exit code.
  if (!find_gpu_model("tessera sim create", a.gpu_model, std::cerr)) return kExitUsage;
  nlohmann::json req = {{"op", "create"},   {"dir", a.dir}, {"gpu", a.gpu_model},
                        {"count", a.count}, {"mig", a.mig}, {"nvlink_all", a.nvlink == "all"},
                        {"seed", a.seed},   {"privileged", !a.unprivileged}};
  if (!a.driver_version.empty()) req["driver_version"] = a.driver_version;
  auto r = sim_control(req);
  if (int rc = report("create", r); rc != kExitOk) return rc;
  const auto& gpus = (*r)["gpus"];
  if (std::string why; !write_driver_files(a.dir, gpus, a.device_nodes, why)) {
    std::cerr << "tessera sim create: " << why << '\n';
    return kExitInvalid;
  }
  std::cout << "created " << a.dir << ": " << gpus.size() << " x " << gpus[0]["model"].get<std::string>()
            << (a.nvlink == "all" ? ", NVLink between all" : "") << (a.mig ? ", MIG on" : "")
            << (a.unprivileged ? ", unprivileged" : "") << '\n';
  return kExitOk;
}

// `tessera sim modprobe DIR nvidia-uvm`: the simulated nvidia_uvm loaded, as
// `modprobe nvidia-uvm` (or nvidia-modprobe -u) loads the real one: its
// major appears in proc/devices; no device node is made.
int run_modprobe(const SimArgs& a) {
  const std::filesystem::path devices = std::filesystem::path(a.dir) / "proc/devices";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(devices, ec)) {
    std::cerr << "tessera sim modprobe: " << devices.string()
              << " does not exist: is " << quote(a.dir) << " a node made by `tessera sim create`?\n";
    return kExitInvalid;
  }
  if (std::string why; !write_text(devices, proc_devices(true), why)) {
    std::cerr << "tessera sim modprobe: " << why << '\n';
    return kExitInvalid;
  }
  std::cout << "loaded nvidia-uvm on " << a.dir << " (major " << kUvmMajor << ")\n";
  return kExitOk;
}

// `tessera sim reboot DIR`: the node as it comes back from a reboot (the
// simulator's reboot_node: no processes, MIG instances, limits or MIG mode),
// a new boot id, nvidia_uvm not loaded. Files outside the node's directory
// (CDI specs, checkpoints) are the caller's to clear, as a tmpfs would be.
int run_reboot(const SimArgs& a) {
  if (int rc = report("reboot", sim_control({{"op", "reboot"}, {"dir", a.dir}})); rc != kExitOk) return rc;
  const std::filesystem::path root(a.dir);
  if (std::string why; !write_text(root / "proc/devices", proc_devices(false), why) || !write_boot_id(root, why)) {
    std::cerr << "tessera sim reboot: " << why << '\n';
    return kExitInvalid;
  }
  std::cout << "rebooted " << a.dir << ": no MIG instances, MIG mode off, nvidia-uvm not loaded\n";
  return kExitOk;
}

int run_process(const SimArgs& a, bool end) {
  nlohmann::json req = {{"op", end ? "end-process" : "process"}, {"dir", a.dir}, {"pid", a.pid}};
  if (!end) {
    auto bytes = parse_size(a.memory);
    if (!bytes) {
      std::cerr << "tessera sim process: --memory: " << bytes.error().message << '\n';
      return kExitUsage;
    }
    req["memory_bytes"] = *bytes;
    if (!a.mig_device.empty())
      req["mig_device"] = a.mig_device;
    else
      req["gpu"] = a.gpu;
  }
  return report(end ? "end-process" : "process", sim_control(req));
}

int run_event(const SimArgs& a) {
  nlohmann::json req = {{"op", "event"}, {"dir", a.dir}, {"gpu", a.gpu}};
  if (a.lost)
    req["kind"] = "lost";
  else if (!a.ecc.empty())
    req["kind"] = "ecc-" + a.ecc;
  else {
    req["kind"] = "xid";
    req["xid"] = a.xid;
  }
  if (a.gpu_instance >= 0) req["gpu_instance"] = a.gpu_instance;
  return report("event", sim_control(req));
}

int run_activity(const SimArgs& a) {
  nlohmann::json req = {{"op", "activity"}, {"dir", a.dir}, {"gpu", a.gpu}};
  if (a.gpu_instance >= 0) req["gpu_instance"] = a.gpu_instance;
  auto put = [&](const char* key, double v) {
    if (v >= 0) req[key] = v;
  };
  if (a.gpu_util >= 0) req["gpu_util"] = static_cast<uint32_t>(a.gpu_util);
  if (a.memory_util >= 0) req["memory_util"] = static_cast<uint32_t>(a.memory_util);
  put("sm_util", a.sm_util);
  put("sm_occupancy", a.sm_occupancy);
  put("dram_bw_util", a.dram_bw);
  put("graphics_util", a.graphics_util);
  put("tensor_util", a.tensor_util);
  auto put_int = [&](const char* key, int64_t v) {
    if (v >= 0) req[key] = static_cast<uint32_t>(v);
  };
  put_int("temperature_c", a.temperature);
  put_int("power_mw", a.power_mw);
  put_int("sm_clock_mhz", a.sm_clock);
  put_int("mem_clock_mhz", a.mem_clock);
  return report("activity", sim_control(req));
}

int run_fault(const SimArgs& a) {
  nvml::Return code{};
  if (!nvml::parse_return_name(a.error, code)) {
    std::cerr << "tessera sim fault: --error: " << quote(a.error)
              << " is not an NVML return code (e.g. NVML_ERROR_UNKNOWN, NVML_ERROR_GPU_IS_LOST)\n";
    return kExitUsage;
  }
  return report("fault", sim_control({{"op", "fault"},
                                      {"dir", a.dir},
                                      {"function", a.function},
                                      {"error", static_cast<int>(code)},
                                      {"nth", a.nth},
                                      {"times", a.times},
                                      {"crash", a.crash}}));
}

// The node's directory: DIR as typed, else TESSERA_SIM. (CLI11's envname on
// a positional let the environment win over the typed DIR.)
CLI::Option* add_dir(CLI::App* cmd, SimArgs& a) {
  auto* opt = cmd->add_option("dir", a.dir, "The simulated node's directory (default: $TESSERA_SIM)");
  cmd->parse_complete_callback([&a] {
    if (!a.dir.empty()) return;
    if (const char* env = std::getenv("TESSERA_SIM"); env && *env) a.dir = env;
    else throw CLI::RequiredError("dir (or TESSERA_SIM)");
  });
  return opt;
}

}  // namespace

void add_sim_command(CLI::App& app, int& exit_code) {
  auto* sim = app.add_subcommand("sim", "Simulated GPU nodes: make one, then drive it (use it with --sim DIR)");
  sim->require_subcommand(1);
  auto a = std::make_shared<SimArgs>();

  auto* create = sim->add_subcommand("create", "Make a simulated node: GPUs of one catalog model");
  add_dir(create, *a);
  create->add_option("--gpu", a->gpu_model, "GPU model (catalog name or alias, e.g. A100-80GB, H100-80GB, H200)")
      ->required();
  create->add_option("--count", a->count, "Number of GPUs (1-16)")->check(CLI::Range(1, 16));
  create->add_option("--nvlink", a->nvlink, "NVLink: 'all' connects every pair of GPUs, 'none' (default) none")
      ->check(CLI::IsMember({"all", "none"}));
  create->add_flag("--mig", a->mig, "Start with MIG mode enabled on every GPU");
  create->add_flag("--unprivileged", a->unprivileged,
                   "Simulate a caller without root: MIG changes return NVML_ERROR_NO_PERMISSION");
  create->add_option("--seed", a->seed, "Seed of the GPU and MIG device UUIDs");
  create->add_option("--driver-version", a->driver_version, "Driver version to report (default 550.90.07)");
  create->add_flag("--device-nodes", a->device_nodes,
                   "Also make the device nodes a driver install makes under DIR/dev (nvidia<N>, nvidiactl) as\n"
                   "character devices (root). Never nvidia-uvm or the MIG capabilities' nvidia-caps/nvidia-cap<N>,\n"
                   "which only nvidia-modprobe makes on a real node");
  create->callback([a, &exit_code] { exit_code = run_create(*a); });

  auto* modprobe = sim->add_subcommand(
      "modprobe", "Load a simulated kernel module: nvidia-uvm registers its major in DIR/proc/devices (no device node)");
  add_dir(modprobe, *a);
  modprobe->add_option("module", a->module, "The module: nvidia-uvm")->required()->check(CLI::IsMember({"nvidia-uvm"}));
  modprobe->callback([a, &exit_code] { exit_code = run_modprobe(*a); });

  auto* process = sim->add_subcommand("process", "Start a simulated process holding GPU memory");
  add_dir(process, *a);
  process->add_option("--pid", a->pid, "Its process id")->required();
  process->add_option("--memory", a->memory, "GPU memory it holds (e.g. 4GiB)");
  auto* on_gpu = process->add_option("--gpu", a->gpu, "On this GPU (index; not in MIG mode)");
  process->add_option("--mig-device", a->mig_device, "On this MIG device (UUID)")->excludes(on_gpu);
  process->callback([a, &exit_code] { exit_code = run_process(*a, false); });

  auto* end = sim->add_subcommand("end-process", "End a simulated process");
  add_dir(end, *a);
  end->add_option("--pid", a->pid, "Its process id")->required();
  end->callback([a, &exit_code] { exit_code = run_process(*a, true); });

  auto* event = sim->add_subcommand("event", "Raise an Xid or ECC event on a GPU");
  add_dir(event, *a);
  event->add_option("--gpu", a->gpu, "GPU index")->check(whole_number(0, 15));
  auto* xid = event->add_option("--xid", a->xid, "Xid number (e.g. 79: fallen off the bus)")
                  ->check(whole_number(0, UINT32_MAX));
  auto* ecc =
      event->add_option("--ecc", a->ecc, "ECC error: single or double")->check(CLI::IsMember({"single", "double"}));
  auto* lost = event->add_flag("--lost", a->lost,
                               "The GPU falls off the bus: XID 79, then every NVML call on it fails with "
                               "NVML_ERROR_GPU_IS_LOST until `tessera sim reset`");
  xid->excludes(ecc);
  lost->excludes(xid)->excludes(ecc);
  event->add_option("--gpu-instance", a->gpu_instance, "GPU instance the event concerns")
      ->check(whole_number(0, UINT32_MAX));
  event->callback([a, xid, ecc, lost, &exit_code] {
    if (xid->count() + ecc->count() + lost->count() != 1) {
      std::cerr << "tessera sim event: give --xid N, --ecc single|double or --lost\n";
      exit_code = kExitUsage;
      return;
    }
    exit_code = run_event(*a);
  });

  auto* activity = sim->add_subcommand("activity", "Set a GPU's (or GPU instance's) utilisation and GPM activity");
  add_dir(activity, *a);
  activity->add_option("--gpu", a->gpu, "GPU index");
  activity->add_option("--gpu-instance", a->gpu_instance, "GPU instance id (GPM activity only)");
  activity->add_option("--gpu-util", a->gpu_util, "GPU utilisation, percent")->check(CLI::Range(0.0, 100.0));
  activity->add_option("--memory-util", a->memory_util, "Memory utilisation, percent")->check(CLI::Range(0.0, 100.0));
  activity->add_option("--sm-util", a->sm_util, "GPM SM utilisation, percent")->check(CLI::Range(0.0, 100.0));
  activity->add_option("--sm-occupancy", a->sm_occupancy, "GPM SM occupancy, percent")->check(CLI::Range(0.0, 100.0));
  activity->add_option("--dram-bw", a->dram_bw, "GPM DRAM bandwidth utilisation, percent")
      ->check(CLI::Range(0.0, 100.0));
  activity->add_option("--graphics-util", a->graphics_util, "GPM graphics engine utilisation, percent")
      ->check(CLI::Range(0.0, 100.0));
  activity->add_option("--tensor-util", a->tensor_util, "GPM tensor pipe utilisation, percent")
      ->check(CLI::Range(0.0, 100.0));
  activity->add_option("--temperature", a->temperature, "GPU temperature, degrees C (whole GPU only)")
      ->check(CLI::Range(0, 200));
  activity->add_option("--power-mw", a->power_mw, "Power draw, milliwatts (whole GPU only)")
      ->check(CLI::Range(0, 5000000));
  activity->add_option("--sm-clock", a->sm_clock, "SM clock, MHz (whole GPU only)")->check(CLI::Range(0, 10000));
  activity->add_option("--mem-clock", a->mem_clock, "Memory clock, MHz (whole GPU only)")->check(CLI::Range(0, 20000));
  activity->callback([a, &exit_code] { exit_code = run_activity(*a); });

  auto* fault = sim->add_subcommand("fault", "Make the Nth call of an NVML function return an error");
  add_dir(fault, *a);
  fault->add_option("--function", a->function, "NVML function, e.g. nvmlDeviceGetCount_v2")->required();
  fault->add_option("--error", a->error, "NVML return code, e.g. NVML_ERROR_UNKNOWN (the default)");
  fault->add_option("--nth", a->nth, "Which call fails, counted from the next across all processes (default 1)")
      ->check(whole_number(1, UINT32_MAX));
  fault->add_option("--times", a->times, "How many calls in a row fail (default 1)")
      ->check(whole_number(1, UINT32_MAX));
  fault->add_flag("--crash", a->crash,
                  "Instead of an error: the call makes its change, then the calling process exits at once (status 137,\n"
                  "as if killed) before it can record it; for the calls that change MIG (nvmlDeviceSetMigMode,\n"
                  "nvmlDeviceCreateGpuInstance[WithPlacement], nvmlGpuInstanceCreateComputeInstance, *Destroy)")
      ->excludes(fault->get_option("--error"));
  fault->callback([a, &exit_code] { exit_code = run_fault(*a); });

  auto* reset = sim->add_subcommand("reset", "Reset a GPU: applies a pending MIG mode, brings back a lost GPU (refused while processes run)");
  add_dir(reset, *a);
  reset->add_option("--gpu", a->gpu, "GPU index");
  reset->callback([a, &exit_code] {
    exit_code = report("reset", sim_control({{"op", "reset"}, {"dir", a->dir}, {"gpu", a->gpu}}));
  });

  auto* reboot = sim->add_subcommand(
      "reboot",
      "Reboot the node: processes end, MIG instances, memory limits and time-slice settings are gone, MIG\n"
      "mode is off (drivers keep none across a boot), nvidia-uvm is unloaded, and the boot id\n"
      "(DIR/proc/sys/kernel/random/boot_id) is new");
  add_dir(reboot, *a);
  reboot->callback([a, &exit_code] { exit_code = run_reboot(*a); });

  auto* show = sim->add_subcommand("show", "Print the node's state as JSON");
  add_dir(show, *a);
  show->callback([a, &exit_code] {
    auto r = sim_control({{"op", "show"}, {"dir", a->dir}});
    exit_code = report("show", r);
    if (r) std::cout << r->dump(2) << '\n';
  });
}

}  // namespace tessera::cli
