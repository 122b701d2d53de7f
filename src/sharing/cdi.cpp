#include "sharing/cdi.hpp"

#include <algorithm>
#include <set>

#include "core/text.hpp"
#include "cuda_quota/env.h"

namespace tessera::sharing {
namespace {

bool letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool alnum(char c) { return letter(c) || (c >= '0' && c <= '9'); }

// CDI's rules for a vendor or class (pkg/parser validateVendorOrClassName).
Result<void> check_part(const std::string& what, const std::string& s) {
  if (s.empty()) return fail(Errc::invalid_argument, "CDI " + what + " is empty");
  if (!letter(s.front())) return fail(Errc::invalid_argument, "CDI " + what + " " + quote(s) + " must start with a letter");
  if (!alnum(s.back()))
    return fail(Errc::invalid_argument, "CDI " + what + " " + quote(s) + " must end with a letter or digit");
  for (char c : s)
    if (!alnum(c) && c != '_' && c != '-' && c != '.')
      return fail(Errc::invalid_argument, "CDI " + what + " " + quote(s) + " has the character " + quote(std::string(1, c)) +
                                              " (allowed: letters, digits, '_', '-', '.')");
  return {};
}

std::string join_path(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r + path;
}

DeviceNode node(const DriverFiles& files, const std::string& path) {
  return {path, join_path(files.dev_root, path), driver_device_number(path, files)};
}

// The number after `prefix` in `path`, when all of the rest is digits.
std::optional<uint32_t> number_after(const std::string& path, const std::string& prefix) {
  if (!path.starts_with(prefix) || path.size() == prefix.size() || path.size() - prefix.size() > 9) return std::nullopt;
  uint32_t n = 0;
  for (size_t i = prefix.size(); i < path.size(); ++i) {
    if (path[i] < '0' || path[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(path[i] - '0');
  }
  return n;
}

}  // namespace

std::optional<DeviceNumber> driver_device_number(const std::string& path, const DriverFiles& files) {
  auto with = [](const std::optional<uint32_t>& major, uint32_t minor) -> std::optional<DeviceNumber> {
    if (!major) return std::nullopt;
    return DeviceNumber{*major, minor};
  };
  if (path == "/dev/nvidiactl") return with(files.frontend_major, 255);
  if (path == "/dev/nvidia-modeset") return with(files.frontend_major, 254);
  if (path == "/dev/nvidia-uvm") return with(files.uvm_major, 0);
  if (path == "/dev/nvidia-uvm-tools") return with(files.uvm_major, 1);
  if (auto m = number_after(path, "/dev/nvidia-caps/nvidia-cap")) return with(files.caps_major, *m);
  // The frontend's minors for GPUs stop below nvidia-modeset's (254).
  if (auto m = number_after(path, "/dev/nvidia"); m && *m < 254) return with(files.frontend_major, *m);
  return std::nullopt;
}

DriverMajors parse_proc_devices(const std::string& text) {
  // "Character devices:" then "<major> <name>" lines, then "Block devices:"
  // (Linux fs/proc/devices.c).
  DriverMajors out;
  bool character = false;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.starts_with("Character devices:") || line.starts_with("Block devices:")) {
      character = line[0] == 'C';
      continue;
    }
    if (!character) continue;
    size_t i = line.find_first_not_of(' ');
    if (i == std::string::npos) continue;
    uint32_t major = 0;
    size_t digits = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i, ++digits)
      major = major * 10 + static_cast<uint32_t>(line[i] - '0');
    // Majors are below 4096 (MAX_CHRDEV); a longer number is not one.
    if (digits == 0 || digits > 4 || major >= 4096 || i >= line.size() || line[i] != ' ') continue;
    const std::string name = line.substr(i + 1);
    if (name == "nvidia-frontend" || (name == "nvidia" && !out.frontend)) out.frontend = major;
    else if (name == "nvidia-uvm") out.uvm = major;
    else if (name == "nvidia-caps") out.caps = major;
  }
  return out;
}

Result<void> check_cdi_kind(const std::string& vendor, const std::string& cls) {
  if (auto r = check_part("vendor", vendor); !r) return r;
  return check_part("class", cls);
}

Result<void> check_cdi_device_name(const std::string& name) {
  if (name.empty()) return fail(Errc::invalid_argument, "CDI device name is empty");
  if (!alnum(name.front()) || !alnum(name.back()))
    return fail(Errc::invalid_argument, "CDI device name " + quote(name) + " must start and end with a letter or digit");
  for (char c : name)
    if (!alnum(c) && c != '_' && c != '-' && c != '.' && c != ':')
      return fail(Errc::invalid_argument, "CDI device name " + quote(name) + " has the character " +
                                              quote(std::string(1, c)) +
                                              " (allowed: letters, digits, '_', '-', '.', ':'); a comma joins names "
                                              "only in an annotation's value");
  return {};
}

Result<void> check_cdi_names(const CdiNames& names) {
  if (auto r = check_cdi_kind(names.vendor, names.gpu_class); !r) return r;
  if (auto r = check_cdi_kind(names.vendor, names.mig_class); !r) return r;
  // An annotation key is "<prefix><name>", with at most 63 characters after
  // the prefix (CDI pkg/cdi AnnotationKey); the prefix itself ends in '/'.
  if (names.annotation_prefix.empty() || names.annotation_prefix.back() != '/')
    return fail(Errc::invalid_argument, "CDI annotation prefix " + quote(names.annotation_prefix) + " must end with '/'");
  return {};
}

std::vector<DeviceNode> control_nodes(const DriverFiles& files) {
  std::vector<DeviceNode> out;
  for (const auto& p : files.control_nodes) out.push_back(node(files, p));
  return out;
}

Result<std::vector<DeviceNode>> device_nodes(const Device& device, const DriverFiles& files) {
  auto minor = files.gpu_minor.find(device.gpu_index);
  if (minor == files.gpu_minor.end())
    return fail(Errc::not_found, "GPU " + std::to_string(device.gpu_index) + " (" + device.gpu_uuid +
                                     ") has no device node minor number");
  std::vector<DeviceNode> out{node(files, "/dev/nvidia" + std::to_string(minor->second))};
  if (!device.is_mig) return out;
  auto gi = files.gi_access.find({minor->second, device.gi_id});
  auto ci = files.ci_access.find({minor->second, device.gi_id, device.ci_id});
  if (gi == files.gi_access.end() || ci == files.ci_access.end())
    return fail(Errc::not_found, "MIG device " + device.physical_uuid + " (GPU " + std::to_string(device.gpu_index) +
                                     ", GPU instance " + std::to_string(device.gi_id) + ", compute instance " +
                                     std::to_string(device.ci_id) +
                                     "): the driver lists no capability for it (gpu" + std::to_string(minor->second) +
                                     "/mig/gi" + std::to_string(device.gi_id) + "/ci" + std::to_string(device.ci_id) +
                                     "/access)");
  out.push_back(node(files, "/dev/nvidia-caps/nvidia-cap" + std::to_string(gi->second)));
  out.push_back(node(files, "/dev/nvidia-caps/nvidia-cap" + std::to_string(ci->second)));
  return out;
}

std::string cdi_name(const Device& device, config::DeviceIdStrategy ids, const CdiNames& names) {
  const std::string& cls = device.is_mig ? names.mig_class : names.gpu_class;
  std::string name = device.sharing != SharingMode::none ? device.id
                     : ids == config::DeviceIdStrategy::index ? device.index_id
                                                              : device.physical_uuid;
  return names.vendor + "/" + cls + "=" + name;
}

namespace {

// What every spec applies once: NVIDIA_VISIBLE_DEVICES=void, the control
// nodes, the driver's files and the hooks that make its libraries findable.
CdiEdits common_edits(const DriverFiles& files) {
  CdiEdits common;
  common.env.push_back(kCdiVisibleDevicesVoid);
  common.device_nodes = control_nodes(files);
  for (const auto& [container_path, host_path] : files.files) common.mounts.push_back({host_path, container_path, true});
  common.hooks = driver_hooks(files);
  return common;
}

}  // namespace

Result<CdiSpec> claim_cdi_spec(const std::string& claim_uid, std::span<const ClaimCdiDevice> devices,
                               const DriverFiles& files, const std::string& vendor, const std::string& cls) {
  if (auto r = check_cdi_kind(vendor, cls); !r) return unexpected(r.error());
  // CDI's transient spec name: "<vendor>-<class>_<id>" (pkg/cdi GenerateTransientSpecName).
  CdiSpec spec{vendor + "/" + cls, vendor + "-" + cls + "_" + claim_uid + ".json", common_edits(files), {}};
  for (const auto& d : devices) {
    auto nodes = device_nodes(d.device, files);
    if (!nodes) return fail(nodes.error().code, d.name + ": " + nodes.error().message);
    CdiDevice out{claim_uid + "-" + d.name, {}, d.edits};
    out.edits.device_nodes.insert(out.edits.device_nodes.begin(), nodes->begin(), nodes->end());
    if (auto r = check_cdi_device_name(out.name); !r) return unexpected(r.error());
    spec.devices.push_back(std::move(out));
  }
  return spec;
}

Result<std::vector<CdiSpec>> cdi_specs(std::span<const Resource> resources, const Inventory& inventory,
                                       const DriverFiles& files, const CdiNames& names, const CdiQuota& quota) {
  if (auto r = check_cdi_names(names); !r) return unexpected(r.error());
  const CdiEdits common = common_edits(files);
  CdiSpec gpu{names.vendor + "/" + names.gpu_class, names.vendor + "-" + names.gpu_class + ".json", common, {}};
  CdiSpec mig_own{names.vendor + "/" + names.mig_class, names.vendor + "-" + names.mig_class + ".json", common, {}};
  // MIG devices in the GPUs' spec when their class is the GPUs' (NVIDIA's
  // names): UUIDs (GPU-, MIG-) and index ids ("0", "0:1") never collide.
  CdiSpec& mig = names.mig_class == names.gpu_class ? gpu : mig_own;
  std::set<std::string> seen;  // spec kind + name: a device served by two resources is listed once
  auto add = [&](CdiSpec& spec, CdiDevice d) -> Result<void> {
    if (auto r = check_cdi_device_name(d.name); !r) return r;
    if (seen.insert(spec.kind + "=" + d.name).second) spec.devices.push_back(std::move(d));
    return {};
  };
  // Every physical device under both of its names, whether served whole,
  // shared or not at all (a name the kubelet may hand out after a config
  // change must already resolve).
  for (const auto& g : inventory.gpus) {
    Device whole;
    whole.gpu_index = g.index;
    whole.gpu_uuid = g.uuid;
    whole.physical_uuid = g.uuid;
    auto nodes = device_nodes(whole, files);
    if (!nodes) return unexpected(nodes.error());
    for (const auto& name : {g.uuid, std::to_string(g.index)})
      if (auto r = add(gpu, {name, {}, {{}, *nodes, {}, {}}}); !r) return unexpected(r.error());
    for (const auto& m : g.mig_devices) {
      Device md = whole;
      md.is_mig = true;
      md.physical_uuid = m.uuid;
      md.gi_id = m.gi_id;
      md.ci_id = m.ci_id;
      auto mnodes = device_nodes(md, files);
      if (!mnodes) return unexpected(mnodes.error());
      for (const auto& name : {m.uuid, std::to_string(g.index) + ":" + std::to_string(m.nvml_index)})
        if (auto r = add(mig, {name, {}, {{}, *mnodes, {}, {}}}); !r) return unexpected(r.error());
    }
  }
  for (const auto& r : resources)
    for (const auto& d : r.devices) {
      if (d.sharing == SharingMode::none) continue;
      auto nodes = device_nodes(d, files);
      if (!nodes) return unexpected(nodes.error());
      CdiDevice replica{d.id, {{"tessera.dev/memory-limit", std::to_string(d.memory_bytes)}}, {{}, *nodes, {}, {}}};
      if (quota.inject) {
        replica.edits.mounts.push_back({quota.library_dir, TESSERA_CONTAINER_LIBRARY_DIR, true});
        if (!quota.preload_file.empty()) replica.edits.mounts.push_back({quota.preload_file, TESSERA_CONTAINER_PRELOAD_FILE, true});
      }
      if (auto a = add(d.is_mig ? mig : gpu, std::move(replica)); !a) return unexpected(a.error());
    }
  std::vector<CdiSpec> out;
  if (!gpu.devices.empty()) out.push_back(std::move(gpu));
  if (!mig_own.devices.empty()) out.push_back(std::move(mig_own));
  return out;
}

std::vector<CdiHook> driver_hooks(const DriverFiles& files) {
  if (files.cdi_hook.empty()) return {};
  std::vector<std::string> folders;
  std::string libcuda;
  for (const auto& [container_path, host_path] : files.files) {
    const auto slash = container_path.rfind('/');
    const std::string name = container_path.substr(slash + 1);
    if (name.find(".so") == std::string::npos) continue;  // a program, not a library
    const std::string dir = container_path.substr(0, slash);
    if (std::find(folders.begin(), folders.end(), dir) == folders.end()) folders.push_back(dir);
    if (name == "libcuda.so.1") libcuda = container_path;
  }
  if (folders.empty()) return {};
  // NVIDIA's order (nvidia-ctk cdi generate): the links, CUDA's forward
  // compatibility, then the cache, which sees both; then the parameters.
  auto hook = [&](std::initializer_list<std::string> args) {
    CdiHook h;
    h.path = files.cdi_hook;
    h.args = {"tessera-cdi-hook"};
    h.args.insert(h.args.end(), args);
    return h;
  };
  std::vector<CdiHook> hooks;
  if (!libcuda.empty())
    hooks.push_back(hook({"create-symlinks", "--link", "libcuda.so.1::" + libcuda.substr(0, libcuda.rfind('/')) + "/libcuda.so"}));
  if (!files.driver_version.empty())
    hooks.push_back(hook({"enable-cuda-compat", "--host-driver-version=" + files.driver_version}));
  CdiHook ldcache = hook({"update-ldcache"});
  for (const auto& f : folders) ldcache.args.insert(ldcache.args.end(), {"--folder", f});
  hooks.push_back(std::move(ldcache));
  hooks.push_back(files.params_file.empty() ? hook({"disable-device-node-modification"})
                                            : hook({"disable-device-node-modification", "--params", files.params_file}));
  return hooks;
}

std::vector<CdiHook> memory_hooks(const MemoryHook& hook, const std::string& limits_file) {
  CdiHook set;
  // createRuntime: in the runtime's namespaces, where the state's pid is the
  // host's and /proc/<pid>/cgroup the container's real cgroup (OCI
  // runtime-spec config.md, "POSIX-platform Hooks").
  set.hook_name = "createRuntime";
  set.path = hook.path;
  set.args = {"tessera-memory-hook", "--limits", limits_file};
  set.args.insert(set.args.end(), hook.args.begin(), hook.args.end());
  set.env = hook.env;
  CdiHook clear = set;
  clear.hook_name = "poststop";
  clear.args.insert(clear.args.begin() + 3, "--clear");
  return {set, clear};
}

std::string quota_cdi_file(const std::string& key) { return "tessera.dev-quota_" + key + ".json"; }
std::string quota_cdi_name(const std::string& key) { return std::string(kQuotaCdiKind) + "=" + key; }

CdiSpec quota_cdi_spec(const std::string& key, const std::string& limits_file, const MemoryHook& hook) {
  CdiSpec spec;
  spec.kind = kQuotaCdiKind;
  spec.file_name = quota_cdi_file(key);
  spec.edits.env.push_back(kCdiVisibleDevicesVoid);
  CdiDevice device;
  device.name = key;
  device.edits.hooks = memory_hooks(hook, limits_file);
  spec.devices.push_back(std::move(device));
  return spec;
}

}  // namespace tessera::sharing
