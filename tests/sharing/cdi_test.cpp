#include "sharing/cdi.hpp"

#include <gtest/gtest.h>

#include "sharing/fixtures.hpp"

namespace tessera::sharing {
namespace {

using testing::parse;
using testing::two_gpu_node;

// The CDI specification's name rules (pkg/parser of
// tags.cncf.io/container-device-interface): a table of legal and illegal
// names, each refusal saying why.
TEST(Cdi, NameRules) {
  EXPECT_TRUE(check_cdi_kind("k8s.device-plugin.nvidia.com", "gpu"));
  EXPECT_TRUE(check_cdi_kind("example.com", "mig_2-x"));
  EXPECT_TRUE(check_cdi_device_name("GPU-0000::3"));
  EXPECT_TRUE(check_cdi_device_name("1:2"));
  EXPECT_TRUE(check_cdi_device_name("0"));
  struct Bad {
    const char* vendor;
    const char* cls;
    const char* why;
  };
  for (const auto& b : {Bad{"", "gpu", "CDI vendor is empty"},
                        Bad{"1vendor.com", "gpu", "CDI vendor '1vendor.com' must start with a letter"},
                        Bad{"vendor.com.", "gpu", "CDI vendor 'vendor.com.' must end with a letter or digit"},
                        Bad{"ven/dor", "gpu", "CDI vendor 'ven/dor' has the character '/'"},
                        Bad{"vendor.com", "g=pu", "CDI class 'g=pu' has the character '='"}}) {
    auto r = check_cdi_kind(b.vendor, b.cls);
    ASSERT_FALSE(r) << b.vendor << "/" << b.cls;
    EXPECT_NE(r.error().message.find(b.why), std::string::npos) << r.error().message;
  }
  auto comma = check_cdi_device_name("GPU-0000,GPU-1111");
  ASSERT_FALSE(comma);
  EXPECT_NE(comma.error().message.find("has the character ','"), std::string::npos) << comma.error().message;
  EXPECT_FALSE(check_cdi_device_name(""));
  EXPECT_FALSE(check_cdi_device_name("-a"));
  EXPECT_FALSE(check_cdi_device_name("a:"));
  CdiNames names;
  names.mig_class = "-mig";
  EXPECT_FALSE(check_cdi_names(names));
  names = {};
  names.annotation_prefix = "cdi.k8s.io";
  EXPECT_FALSE(check_cdi_names(names));
}

DriverFiles node_files() {
  DriverFiles f;
  f.dev_root = "/host";
  f.control_nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm"};
  f.files = {{"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/host/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07"}};
  f.gpu_minor = {{0, 0}, {1, 1}};
  // GPU 1's three MIG devices (fixtures: GPU instances 3, 4, 1, compute instance 0).
  for (uint32_t gi : {1u, 3u, 4u}) {
    f.gi_access[{1, gi}] = 3 + 135 + gi * 9;
    f.ci_access[{1, gi, 0}] = 3 + 135 + gi * 9 + 1;
  }
  return f;
}

const CdiDevice* find(const CdiSpec& spec, const std::string& name) {
  for (const auto& d : spec.devices)
    if (d.name == name) return &d;
  return nullptr;
}

// One spec, class gpu, as NVIDIA's device plugin names devices: every GPU
// under its UUID and index, every MIG device under its UUID and gpu:index,
// each with its own nodes; the control nodes and driver files once.
TEST(Cdi, SpecsDefineEveryNameAllocateHandsOut) {
  auto inv = two_gpu_node();
  auto rs = build_resources(inv, parse("version: v1\nflags: {migStrategy: mixed}\n"));
  ASSERT_TRUE(rs);
  auto specs = cdi_specs(*rs, inv, node_files(), {}, {});
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 1u);
  const CdiSpec& gpu = (*specs)[0];
  const CdiSpec& mig = gpu;
  EXPECT_EQ(gpu.kind, "k8s.device-plugin.nvidia.com/gpu");
  EXPECT_EQ(gpu.file_name, "k8s.device-plugin.nvidia.com-gpu.json");
  EXPECT_EQ(gpu.edits.device_nodes, (std::vector<DeviceNode>{{"/dev/nvidiactl", "/host/dev/nvidiactl"},
                                                              {"/dev/nvidia-uvm", "/host/dev/nvidia-uvm"}}));
  ASSERT_EQ(gpu.edits.mounts.size(), 1u);
  EXPECT_EQ(gpu.edits.mounts[0].host_path, "/host/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07");
  EXPECT_EQ(gpu.edits.mounts[0].container_path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  for (const char* name : {"GPU-0000", "0", "GPU-1111", "1"}) ASSERT_TRUE(find(gpu, name)) << name;
  EXPECT_EQ(find(gpu, "GPU-1111")->edits.device_nodes, (std::vector<DeviceNode>{{"/dev/nvidia1", "/host/dev/nvidia1"}}));
  // MIG-b: GPU 1, GPU instance 4, NVML index 2.
  const CdiDevice* b = find(mig, "MIG-b");
  ASSERT_TRUE(b);
  ASSERT_TRUE(find(mig, "1:2"));
  EXPECT_EQ(find(mig, "1:2")->edits, b->edits);
  EXPECT_EQ(b->edits.device_nodes,
            (std::vector<DeviceNode>{{"/dev/nvidia1", "/host/dev/nvidia1"},
                                     {"/dev/nvidia-caps/nvidia-cap174", "/host/dev/nvidia-caps/nvidia-cap174"},
                                     {"/dev/nvidia-caps/nvidia-cap175", "/host/dev/nvidia-caps/nvidia-cap175"}}));
  EXPECT_EQ(gpu.devices.size(), 4u + 6u);
  // A class of MIG devices' own: a spec of their own, the GPUs' spec as it was.
  CdiNames own;
  own.mig_class = "mig";
  auto apart = cdi_specs(*rs, inv, node_files(), own, {});
  ASSERT_TRUE(apart) << apart.error().message;
  ASSERT_EQ(apart->size(), 2u);
  EXPECT_EQ((*apart)[0].devices.size(), 4u);
  EXPECT_EQ((*apart)[1].kind, "k8s.device-plugin.nvidia.com/mig");
  EXPECT_EQ((*apart)[1].file_name, "k8s.device-plugin.nvidia.com-mig.json");
  EXPECT_EQ((*apart)[1].devices.size(), 6u);
  ASSERT_TRUE(find((*apart)[1], "1:2"));
  EXPECT_EQ(find((*apart)[1], "1:2")->edits, b->edits);
}

// With tessera-cdi-hook's host path, every spec's own edits carry the
// createContainer hooks of NVIDIA's generated specs, in their order:
// libcuda.so made beside libcuda.so.1, CUDA's forward compatibility against
// the driver's version (only where it is known), the linker cache refreshed
// for every folder the spec mounts a driver library into (programs are not
// libraries), and device-node creation turned off (with a simulated node's
// parameters file where it has one). Without the path, none.
TEST(Cdi, DriverHooksAreNvidiasInNvidiasOrder) {
  auto files = node_files();
  files.files.push_back({"/usr/lib64/libnvidia-ml.so.1", "/host/usr/lib64/libnvidia-ml.so.550.90.07"});
  files.files.push_back({"/usr/bin/nvidia-smi", "/host/usr/bin/nvidia-smi"});
  EXPECT_TRUE(driver_hooks(files).empty()) << "no hook path, no hooks";
  files.cdi_hook = "/var/lib/tessera/lib/tessera-cdi-hook";
  const CdiHook links{"createContainer", files.cdi_hook,
                      {"tessera-cdi-hook", "create-symlinks", "--link", "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so"}, {}};
  const CdiHook cache{"createContainer", files.cdi_hook,
                      {"tessera-cdi-hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu", "--folder", "/usr/lib64"}, {}};
  const CdiHook params{"createContainer", files.cdi_hook, {"tessera-cdi-hook", "disable-device-node-modification"}, {}};
  std::vector<CdiHook> want{links, cache, params};
  EXPECT_EQ(driver_hooks(files), want) << "no driver version known: no enable-cuda-compat";
  files.driver_version = "550.90.07";
  files.params_file = "/host/proc/driver/nvidia/params";
  want = {links,
          {"createContainer", files.cdi_hook, {"tessera-cdi-hook", "enable-cuda-compat", "--host-driver-version=550.90.07"}, {}},
          cache,
          {"createContainer", files.cdi_hook,
           {"tessera-cdi-hook", "disable-device-node-modification", "--params", "/host/proc/driver/nvidia/params"}, {}}};
  EXPECT_EQ(driver_hooks(files), want);
  auto inv = two_gpu_node();
  auto rs = build_resources(inv, parse("version: v1\n"));
  ASSERT_TRUE(rs);
  auto specs = cdi_specs(*rs, inv, files, {}, {});
  ASSERT_TRUE(specs) << specs.error().message;
  EXPECT_EQ((*specs)[0].edits.hooks, want);
  for (const auto& d : (*specs)[0].devices) EXPECT_TRUE(d.edits.hooks.empty()) << d.name;
  files.files = {{"/usr/bin/nvidia-smi", "/host/usr/bin/nvidia-smi"}};
  EXPECT_TRUE(driver_hooks(files).empty()) << "no library, nothing to cache";
}

// Every spec sets NVIDIA_VISIBLE_DEVICES=void once, as NVIDIA's generated
// specs do: the device plugin's classes, a claim's spec and a container's
// quota spec; no device sets it again.
TEST(Cdi, EverySpecSetsNvidiaVisibleDevicesVoid) {
  auto inv = two_gpu_node();
  auto rs = build_resources(inv, parse("version: v1\nflags: {migStrategy: mixed}\n"));
  ASSERT_TRUE(rs);
  auto specs = cdi_specs(*rs, inv, node_files(), {}, {});
  ASSERT_TRUE(specs) << specs.error().message;
  const std::vector<std::string> void_env{"NVIDIA_VISIBLE_DEVICES=void"};
  for (const auto& spec : *specs) {
    EXPECT_EQ(spec.edits.env, void_env) << spec.kind;
    for (const auto& d : spec.devices) EXPECT_TRUE(d.edits.env.empty()) << d.name;
  }
  Device whole;
  whole.gpu_index = 0;
  whole.gpu_uuid = whole.physical_uuid = "GPU-0000";
  std::vector<ClaimCdiDevice> claim{{"gpu-0", whole, {}}};
  auto c = claim_cdi_spec("uid-1", claim, node_files(), "gpu.nvidia.com", "claim");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->edits.env, void_env);
  EXPECT_EQ(quota_cdi_spec("k1", "/l/limits", {"/hook", {}, {}}).edits.env, void_env);
}

// A shared replica is its own device: its GPU's nodes, the quota library and
// preload list read-only, its memory share as an annotation.
TEST(Cdi, ReplicasCarryTheQuotaLibraryAndTheirShare) {
  auto inv = two_gpu_node();
  auto rs = build_resources(inv, parse("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n"));
  ASSERT_TRUE(rs);
  CdiQuota quota{true, "/var/lib/tessera/lib", "/var/lib/tessera/ledgers/ld.so.preload"};
  auto specs = cdi_specs(*rs, inv, node_files(), {}, quota);
  ASSERT_TRUE(specs) << specs.error().message;
  const CdiDevice* r = find((*specs)[0], "GPU-0000::2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->annotations.at("tessera.dev/memory-limit"), std::to_string((80ull << 30) / 4));
  EXPECT_EQ(r->edits.device_nodes, (std::vector<DeviceNode>{{"/dev/nvidia0", "/host/dev/nvidia0"}}));
  EXPECT_EQ(r->edits.mounts, (std::vector<CdiMount>{{"/var/lib/tessera/lib", "/usr/local/tessera/lib", true},
                                                   {"/var/lib/tessera/ledgers/ld.so.preload", "/etc/ld.so.preload", true}}));
  EXPECT_TRUE(find((*specs)[0], "GPU-0000"));  // the whole GPU's name resolves too
}

// What the node lacks is an error naming the device, never a spec that
// would fail at container creation.
TEST(Cdi, AMissingCapabilityOrMinorIsAnError) {
  auto inv = two_gpu_node();
  auto rs = build_resources(inv, parse("version: v1\nflags: {migStrategy: mixed}\n"));
  ASSERT_TRUE(rs);
  auto files = node_files();
  files.ci_access.erase({1, 4, 0});
  auto specs = cdi_specs(*rs, inv, files, {}, {});
  ASSERT_FALSE(specs);
  EXPECT_NE(specs.error().message.find("MIG device MIG-b"), std::string::npos) << specs.error().message;
  files = node_files();
  files.gpu_minor.erase(0);
  specs = cdi_specs(*rs, inv, files, {}, {});
  ASSERT_FALSE(specs);
  EXPECT_NE(specs.error().message.find("GPU 0 (GPU-0000) has no device node minor"), std::string::npos)
      << specs.error().message;
  CdiNames bad;
  bad.vendor = "nvidia.com/";
  EXPECT_FALSE(cdi_specs(*rs, inv, node_files(), bad, {}));
}

// The driver's majors as the kernel lists them (Linux fs/proc/devices.c):
// character devices only, names as the NVIDIA modules register them.
TEST(Cdi, DriverMajorsFromTheKernelsDeviceList) {
  auto m = parse_proc_devices(
      "Character devices:\n  1 mem\n195 nvidia-frontend\n195 nvidia\n195 nvidiactl\n"
      "510 nvidia-uvm\n511 nvidia-caps\n\nBlock devices:\n  7 loop\n259 nvidia-uvm\n");
  EXPECT_EQ(m.frontend, 195u);
  EXPECT_EQ(m.uvm, 510u);  // not the block device of the same name
  EXPECT_EQ(m.caps, 511u);
  // nvidia_uvm not loaded: no uvm major.
  m = parse_proc_devices("Character devices:\n195 nvidia\n508 nvidia-caps\n");
  EXPECT_EQ(m.frontend, 195u);
  EXPECT_FALSE(m.uvm);
  // Hostile and malformed lines give nothing, and nothing from block devices.
  for (const char* text : {"", "195 nvidia-frontend\n", "Block devices:\n195 nvidia-frontend\n",
                           "Character devices:\n99999 nvidia-frontend\n", "Character devices:\n4096 nvidia-uvm\n",
                           "Character devices:\nx195 nvidia-frontend\n", "Character devices:\n195nvidia-frontend\n",
                           "Character devices:\n195 nvidia-frontend-x\n", "Character devices:\n-1 nvidia-caps\n",
                           "Character devices:\n 195\n"}) {
    m = parse_proc_devices(text);
    EXPECT_FALSE(m.frontend || m.uvm || m.caps) << text;
  }
}

// The numbers NVIDIA's driver gives its nodes (nvidia-modprobe's
// nvidia-modprobe-utils: control minor 255, modeset 254, uvm 0 and tools 1,
// caps by their minor under nvidia-caps' major), and none for a path that
// is not the driver's or a major the kernel does not list.
TEST(Cdi, DeviceNumbersOfTheDriversNodes) {
  DriverFiles f;
  f.frontend_major = 195;
  f.caps_major = 511;
  EXPECT_EQ(driver_device_number("/dev/nvidiactl", f), (DeviceNumber{195, 255}));
  EXPECT_EQ(driver_device_number("/dev/nvidia-modeset", f), (DeviceNumber{195, 254}));
  EXPECT_EQ(driver_device_number("/dev/nvidia0", f), (DeviceNumber{195, 0}));
  EXPECT_EQ(driver_device_number("/dev/nvidia7", f), (DeviceNumber{195, 7}));
  EXPECT_EQ(driver_device_number("/dev/nvidia-caps/nvidia-cap21", f), (DeviceNumber{511, 21}));
  EXPECT_FALSE(driver_device_number("/dev/nvidia-uvm", f));  // nvidia_uvm not loaded
  f.uvm_major = 510;
  EXPECT_EQ(driver_device_number("/dev/nvidia-uvm", f), (DeviceNumber{510, 0}));
  EXPECT_EQ(driver_device_number("/dev/nvidia-uvm-tools", f), (DeviceNumber{510, 1}));
  for (const char* p : {"/dev/nvidia254", "/dev/nvidia", "/dev/nvidia0x", "/dev/nvidia-caps/nvidia-cap",
                        "/dev/nvidia-caps/nvidia-capx1", "/dev/nvidia1234567890", "/dev/dri/card0", "/dev/nvidia-nvswitch0"})
    EXPECT_FALSE(driver_device_number(p, f)) << p;
  f.caps_major.reset();
  EXPECT_FALSE(driver_device_number("/dev/nvidia-caps/nvidia-cap21", f));
  // The spec's nodes carry them: the runtime makes them with no host node.
  f.dev_root = "/";
  f.gpu_minor = {{0, 3}};
  auto inv = two_gpu_node();
  auto rs = build_resources(inv, parse("version: v1\n"));
  ASSERT_TRUE(rs);
  int whole = 0;
  for (const auto& r : *rs)
    for (const auto& d : r.devices) {
      if (d.gpu_index != 0 || d.is_mig) continue;
      ++whole;
      auto nodes = device_nodes(d, f);
      ASSERT_TRUE(nodes) << nodes.error().message;
      ASSERT_EQ(nodes->size(), 1u);
      EXPECT_EQ((*nodes)[0].path, "/dev/nvidia3");
      EXPECT_EQ((*nodes)[0].number, (DeviceNumber{195, 3}));
    }
  EXPECT_EQ(whole, 1);
}

}  // namespace
}  // namespace tessera::sharing
