#include "sharing/allocate.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "sharing/fixtures.hpp"

namespace tessera::sharing {
namespace {

using testing::parse;
using testing::two_gpu_node;

Resource only(const char* yaml, const char* name) {
  auto rs = build_resources(two_gpu_node(), parse(yaml));
  EXPECT_TRUE(rs);
  for (auto& r : *rs)
    if (r.name == name) return r;
  throw std::runtime_error(std::string("no resource ") + name);
}

TEST(Allocate, WholeGpusByUuidAndByIndex) {
  auto r = only("version: v1\n", "nvidia.com/gpu");
  std::vector<std::string> ids{"GPU-1111", "GPU-0000"};
  auto a = allocate(r, ids, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-1111,GPU-0000");
  EXPECT_FALSE(a->envs.contains("TESSERA_DEVICE_MEMORY_LIMIT_0"));  // not shared: no quota
  AllocateSettings by_index;
  by_index.id_strategy = config::DeviceIdStrategy::index;
  EXPECT_EQ(allocate(r, ids, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1,0");
}

// "<gpu>:<n>" names NVML's MIG device index n (what
// nvmlDeviceGetMigDeviceHandleByIndex takes and the runtime resolves), not
// the device's rank by placement: the 3g.40gb sits last by placement but is
// NVML's MIG device 0.
TEST(Allocate, MigDeviceIndexIsGpuColonNvmlIndex) {
  AllocateSettings by_index;
  by_index.id_strategy = config::DeviceIdStrategy::index;
  auto big = only("version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-3g.40gb");
  EXPECT_EQ(allocate(big, std::vector<std::string>{"MIG-c"}, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1:0");
  auto small = only("version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-1g.20gb");
  EXPECT_EQ(allocate(small, std::vector<std::string>{"MIG-a"}, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1:1");
  EXPECT_EQ(allocate(small, std::vector<std::string>{"MIG-b"}, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1:2");
}

TEST(Allocate, TimeSlicedReplicaCarriesQuota) {
  auto r = only(R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)", "nvidia.com/gpu");
  std::vector<std::string> ids{"GPU-0000::2"};
  auto a = allocate(r, ids, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-0000");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string(20ull << 30));
  // Two replicas of one GPU (allowed for time-slicing by default): one device, twice the quota.
  std::vector<std::string> two{"GPU-0000::0", "GPU-0000::1"};
  auto b = allocate(r, two, {});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-0000");
  EXPECT_EQ(b->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string(40ull << 30));
  // NVIDIA's toolkit's hook reads the same quota in whole MiB.
  EXPECT_EQ(a->envs.at("NVIDIA_GPU_MEMORY_LIMIT"), std::to_string(20ull << 10));
  EXPECT_EQ(b->envs.at("NVIDIA_GPU_MEMORY_LIMIT"), std::to_string(40ull << 10));
  EXPECT_FALSE(a->envs.contains("NVIDIA_GPU_MEMORY_REQUEST")) << "a soft limit is reserved in every ancestor cgroup";
}

// Four MPS shares of each 3g.40gb MIG device.
const char* kMpsOnMig = R"(version: v1
flags: {migStrategy: mixed}
sharing:
  mps:
    resources: [{name: nvidia.com/mig-3g.40gb, replicas: 4}]
)";

TEST(Allocate, MpsSharePinsMemoryAndThreads) {
  auto r = only(kMpsOnMig, "nvidia.com/mig-3g.40gb");
  std::vector<std::string> ids{"MIG-c::1"};
  auto a = allocate(r, ids, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com_mig-3g.40gb/pipe");
  EXPECT_EQ(a->envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=10048M");
  EXPECT_EQ(a->envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string((40192ull << 20) / 4));
  ASSERT_EQ(a->mounts.size(), 6u);  // then the quota library's four
  EXPECT_EQ(a->mounts[0].host_path, "/run/nvidia/mps/MIG-c/pipe");  // the device's own daemon
  EXPECT_TRUE(a->mounts[0].read_only) << "clients connect there; none may bind a daemon of its own";
  EXPECT_FALSE(a->mounts[1].read_only);
  EXPECT_EQ(a->mounts[1].container_path, "/dev/shm");
}

// MPS on GPU 0 only (`devices: [0]`): GPU 1 is served whole under the same
// name, with no daemon of its own, no MPS mounts and no quota.
TEST(Allocate, AGpuServedWholeBesideMpsSharesIsNotAnMpsClient) {
  auto config = parse(R"(version: v1
sharing:
  mps:
    resources: [{name: nvidia.com/gpu, replicas: 4, devices: [0]}]
)");
  auto resources = build_resources(two_gpu_node(), config);
  ASSERT_TRUE(resources) << resources.error().message;
  ASSERT_EQ(resources->size(), 1u);
  const Resource& r = resources->front();
  EXPECT_EQ(r.devices.size(), 5u);  // four shares of GPU 0 and GPU 1 whole
  auto daemons = mps_daemons("/run/nvidia/mps", *resources);
  ASSERT_EQ(daemons.size(), 1u);
  EXPECT_EQ(daemons[0].uuid, "GPU-0000");
  auto whole = allocate(r, std::vector<std::string>{"GPU-1111"}, {});
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-1111");
  for (const auto& [name, value] : whole->envs) {
    EXPECT_FALSE(name.starts_with("CUDA_MPS_")) << name << "=" << value;
    EXPECT_FALSE(name.starts_with("TESSERA_")) << name << "=" << value;
  }
  EXPECT_TRUE(whole->mounts.empty());
  auto share = allocate(r, std::vector<std::string>{"GPU-0000::1"}, {});
  ASSERT_TRUE(share) << share.error().message;
  EXPECT_EQ(share->envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com_gpu/pipe");
  EXPECT_EQ(share->envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
}

AllocateSettings quota_settings() {
  AllocateSettings s;
  s.quota.library_dir = "/host/tessera/lib";
  s.quota.ledger_root = "/host/tessera/ledgers";
  return s;
}

const char* kTimeSliced4 = R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)";

TEST(Allocate, QuotaLoadsTheLibraryWithItsLedger) {
  auto r = only(kTimeSliced4, "nvidia.com/gpu");
  std::vector<std::string> ids{"GPU-0000::2"};
  auto a = allocate(r, ids, quota_settings());
  ASSERT_TRUE(a);
  auto key = ledger_key("nvidia.com/gpu", ids);
  EXPECT_EQ(a->envs, (std::map<std::string, std::string>{
                         {"NVIDIA_VISIBLE_DEVICES", "GPU-0000"},
                         {"NVIDIA_GPU_MEMORY_LIMIT", std::to_string(20ull << 10)},
                         {"TESSERA_DEVICE_MEMORY_LIMIT_0", std::to_string(20ull << 30)},
                         {"TESSERA_DEVICE_UUID_0", "GPU-0000"},
                         {"TESSERA_LIMITS_FILE", "/run/tessera/limits"},
                         {"TESSERA_LEDGER_DIR", "/run/tessera/ledger"},
                         {"TESSERA_LEDGER_KEY", key},
                         {"LD_PRELOAD", "/usr/local/tessera/lib/libtessera-cuda.so"},
                     }));
  EXPECT_EQ(a->ledger_dir, "/host/tessera/ledgers/" + key);
  EXPECT_EQ(a->preload_file, "/host/tessera/ledgers/ld.so.preload");
  // What the caller writes before answering: the limits file and a ledger for exactly these.
  EXPECT_EQ(a->ledger_key, key);
  ASSERT_EQ(a->quota_devices.size(), 1u);
  EXPECT_EQ(a->quota_devices[0].uuid, "GPU-0000");
  EXPECT_EQ(a->quota_devices[0].quota, 20ull << 30);
  EXPECT_EQ(a->quota_devices[0].memory, 80ull << 30) << "the four replicas' shares together";
  EXPECT_EQ(a->quota_devices[0].context, 0u);
  ASSERT_EQ(a->mounts.size(), 4u);
  EXPECT_EQ(a->mounts[0].host_path, "/host/tessera/lib");
  EXPECT_EQ(a->mounts[0].container_path, "/usr/local/tessera/lib");
  EXPECT_TRUE(a->mounts[0].read_only);
  // The ledger and the limits file as single files, never their directory:
  // the container charges the one and cannot write the other.
  EXPECT_EQ(a->mounts[1].host_path, "/host/tessera/ledgers/" + key + "/ledger");
  EXPECT_EQ(a->mounts[1].container_path, "/run/tessera/ledger/ledger");
  EXPECT_FALSE(a->mounts[1].read_only);
  EXPECT_EQ(a->mounts[2].host_path, "/host/tessera/ledgers/" + key + "/limits");
  EXPECT_EQ(a->mounts[2].container_path, "/run/tessera/limits");
  EXPECT_TRUE(a->mounts[2].read_only);
  // ld.so's own preload list names the library too: a pod's LD_PRELOAD cannot drop it.
  EXPECT_EQ(a->mounts[3].host_path, "/host/tessera/ledgers/ld.so.preload");
  EXPECT_EQ(a->mounts[3].container_path, "/etc/ld.so.preload");
  EXPECT_TRUE(a->mounts[3].read_only);
  // A first context's charge, where the node gives one, goes in the limits file.
  auto with_context = quota_settings();
  with_context.quota.context_bytes = 512ull << 20;
  EXPECT_EQ(allocate(r, ids, with_context)->quota_devices[0].context, 512ull << 20);
  // A trailing slash on the root changes nothing.
  auto slash = quota_settings();
  slash.quota.ledger_root += "/";
  EXPECT_EQ(allocate(r, ids, slash)->ledger_dir, "/host/tessera/ledgers/" + key);
}

// Device k's UUID is always the GPU's or MIG device's UUID, in the order of
// NVIDIA_VISIBLE_DEVICES, even when that list names indices.
TEST(Allocate, SeveralDevicesEachGetTheirUuid) {
  auto r = only(kTimeSliced4, "nvidia.com/gpu");
  std::vector<std::string> ids{"GPU-1111::0", "GPU-0000::1", "GPU-0000::3"};
  auto s = quota_settings();
  s.id_strategy = config::DeviceIdStrategy::index;
  auto a = allocate(r, ids, s);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "1,0");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_UUID_0"), "GPU-1111");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_UUID_1"), "GPU-0000");
  EXPECT_FALSE(a->envs.contains("TESSERA_DEVICE_UUID_2"));
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string(20ull << 30));
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_1"), std::to_string(40ull << 30));
  EXPECT_EQ(a->envs.at("TESSERA_LEDGER_KEY"), ledger_key("nvidia.com/gpu", ids));
  EXPECT_EQ(a->mounts.size(), 4u);
  ASSERT_EQ(a->quota_devices.size(), 2u);
  EXPECT_EQ(a->quota_devices[0].uuid, "GPU-1111");
  EXPECT_EQ(a->quota_devices[1].uuid, "GPU-0000");
  EXPECT_EQ(a->quota_devices[1].quota, 40ull << 30) << "two replicas of GPU-0000";
}

TEST(Allocate, MigReplicasGetMigUuids) {
  auto r = only(R"(version: v1
flags: {migStrategy: mixed}
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/mig-1g.20gb, replicas: 2}]
)", "nvidia.com/mig-1g.20gb");
  std::vector<std::string> ids{"MIG-b::1", "MIG-a::0"};
  auto a = allocate(r, ids, quota_settings());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "MIG-b,MIG-a");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_UUID_0"), "MIG-b");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_UUID_1"), "MIG-a");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string((19968ull << 20) / 2));
  // File-name safe: the resource's '/' became '_'.
  EXPECT_EQ(a->envs.at("TESSERA_LEDGER_KEY").rfind("nvidia.com_mig-1g.20gb-", 0), 0u);
}

TEST(Allocate, MpsReplicaGetsTheLibraryBesideItsMpsMounts) {
  auto r = only(kMpsOnMig, "nvidia.com/mig-3g.40gb");
  std::vector<std::string> ids{"MIG-c::3"};
  auto a = allocate(r, ids, quota_settings());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=10048M");  // the backstop stays
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_UUID_0"), "MIG-c");
  EXPECT_EQ(a->envs.at("LD_PRELOAD"), "/usr/local/tessera/lib/libtessera-cuda.so");
  ASSERT_EQ(a->mounts.size(), 6u);
  EXPECT_EQ(a->mounts[0].container_path, "/mps/nvidia.com_mig-3g.40gb/pipe");
  EXPECT_EQ(a->mounts[1].container_path, "/dev/shm");
  EXPECT_EQ(a->mounts[2].container_path, "/usr/local/tessera/lib");
  EXPECT_EQ(a->mounts[3].container_path, "/run/tessera/ledger/ledger");
  EXPECT_EQ(a->mounts[3].host_path, a->ledger_dir + "/ledger");
  EXPECT_EQ(a->mounts[4].container_path, "/run/tessera/limits");
  EXPECT_EQ(a->mounts[5].container_path, "/etc/ld.so.preload");
}

// --quota-preload: env only (no file, no mount), file only (no LD_PRELOAD), both.
TEST(Allocate, PreloadByEnvironmentFileOrBoth) {
  auto r = only(kTimeSliced4, "nvidia.com/gpu");
  std::vector<std::string> ids{"GPU-0000::1"};
  auto s = quota_settings();
  s.quota.preload = Preload::env;
  auto env = allocate(r, ids, s);
  ASSERT_TRUE(env);
  EXPECT_EQ(env->envs.count("LD_PRELOAD"), 1u);
  EXPECT_TRUE(env->preload_file.empty());
  EXPECT_EQ(env->mounts.size(), 3u);
  s.quota.preload = Preload::file;
  auto file = allocate(r, ids, s);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->envs.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(file->preload_file, "/host/tessera/ledgers/ld.so.preload");
  ASSERT_EQ(file->mounts.size(), 4u);
  EXPECT_EQ(file->mounts[3].container_path, "/etc/ld.so.preload");
  s.quota.preload = Preload::both;
  auto both = allocate(r, ids, s);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->envs.count("LD_PRELOAD"), 1u);
  EXPECT_EQ(both->mounts.size(), 4u);
}

TEST(Allocate, InjectionOffLeavesOnlyTheLimits) {
  auto r = only(kTimeSliced4, "nvidia.com/gpu");
  auto s = quota_settings();
  s.quota.inject = false;
  std::vector<std::string> ids{"GPU-0000::2"};
  auto a = allocate(r, ids, s);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs, (std::map<std::string, std::string>{
                         {"NVIDIA_VISIBLE_DEVICES", "GPU-0000"},
                         {"NVIDIA_GPU_MEMORY_LIMIT", std::to_string(20ull << 10)},
                         {"TESSERA_DEVICE_MEMORY_LIMIT_0", std::to_string(20ull << 30)},
                     }));
  EXPECT_TRUE(a->mounts.empty());
  EXPECT_TRUE(a->ledger_dir.empty());
  EXPECT_TRUE(a->quota_devices.empty());
}

TEST(Allocate, NoQuotaNoLibrary) {
  auto whole = only("version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-1g.20gb");
  std::vector<std::string> ids{"MIG-a"};
  auto a = allocate(whole, ids, quota_settings());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs, (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", "MIG-a"}}));
  EXPECT_TRUE(a->mounts.empty());
  EXPECT_TRUE(a->ledger_dir.empty());
  EXPECT_TRUE(a->quota_devices.empty());
}

TEST(Allocate, LedgerKeyIsStableAndPerReplicaSet) {
  std::vector<std::string> ab{"GPU-0000::0", "GPU-0000::1"};
  std::vector<std::string> ba{"GPU-0000::1", "GPU-0000::0"};
  std::vector<std::string> a{"GPU-0000::0"};
  std::vector<std::string> b{"GPU-0000::1"};
  auto key = ledger_key("nvidia.com/gpu", ab);
  // FNV-1a 64 of "nvidia.com/gpu\nGPU-0000::0\nGPU-0000::1": the same on every
  // node and in every release, so a restarted plugin finds the same directory.
  EXPECT_EQ(key, "nvidia.com_gpu-" + [] {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : std::string("nvidia.com/gpu\nGPU-0000::0\nGPU-0000::1")) h = (h ^ c) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::string(hex);
  }());
  EXPECT_EQ(ledger_key("nvidia.com/gpu", ba), key);  // order of the request does not matter
  std::set<std::string> keys{key, ledger_key("nvidia.com/gpu", a), ledger_key("nvidia.com/gpu", b),
                             ledger_key("nvidia.com/gpu.shared", ab)};
  EXPECT_EQ(keys.size(), 4u);
  // Short and file-name safe whatever the resource is called.
  auto odd = ledger_key("example.com/" + std::string(100, 'x') + " *?", a);
  EXPECT_EQ(odd.size(), 48u + 1 + 16);
  EXPECT_EQ(odd.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"), std::string::npos);
}

TEST(Allocate, RejectsBadRequests) {
  auto r = only(R"(version: v1
sharing:
  mps:
    resources: [{name: nvidia.com/gpu, replicas: 2}]
)", "nvidia.com/gpu");
  std::vector<std::string> unknown{"GPU-9999::0"};
  EXPECT_EQ(allocate(r, unknown, {}).error().message, "nvidia.com/gpu: unknown device id 'GPU-9999::0'");
  std::vector<std::string> two{"GPU-0000::0", "GPU-1111::0"};
  EXPECT_EQ(allocate(r, two, {}).error().message,
            "nvidia.com/gpu: maximum request size for shared resources is 1 (asked for 2)");
  std::vector<std::string> twice{"GPU-0000::0", "GPU-0000::0"};
  EXPECT_FALSE(allocate(r, twice, {}));
  EXPECT_FALSE(allocate(r, {}, {}));
}

TEST(Allocate, VolumeMountsAndCdiAnnotations) {
  auto r = only("version: v1\n", "nvidia.com/gpu");
  AllocateSettings s;
  s.list_strategy = {config::DeviceListStrategy::volume_mounts, config::DeviceListStrategy::cdi_annotations};
  std::vector<std::string> ids{"GPU-0000", "GPU-1111"};
  auto a = allocate(r, ids, s);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  ASSERT_EQ(a->mounts.size(), 2u);
  EXPECT_EQ(a->mounts[0].container_path, "/var/run/nvidia-container-devices/GPU-0000");
  // One annotation naming both, comma-joined as the CDI specification joins names in an annotation.
  EXPECT_EQ(a->annotations.at("cdi.k8s.io/nvidia-device-plugin_nvidia.com_gpu"),
            "k8s.device-plugin.nvidia.com/gpu=GPU-0000,k8s.device-plugin.nvidia.com/gpu=GPU-1111");
  EXPECT_TRUE(a->cdi_devices.empty());
}

// cdi-cri: one CDI name per device (a comma is not legal in one), each in
// the spec's class for its kind; beside envvar when both are asked for.
TEST(Allocate, CdiCriGivesOneNamePerDevice) {
  AllocateSettings s;
  s.list_strategy = {config::DeviceListStrategy::envvar, config::DeviceListStrategy::cdi_cri};
  auto gpus = only("version: v1\n", "nvidia.com/gpu");
  auto a = allocate(gpus, std::vector<std::string>{"GPU-1111", "GPU-0000"}, s);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->cdi_devices, (std::vector<std::string>{"k8s.device-plugin.nvidia.com/gpu=GPU-1111",
                                                      "k8s.device-plugin.nvidia.com/gpu=GPU-0000"}));
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-1111,GPU-0000");
  EXPECT_TRUE(a->annotations.empty());
  for (const auto& name : a->cdi_devices) {
    auto eq = name.find('=');
    EXPECT_TRUE(check_cdi_device_name(name.substr(eq + 1))) << name;
  }
  s.id_strategy = config::DeviceIdStrategy::index;
  EXPECT_EQ(allocate(gpus, std::vector<std::string>{"GPU-0000"}, s)->cdi_devices,
            (std::vector<std::string>{"k8s.device-plugin.nvidia.com/gpu=0"}));
  auto mig = only("version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-1g.20gb");
  EXPECT_EQ(allocate(mig, std::vector<std::string>{"MIG-b"}, s)->cdi_devices,
            (std::vector<std::string>{"k8s.device-plugin.nvidia.com/gpu=1:2"}));
  // A replica is its own CDI device, under its id.
  auto shared = only(kTimeSliced4, "nvidia.com/gpu");
  s.id_strategy = config::DeviceIdStrategy::uuid;
  EXPECT_EQ(allocate(shared, std::vector<std::string>{"GPU-0000::3"}, s)->cdi_devices,
            (std::vector<std::string>{"k8s.device-plugin.nvidia.com/gpu=GPU-0000::3"}));
  s.cdi.vendor = "example.com";
  EXPECT_EQ(allocate(gpus, std::vector<std::string>{"GPU-0000"}, s)->cdi_devices,
            (std::vector<std::string>{"example.com/gpu=GPU-0000"}));
}

// The memory hook (the quota's driver backend) rides on CDI: with a CDI
// strategy a shared replica's container gets its own CDI device, whose spec's
// createRuntime and poststop hooks name the container's limits file; cdi-cri hands its
// name as a device, cdi-annotations in an annotation of its own. Without a
// CDI strategy, without the hook, or for a whole GPU, there is none.
TEST(Allocate, TheMemoryHookIsTheContainersOwnCdiDevice) {
  auto shared = only(kTimeSliced4, "nvidia.com/gpu");
  AllocateSettings s;
  s.quota.ledger_root = "/var/lib/tessera/ledgers/";
  s.quota.memory_hook = {"/var/lib/tessera/lib/tessera-memory-hook", {"--nvml", "/lib/libnvidia-ml.so.1"}, {"A=b"}};
  const std::vector<std::string> ids{"GPU-0000::3"};
  const std::string key = ledger_key("nvidia.com/gpu", ids);
  s.list_strategy = {config::DeviceListStrategy::envvar, config::DeviceListStrategy::cdi_cri};
  auto a = allocate(shared, ids, s);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(a->quota_spec);
  EXPECT_EQ(a->cdi_devices, (std::vector<std::string>{"k8s.device-plugin.nvidia.com/gpu=GPU-0000::3",
                                                      "tessera.dev/quota=" + key}));
  EXPECT_EQ(a->quota_spec->kind, "tessera.dev/quota");
  EXPECT_EQ(a->quota_spec->file_name, "tessera.dev-quota_" + key + ".json");
  ASSERT_EQ(a->quota_spec->devices.size(), 1u);
  EXPECT_EQ(a->quota_spec->devices[0].name, key);
  EXPECT_TRUE(check_cdi_device_name(key));
  const std::string limits = "/var/lib/tessera/ledgers/" + key + "/limits";
  const std::vector<CdiHook> expected{
      {"createRuntime", "/var/lib/tessera/lib/tessera-memory-hook",
       {"tessera-memory-hook", "--limits", limits, "--nvml", "/lib/libnvidia-ml.so.1"}, {"A=b"}},
      {"poststop", "/var/lib/tessera/lib/tessera-memory-hook",
       {"tessera-memory-hook", "--limits", limits, "--clear", "--nvml", "/lib/libnvidia-ml.so.1"}, {"A=b"}}};
  EXPECT_EQ(a->quota_spec->devices[0].edits.hooks, expected);
  EXPECT_TRUE(a->envs.contains("LD_PRELOAD")) << "the library still loads: it holds what the driver cannot";

  s.list_strategy = {config::DeviceListStrategy::cdi_annotations};
  a = allocate(shared, ids, s);
  ASSERT_TRUE(a && a->quota_spec);
  EXPECT_EQ(a->annotations.at("cdi.k8s.io/tessera-quota_nvidia.com_gpu"), "tessera.dev/quota=" + key);
  EXPECT_TRUE(a->cdi_devices.empty());

  s.list_strategy = {config::DeviceListStrategy::envvar};
  a = allocate(shared, ids, s);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->quota_spec) << "no runtime runs a CDI hook for an environment variable";

  s.list_strategy = {config::DeviceListStrategy::cdi_cri};
  s.quota.memory_hook = {};
  a = allocate(shared, ids, s);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->quota_spec);
  EXPECT_EQ(a->cdi_devices.size(), 1u);

  s.quota.memory_hook.path = "/hook";
  auto whole = allocate(only("version: v1\n", "nvidia.com/gpu"), std::vector<std::string>{"GPU-0000"}, s);
  ASSERT_TRUE(whole);
  EXPECT_FALSE(whole->quota_spec) << "a whole GPU has no quota";
}

// passDeviceSpecs: the control nodes and each device's own nodes, host paths under the dev root.
TEST(Allocate, PassDeviceSpecsHandsOutTheDeviceNodes) {
  AllocateSettings s;
  s.pass_device_specs = true;
  DriverFiles files;
  files.dev_root = "/run/nvidia/driver";
  files.control_nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm"};
  files.gpu_minor = {{0, 0}, {1, 1}};
  files.gi_access[{1, 4}] = 147;
  files.ci_access[{1, 4, 0}] = 148;
  auto gpus = only("version: v1\n", "nvidia.com/gpu");
  auto a = allocate(gpus, std::vector<std::string>{"GPU-0000"}, s, &files);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->devices, (std::vector<DeviceNode>{{"/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl"},
                                                 {"/dev/nvidia-uvm", "/run/nvidia/driver/dev/nvidia-uvm"},
                                                 {"/dev/nvidia0", "/run/nvidia/driver/dev/nvidia0"}}));
  auto mig = only("version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-1g.20gb");
  a = allocate(mig, std::vector<std::string>{"MIG-b"}, s, &files);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->devices.size(), 5u);
  EXPECT_EQ(a->devices[3].path, "/dev/nvidia-caps/nvidia-cap147");
  EXPECT_EQ(a->devices[4].path, "/dev/nvidia-caps/nvidia-cap148");
  // A MIG device the driver lists no capability for is refused, naming it.
  auto other = allocate(mig, std::vector<std::string>{"MIG-a"}, s, &files);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("MIG-a"), std::string::npos) << other.error().message;
  EXPECT_NE(other.error().message.find("gpu1/mig/gi3/ci0/access"), std::string::npos) << other.error().message;
  // Without the node's files, a clear error rather than nodes guessed.
  EXPECT_FALSE(allocate(gpus, std::vector<std::string>{"GPU-0000"}, s));
}

// NVIDIA_GPU_MEMORY_LIMIT is one value for every GPU of the container: given where it says the
// quota exactly (whole GPUs, one quota, whole MiB floored), never for MIG devices (the driver
// caps none) or quotas that differ.
TEST(Allocate, NvidiasLimitVariableIsGivenWhereOneValueSaysTheQuota) {
  using Q = std::vector<QuotaDevice>;
  EXPECT_EQ(nvidia_memory_limit_mib(Q{{"GPU-a", (10ull << 30) + 12345, 0, 0}}), 10u << 10) << "floored to whole MiB";
  EXPECT_EQ(nvidia_memory_limit_mib(Q{{"GPU-a", 10ull << 30, 0, 0}, {"GPU-b", 10ull << 30, 0, 0}}), 10u << 10);
  EXPECT_EQ(nvidia_memory_limit_mib(Q{{"GPU-a", 10ull << 30, 0, 0}, {"GPU-b", 20ull << 30, 0, 0}}), std::nullopt);
  EXPECT_EQ(nvidia_memory_limit_mib(Q{{"MIG-a", 10ull << 30, 0, 0}}), std::nullopt);
  EXPECT_EQ(nvidia_memory_limit_mib(Q{{"GPU-a", 1000, 0, 0}}), std::nullopt) << "under 1 MiB";
  EXPECT_EQ(nvidia_memory_limit_mib(Q{}), std::nullopt);
  // Through Allocate: a MIG replica's container gets none, nor does one of several quotas.
  auto mig = only("version: v1\nflags: {migStrategy: mixed}\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/mig-1g.20gb, replicas: 2}]\n",
                  "nvidia.com/mig-1g.20gb");
  std::vector<std::string> one{"MIG-a::0"};
  auto m = allocate(mig, one, {});
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->envs.contains("TESSERA_DEVICE_MEMORY_LIMIT_0"));
  EXPECT_FALSE(m->envs.contains("NVIDIA_GPU_MEMORY_LIMIT"));
  auto ts = only(kTimeSliced4, "nvidia.com/gpu");
  std::vector<std::string> uneven{"GPU-1111::0", "GPU-0000::1", "GPU-0000::3"};
  auto u = allocate(ts, uneven, {});
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->envs.contains("NVIDIA_GPU_MEMORY_LIMIT")) << "20 GiB on one GPU, 40 GiB on the other";
}

TEST(PreferredAllocation, NvlinkPairsFirst) {
  Inventory inv;
  // Four GPUs: 0-1 and 2-3 linked.
  for (uint32_t i = 0; i < 4; ++i) inv.gpus.push_back({i, "GPU-" + std::to_string(i), "A100", "", 80ull << 30, false, {}, {}, 0, i});
  inv.gpus[0].nvlink_peers = {1};
  inv.gpus[1].nvlink_peers = {0};
  inv.gpus[2].nvlink_peers = {3};
  inv.gpus[3].nvlink_peers = {2};
  auto rs = build_resources(inv, parse("version: v1\n"));
  ASSERT_TRUE(rs);
  const auto& r = (*rs)[0];
  std::vector<std::string> avail{"GPU-0", "GPU-1", "GPU-2", "GPU-3"};
  std::vector<std::string> must{"GPU-2"};
  auto p = preferred_allocation(r, inv, avail, must, 2, SharedPolicy::distributed);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (std::vector<std::string>{"GPU-2", "GPU-3"}));
  std::vector<std::string> none;
  std::vector<std::string> avail3{"GPU-0", "GPU-2", "GPU-3"};
  EXPECT_EQ(*preferred_allocation(r, inv, avail3, none, 2, SharedPolicy::distributed),
            (std::vector<std::string>{"GPU-2", "GPU-3"}));
  EXPECT_FALSE(preferred_allocation(r, inv, avail, none, 5, SharedPolicy::distributed));
}

TEST(PreferredAllocation, ReplicasSpreadOrPack) {
  auto r = only(R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 3}]
)", "nvidia.com/gpu");
  // GPU-0000::0 is already allocated (not available).
  std::vector<std::string> avail{"GPU-0000::1", "GPU-0000::2", "GPU-1111::0", "GPU-1111::1", "GPU-1111::2"};
  std::vector<std::string> none;
  EXPECT_EQ(*preferred_allocation(r, two_gpu_node(), avail, none, 1, SharedPolicy::distributed),
            (std::vector<std::string>{"GPU-1111::0"}));
  EXPECT_EQ(*preferred_allocation(r, two_gpu_node(), avail, none, 1, SharedPolicy::packed),
            (std::vector<std::string>{"GPU-0000::1"}));
  EXPECT_EQ(*preferred_allocation(r, two_gpu_node(), avail, none, 2, SharedPolicy::distributed),
            (std::vector<std::string>{"GPU-1111::0", "GPU-0000::1"}));
}

}  // namespace
}  // namespace tessera::sharing
