#include "plugin/cdi_writer.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "core/file_write.hpp"
#include "core/text.hpp"
#include <spdlog/spdlog.h>

namespace tessera::plugin {
namespace {

namespace fs = std::filesystem;

// The class tessera 0.1's specs gave MIG devices, in a file of its own.
constexpr const char* kPreviousMigClass = "mig";

std::string under(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r + path;
}

bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}

// Where this process reads the driver root.
std::string driver_view(const CdiOptions& o) {
  if (!o.container_driver_root.empty() && fs::is_directory(o.container_driver_root)) return o.container_driver_root;
  return o.driver_root;
}

std::string dev_root(const CdiOptions& o) { return o.dev_root.empty() ? o.driver_root : o.dev_root; }
std::string dev_view(const CdiOptions& o) { return dev_root(o) == o.driver_root ? driver_view(o) : dev_root(o); }

// "DeviceFileMinor: N" from a capability's access file (NVIDIA MIG User
// Guide, "Device Nodes and Capabilities").
std::optional<uint32_t> access_minor(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("DeviceFileMinor:")) continue;
    try {
      return static_cast<uint32_t>(std::stoul(line.substr(16)));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// The libraries and programs a CUDA or NVML user needs from the driver, as
// NVIDIA's container toolkit mounts them (compute and utility capabilities).
constexpr const char* kLibraries[] = {"libcuda.so.1",          "libnvidia-ml.so.1",         "libnvidia-ptxjitcompiler.so.1",
                                      "libnvidia-nvvm.so.4",   "libcudadebugger.so.1",      "libnvidia-opencl.so.1",
                                      "libnvidia-cfg.so.1",    "libnvidia-allocator.so.1", "libnvidia-gpucomp.so.1"};
constexpr const char* kLibraryDirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                                        "/usr/lib", "/lib/x86_64-linux-gnu", "/lib64"};
// The compute and utility libraries of a driver install, by the name before
// ".so.<version>": what nvidia-ctk's generated spec mounts of the installed
// version beside the sonames above (nvidia-container-toolkit internal/discover,
// the compute and utility library lists; the research notes name them).
constexpr const char* kVersionedLibraries[] = {
    "libcuda",          "libnvidia-ml",      "libnvidia-ptxjitcompiler", "libnvidia-nvvm",
    "libcudadebugger",  "libnvidia-opencl",  "libnvidia-cfg",            "libnvidia-allocator",
    "libnvidia-gpucomp", "libnvidia-pkcs11", "libnvidia-pkcs11-openssl3", "libnvidia-nscq",
    "libnvidia-fatbinaryloader", "libnvidia-compiler", "libnvidia-sandboxutils"};
// The driver's IPC sockets a container's NVML and CUDA use where they exist.
constexpr const char* kParams = "/proc/driver/nvidia/params";  // the driver's parameters
constexpr const char* kSockets[] = {"/run/nvidia-persistenced/socket", "/run/nvidia-fabricmanager/socket"};
constexpr const char* kPrograms[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
                                     "nvidia-cuda-mps-server"};

// The driver's majors from the kernel's device list: the driver root's view
// first (a simulated node keeps its own), else this host's /proc/devices
// (not namespaced: a container reads the host's).
sharing::DriverMajors driver_majors(const std::string& view) {
  for (const std::string& path : {under(view, "/proc/devices"), std::string("/proc/devices")}) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    auto majors = sharing::parse_proc_devices(text.str());
    if (majors.frontend || majors.uvm || majors.caps) return majors;
  }
  return {};
}

// CUDA opens /dev/nvidia-uvm; without nvidia_uvm loaded no spec can give it.
void warn_without_uvm(const sharing::DriverFiles& files) {
  static std::atomic<int> said{-1};
  const int now = files.uvm_major ? 1 : 0;
  if (said.exchange(now) == now) return;
  if (now == 0 && std::find(files.control_nodes.begin(), files.control_nodes.end(), "/dev/nvidia-uvm") == files.control_nodes.end())
    spdlog::warn("CDI: the kernel lists no nvidia-uvm device (nvidia_uvm not loaded) and the node has no /dev/nvidia-uvm: "
                 "CUDA programs in containers will fail to initialise until the host runs `nvidia-modprobe -u -c=0` "
                 "(or `modprobe nvidia-uvm`); the specs name it once it is loaded");
  else if (now == 1)
    spdlog::info("CDI: nvidia-uvm is registered (major {}): the specs describe /dev/nvidia-uvm as a character device",
                 *files.uvm_major);
}

// A driver version as the .run installer and the packages suffix files: digits and dots.
bool is_driver_version(const std::string& v) {
  if (v.empty() || v.size() > 32 || v.front() == '.' || v.back() == '.') return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

// A file as this process sees it under the driver root (`view`), as a path
// inside that root; none when it leads out of the root.
std::optional<std::string> inside_root(const std::string& view, const fs::path& real) {
  if (view == "/") return real.string();
  if (real.string().starts_with(view + "/")) return real.string().substr(view.size());
  return std::nullopt;
}

// What nvidia-ctk adds beside the sonames: every compute and utility library
// of the installed version (`libcuda`, the file libcuda.so.1 resolves to, is
// libcuda.so.<version>) in that file's folder, mounted at its own name; the
// GSP firmware of that version; and the IPC sockets that exist. A file
// mounted already (at its soname) is not mounted twice.
void add_versioned_files(const std::string& view, const std::string& driver_root, const fs::path& libcuda,
                         std::vector<std::pair<std::string, std::string>>& files) {
  std::set<std::string> mounted;  // host files already in the spec
  for (const auto& f : files) mounted.insert(f.second);
  const std::string name = libcuda.filename().string();
  const std::string version = name.starts_with("libcuda.so.") ? name.substr(11) : "";
  if (is_driver_version(version)) {
    std::error_code ec;
    std::vector<std::string> found;  // inside the driver root
    for (const auto& e : fs::directory_iterator(libcuda.parent_path(), ec)) {
      const std::string file = e.path().filename().string();
      for (const char* lib : kVersionedLibraries)
        if (file == std::string(lib) + ".so." + version && e.is_regular_file(ec))
          if (auto rel = inside_root(view, e.path())) found.push_back(*rel);
    }
    std::sort(found.begin(), found.end());
    for (const auto& rel : found)
      if (mounted.insert(under(driver_root, rel)).second) files.push_back({rel, under(driver_root, rel)});
    // GSP firmware: /lib/firmware/nvidia/<version>/gsp*.bin (or under /usr).
    for (const char* fw : {"/lib/firmware/nvidia/", "/usr/lib/firmware/nvidia/"}) {
      const std::string dir = std::string(fw) + version;
      if (!fs::is_directory(under(view, dir), ec)) continue;
      std::vector<std::string> blobs;
      for (const auto& e : fs::directory_iterator(under(view, dir), ec))
        if (e.path().filename().string().starts_with("gsp") && e.path().extension() == ".bin" && e.is_regular_file(ec))
          blobs.push_back(dir + "/" + e.path().filename().string());
      std::sort(blobs.begin(), blobs.end());
      for (const auto& b : blobs) files.push_back({b, under(driver_root, b)});
      break;
    }
  }
  for (const char* socket : kSockets) {
    struct stat st{};
    if (::stat(under(view, socket).c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
      files.push_back({socket, under(driver_root, socket)});
  }
}

// Readers (the container runtime) see the old spec or the new one, whole; the
// aside file's name does not end in .json, so no runtime loads it.
Result<void> write_file_atomically(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  if (auto r = replace_file(path, text, 0644, Flush::durably); !r)
    return fail(Errc::io, "cannot write CDI spec " + path + ": " + r.error().message);
  return {};
}

nlohmann::json edits_json(const sharing::CdiEdits& e) {
  nlohmann::json j = nlohmann::json::object();
  if (!e.env.empty()) j["env"] = e.env;
  if (!e.device_nodes.empty()) {
    j["deviceNodes"] = nlohmann::json::array();
    for (const auto& n : e.device_nodes) {
      nlohmann::json node = {{"path", n.path}, {"hostPath", n.host_path}};
      // Type and numbers given: the runtime makes the node without a host node to copy
      // (CDI specification, "Device nodes"; tags.cncf.io/container-device-interface
      // DeviceNode.fillMissingInfo stats hostPath only when they are missing).
      if (n.number) node.update({{"type", "c"}, {"major", n.number->major}, {"minor", n.number->minor}});
      j["deviceNodes"].push_back(std::move(node));
    }
  }
  if (!e.mounts.empty()) {
    j["mounts"] = nlohmann::json::array();
    for (const auto& m : e.mounts) {
      nlohmann::json options = m.read_only ? nlohmann::json{"ro", "nosuid", "nodev", "bind"}
                                           : nlohmann::json{"nosuid", "nodev", "bind"};
      j["mounts"].push_back({{"hostPath", m.host_path}, {"containerPath", m.container_path}, {"options", options}});
    }
  }
  if (!e.hooks.empty()) {
    j["hooks"] = nlohmann::json::array();
    for (const auto& h : e.hooks) {
      nlohmann::json hook = {{"hookName", h.hook_name}, {"path", h.path}, {"args", h.args}};
      if (!h.env.empty()) hook["env"] = h.env;
      j["hooks"].push_back(std::move(hook));
    }
  }
  return j;
}

}  // namespace

Result<sharing::DriverFiles> read_driver_files(const CdiOptions& options, const sharing::Inventory& inventory) {
  sharing::DriverFiles out;
  out.dev_root = dev_root(options);
  out.cdi_hook = options.cdi_hook;
  const std::string devs = dev_view(options);
  const std::string view = driver_view(options);
  const auto majors = driver_majors(view);
  out.frontend_major = majors.frontend;
  out.uvm_major = majors.uvm;
  out.caps_major = majors.caps;
  // A control node the host has, or one the runtime can make from its major:
  // nvidiactl with the driver, nvidia-uvm and nvidia-uvm-tools once nvidia_uvm
  // is loaded (which needs someone to run nvidia-modprobe -u or modprobe
  // nvidia-uvm; said once per change), nvidia-modeset only where it exists.
  for (const char* p : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"})
    if (exists(under(devs, p)) || (std::string(p) != "/dev/nvidia-modeset" && sharing::driver_device_number(p, out)))
      out.control_nodes.push_back(p);
  warn_without_uvm(out);
  std::string caps = under(view, "/proc/driver/nvidia/capabilities");
  if (!fs::is_directory(caps)) caps = "/proc/driver/nvidia/capabilities";
  for (const auto& g : inventory.gpus) {
    const uint32_t gpu_minor = g.minor.value_or(g.index);
    out.gpu_minor[g.index] = gpu_minor;
    for (const auto& m : g.mig_devices) {
      const std::string gi = caps + "/gpu" + std::to_string(gpu_minor) + "/mig/gi" + std::to_string(m.gi_id);
      if (auto minor = access_minor(gi + "/access")) out.gi_access[{gpu_minor, m.gi_id}] = *minor;
      if (auto minor = access_minor(gi + "/ci" + std::to_string(m.ci_id) + "/access"))
        out.ci_access[{gpu_minor, m.gi_id, m.ci_id}] = *minor;
    }
  }
  if (!options.write_specs) return out;
  bool core = false;
  std::set<std::string> taken;
  fs::path libcuda;  // the file libcuda.so.1 resolves to, where found
  for (const char* lib : kLibraries)
    for (const char* dir : kLibraryDirs) {
      const std::string seen = under(view, std::string(dir) + "/" + lib);
      std::error_code ec;
      auto real = fs::canonical(seen, ec);
      if (ec || !fs::is_regular_file(real)) continue;
      // The file the soname resolves to, mounted at the soname's path; its
      // host path is that file as the host sees it (or the soname's own path
      // when the link leads out of the driver root).
      const std::string rel = inside_root(view, real).value_or(std::string(dir) + "/" + lib);
      if (!taken.insert(lib).second) break;
      out.files.push_back({std::string(dir) + "/" + lib, under(options.driver_root, rel)});
      if (std::string(lib) == "libcuda.so.1") libcuda = real;
      if (std::string(lib) == "libcuda.so.1" || std::string(lib) == "libnvidia-ml.so.1") core = true;
      break;
    }
  if (core) add_versioned_files(view, options.driver_root, libcuda, out.files);
  if (const std::string name = libcuda.filename().string(); name.starts_with("libcuda.so.") && is_driver_version(name.substr(11)))
    out.driver_version = name.substr(11);
  // A simulated node keeps its driver's parameters in a file under its root;
  // a real node's are the kernel's (procfs, the same in every namespace),
  // where the hook reads them by default.
  if (struct statfs sf{}; ::statfs(under(view, kParams).c_str(), &sf) == 0 && sf.f_type != PROC_SUPER_MAGIC)
    out.params_file = under(options.driver_root, kParams);
  if (!core) {
    std::string dirs;
    for (const char* d : kLibraryDirs) dirs += (dirs.empty() ? "" : ", ") + std::string(d).substr(1);
    return fail(Errc::not_found, "driver root " + quote(options.driver_root) +
                                     (view != options.driver_root ? " (seen here at " + quote(view) + ")" : "") +
                                     " holds neither libcuda.so.1 nor libnvidia-ml.so.1 (looked in " + dirs +
                                     "): the CDI specs would give containers no driver; set --driver-root "
                                     "(flags.nvidiaDriverRoot) to where the driver is installed");
  }
  for (const char* prog : kPrograms)
    for (const char* dir : {"/usr/bin", "/usr/sbin", "/bin"}) {
      const std::string seen = under(view, std::string(dir) + "/" + prog);
      if (!fs::is_regular_file(seen)) continue;
      out.files.push_back({std::string(dir) + "/" + prog, under(options.driver_root, std::string(dir) + "/" + prog)});
      break;
    }
  return out;
}

std::string driver_library(const CdiOptions& options, const std::string& soname) {
  const std::string view = driver_view(options);
  for (const char* dir : kLibraryDirs) {
    const std::string path = std::string(dir) + "/" + soname;
    if (exists(under(view, path))) return under(options.driver_root, path);
  }
  return {};
}

namespace {

// A spec as a JSON document.
nlohmann::json spec_document(const sharing::CdiSpec& spec) {
  nlohmann::json j = {{"cdiVersion", sharing::kCdiVersion}, {"kind", spec.kind}};
  if (auto e = edits_json(spec.edits); !e.empty()) j["containerEdits"] = e;
  j["devices"] = nlohmann::json::array();
  for (const auto& d : spec.devices) {
    nlohmann::json dj = {{"name", d.name}, {"containerEdits", edits_json(d.edits)}};
    if (!d.annotations.empty()) dj["annotations"] = d.annotations;
    j["devices"].push_back(std::move(dj));
  }
  return j;
}

std::string text_of(const nlohmann::json& document) { return document.dump(2) + "\n"; }

}  // namespace

std::string cdi_spec_json(const sharing::CdiSpec& spec) { return text_of(spec_document(spec)); }

namespace {

Result<void> ensure_spec_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (fs::exists(dir, ec)) return fail(Errc::io, "CDI spec directory " + dir + " is not a directory");
    fs::create_directories(dir, ec);
    if (ec) return fail(Errc::io, "cannot create the CDI spec directory " + dir + ": " + ec.message());
  }
  if (::access(dir.c_str(), W_OK) != 0)
    return fail(Errc::io, "cannot write into the CDI spec directory " + dir + ": " + std::strerror(errno));
  return {};
}

}  // namespace

Result<void> write_cdi_spec(const sharing::CdiSpec& spec, const CdiOptions& options) {
  if (auto r = ensure_spec_dir(options.spec_dir); !r) return r;
  return write_file_atomically(options.spec_dir, spec.file_name, cdi_spec_json(spec));
}

Result<void> remove_cdi_spec(const std::string& file_name, const CdiOptions& options) {
  const std::string path = options.spec_dir + "/" + file_name;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return fail(Errc::io, "cannot remove the CDI spec " + path + ": " + std::strerror(errno));
  return {};
}

nlohmann::json keep_replica_names(nlohmann::json now, const nlohmann::json& before) {
  if (!before.is_object() || !before.contains("devices") || !before["devices"].is_array()) return now;
  if (before.value("kind", "") != now.value("kind", "")) return now;
  std::map<std::string, const nlohmann::json*> defined;
  for (const auto& d : now["devices"])
    if (d.contains("name") && d["name"].is_string()) defined[d["name"].get<std::string>()] = &d;
  std::vector<nlohmann::json> kept;
  for (const auto& d : before["devices"]) {
    if (!d.is_object() || !d.contains("name") || !d["name"].is_string()) continue;
    const std::string name = d["name"];
    const auto sep = name.rfind("::");
    if (sep == std::string::npos || defined.contains(name)) continue;
    auto physical = defined.find(name.substr(0, sep));
    if (physical == defined.end()) continue;  // its device is gone: so is the name
    nlohmann::json copy = d;
    const nlohmann::json& edits = physical->second->value("containerEdits", nlohmann::json::object());
    copy["containerEdits"]["deviceNodes"] = edits.value("deviceNodes", nlohmann::json::array());
    kept.push_back(std::move(copy));
  }
  for (auto& d : kept) now["devices"].push_back(std::move(d));
  return now;
}

namespace {

// The spec file as it is on disk, or null when there is none or it is not
// JSON (then nothing of it is kept).
nlohmann::json read_spec_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

Result<void> write_cdi_specs(const std::vector<sharing::CdiSpec>& specs, const CdiOptions& options) {
  const std::string& dir = options.spec_dir;
  if (auto r = ensure_spec_dir(dir); !r) return r;
  std::set<std::string> written;
  for (const auto& spec : specs) {
    const nlohmann::json now = keep_replica_names(spec_document(spec), read_spec_file(dir + "/" + spec.file_name));
    if (auto r = write_file_atomically(dir, spec.file_name, text_of(now)); !r) return r;
    written.insert(spec.file_name);
  }
  // Each class's spec this writer may have written, and the MIG class of
  // tessera before it named MIG devices as NVIDIA does (<vendor>-mig.json),
  // which an upgraded node still holds.
  for (const auto& cls : {options.names.gpu_class, options.names.mig_class, std::string(kPreviousMigClass)}) {
    const std::string name = options.names.vendor + "-" + cls + ".json";
    if (written.contains(name)) continue;
    if (::unlink((dir + "/" + name).c_str()) != 0 && errno != ENOENT)
      return fail(Errc::io, "cannot remove the stale CDI spec " + dir + "/" + name + ": " + std::strerror(errno));
  }
  return {};
}

}  // namespace tessera::plugin
