// The DRA driver's node side in process, over a simulated node opened
// through the real NVML loader: what the pool offers, prepare cutting
// exactly the placement the scheduler chose and unprepare destroying it, the
// claim's CDI spec and quota files, bad claims refused with nothing changed,
// a failure at every NVML call of a prepare leaving nothing behind (and the
// checkpoint never claiming more than exists), restarts adopting what the
// checkpoint names, and health as device taints.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <set>
#include <thread>

#include "cuda_quota/limits.hpp"
#include "dra/driver.hpp"
#include "mps/supervisor.hpp"
#include "nvml/device.hpp"
#include "reconciler/mig_apply.hpp"
#include "reconciler/node_state.hpp"
#include "support/run.hpp"
#include "support/sim_nvml.hpp"

namespace tessera::dra {
namespace {

using nlohmann::json;
using testing::run;
using testing::TempDir;

class Claims final : public ClaimSource {
 public:
  std::map<std::string, json> objects;  // "<ns>/<name>"
  // Called first (from the driver's thread), e.g. to hold an answer back as a slow API server does.
  std::function<void(const std::string& name)> before;
  Result<json> get_claim(const std::string& ns, const std::string& name) override {
    if (before) before(name);
    auto it = objects.find(ns + "/" + name);
    if (it == objects.end()) return fail(Errc::not_found, "resourceclaims \"" + name + "\" not found");
    return it->second;
  }
};

struct Result1 {
  Result1(std::string d, std::optional<std::string> m = std::nullopt, std::string r = "gpu")
      : device(std::move(d)), memory(std::move(m)), request(std::move(r)) {}
  std::string device;
  std::optional<std::string> memory;  // consumedCapacity.memory
  std::string request;
};

json claim_object(const std::string& uid, const std::string& name, const std::vector<Result1>& results,
                  const json& configs = json::array(), const std::string& pool = "node-a") {
  json r = json::array();
  for (const auto& x : results) {
    json one = {{"request", x.request}, {"driver", "gpu.nvidia.com"}, {"pool", pool}, {"device", x.device}};
    if (x.memory) {
      one["consumedCapacity"] = {{"memory", *x.memory}};
      one["shareID"] = uid.substr(0, 8) + "-share";
    }
    r.push_back(one);
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"namespace", "default"}, {"name", name}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", r}, {"config", configs}}}}}}}};
}

struct Node {
  TempDir dir;
  std::string node = dir.path() + "/node";
  Claims claims;
  std::optional<nvml::Session> session;
  DriverOptions options;
  std::unique_ptr<Driver> driver;

  explicit Node(const std::string& model = "A100-SXM4-80GB", bool mig = true, bool shares = false,
                const std::vector<std::string>& sim_args = {}) {
    std::vector<std::string> create{TESSERA_BIN, "sim", "create", node, "--gpu", model, "--count", "2"};
    if (mig) create.push_back("--mig");
    create.insert(create.end(), sim_args.begin(), sim_args.end());
    auto made = run(create);
    EXPECT_EQ(made.exit_code, 0) << made.err;
    // The node's directory as a driver root: the driver's libraries where a
    // distribution puts them.
    std::filesystem::create_directories(node + "/usr/lib/x86_64-linux-gnu");
    std::ofstream(node + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") << "not a library";
    auto s = testing::open_simulated_nvml(TESSERA_SIM_LIBRARY, node);
    EXPECT_TRUE(s) << s.error().message;
    if (s) session.emplace(std::move(*s));
    options.node = "node-a";
    options.state_dir = dir.path() + "/state";
    options.cdi.write_specs = true;
    options.cdi.spec_dir = dir.path() + "/cdi";
    options.cdi.driver_root = "/host-driver";
    options.cdi.container_driver_root = node;
    options.cdi.names.vendor = "k8s.gpu.nvidia.com";
    options.quota.library_dir = dir.path() + "/lib";
    options.quota.ledger_root = dir.path() + "/ledgers";
    options.memory_shares = shares;
    options.sysfs = dir.path() + "/sys";  // none unless a test makes one: never this machine's own
    options.boot_id_file = node + "/proc/sys/kernel/random/boot_id";  // the simulated node's boot
  }
  Driver& start() {
    driver.reset();
    auto d = Driver::start(*session, options, claims);
    if (!d) throw std::runtime_error("the driver does not start: " + d.error().message);
    driver = std::move(*d);
    return *driver;
  }
  // Every GPU instance on the node: "<gpu>:<profile>@<start>".
  std::set<std::string> instances() const {
    std::set<std::string> out;
    auto state = reconciler::read_node_state(*session);
    EXPECT_TRUE(state) << state.error().message;
    if (state)
      for (const auto& g : *state)
        for (const auto& i : g.state.instances)
          out.insert(std::to_string(g.state.index) + ":" + g.state.model->profiles[i.placed.profile].name + "@" +
                     std::to_string(i.placed.start));
    return out;
  }
  std::string add(const std::string& uid, const std::string& name, const std::vector<Result1>& results,
                  const json& configs = json::array()) {
    claims.objects["default/" + name] = claim_object(uid, name, results, configs);
    return uid;
  }
  PrepareOutcome prepare(const std::string& uid, const std::string& name) {
    return driver->prepare({{uid, "default", name}}).at(uid);
  }
  std::string unprepare(const std::string& uid, const std::string& name) {
    return driver->unprepare({{uid, "default", name}}).at(uid);
  }
  json spec_of(const std::string& uid) const {
    std::ifstream in(options.cdi.spec_dir + "/k8s.gpu.nvidia.com-claim_" + uid + ".json");
    if (!in) return nullptr;
    return json::parse(in);
  }
};

// Points into `pool`: a temporary pool (Driver::pool() returns a snapshot) would leave it dangling.
const sharing::dra::Device* find(PoolState&& pool, const std::string& name) = delete;
const sharing::dra::Device* find(const PoolState& pool, const std::string& name) {
  for (const auto& d : pool.devices)
    if (d.name == name) return &d;
  return nullptr;
}

constexpr const char* kUid1 = "11111111-1111-1111-1111-111111111111";
constexpr const char* kUid2 = "22222222-2222-2222-2222-222222222222";

TEST(DraDriver, OffersEveryPlacementOfAMigGpuAndNoWholeGpuOnAnA100InMigMode) {
  Node n;
  auto& d = n.start();
  auto pool = d.pool();
  ASSERT_EQ(pool.counter_sets.size(), 2u);
  EXPECT_EQ(pool.counter_sets[0].name, "gpu-0-counter-set");
  EXPECT_TRUE(find(pool, "gpu-0-mig-1g10gb-19-6"));
  EXPECT_TRUE(find(pool, "gpu-1-mig-7g80gb-0-0"));
  EXPECT_FALSE(find(pool, "gpu-0"));  // an A100 cannot leave MIG mode without a reset
  EXPECT_TRUE(d.start_report().empty());
}

TEST(DraDriver, PrepareCutsExactlyThePlacementChosenAndUnprepareDestroysIt) {
  Node n;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}});
  auto out = n.prepare(kUid1, "c1");
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(out.devices.size(), 1u);
  EXPECT_EQ(out.devices[0].device, "gpu-0-mig-3g40gb-9-4");
  EXPECT_EQ(out.devices[0].pool, "node-a");
  ASSERT_EQ(out.devices[0].cdi_ids.size(), 1u);
  EXPECT_EQ(out.devices[0].cdi_ids[0], std::string("k8s.gpu.nvidia.com/claim=") + kUid1 + "-gpu-0-mig-3g40gb-9-4");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"}));
  // The claim's spec: its device with the GPU's node and the instance's two capability nodes.
  auto spec = n.spec_of(kUid1);
  ASSERT_FALSE(spec.is_null());
  EXPECT_EQ(spec["kind"], "k8s.gpu.nvidia.com/claim");
  ASSERT_EQ(spec["devices"].size(), 1u);
  std::vector<std::string> nodes;
  for (const auto& dn : spec["devices"][0]["containerEdits"]["deviceNodes"]) nodes.push_back(dn["path"]);
  ASSERT_EQ(nodes.size(), 3u) << spec.dump(2);
  EXPECT_EQ(nodes[0], "/dev/nvidia0");
  EXPECT_EQ(nodes[1].rfind("/dev/nvidia-caps/nvidia-cap", 0), 0u);
  // The placement is taken: the pool says so, and the checkpoint names it.
  auto cp = n.driver->checkpoint();
  ASSERT_EQ(cp.instances.count("gpu-0-mig-3g40gb-9-4"), 1u);
  EXPECT_EQ(cp.instances["gpu-0-mig-3g40gb-9-4"].state, CheckpointInstance::State::ready);
  EXPECT_EQ(cp.claims[kUid1].state, CheckpointClaim::State::prepared);

  // Again (the kubelet retries): the same answer, nothing new cut.
  auto again = n.prepare(kUid1, "c1");
  EXPECT_EQ(again.error, "");
  EXPECT_EQ(again.devices[0].cdi_ids, out.devices[0].cdi_ids);
  EXPECT_EQ(n.instances().size(), 1u);

  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  EXPECT_TRUE(n.instances().empty());
  EXPECT_TRUE(n.spec_of(kUid1).is_null());
  EXPECT_TRUE(n.driver->checkpoint().claims.empty());
  EXPECT_TRUE(n.driver->checkpoint().instances.empty());
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");  // idempotent
}

// The driver's metrics count what it did: prepares and unprepares by result
// with their latency, the claims prepared and instances held now, and the
// instances cut and destroyed.
TEST(DraDriver, MetricsCountPreparesUnpreparesAndCuts) {
  Node n;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}});
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  n.add(kUid2, "bad", {{"gpu-0-mig-no-such-device"}});
  EXPECT_NE(n.prepare(kUid2, "bad").error, "");
  std::string text = n.driver->metrics_text();
  auto has = [&](const std::string& line) { return text.find("\n" + line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("tessera_dra_prepare_claims_total{result=\"ok\"} 1")) << text;
  EXPECT_TRUE(has("tessera_dra_prepare_claims_total{result=\"error\"} 1")) << text;
  EXPECT_TRUE(has("tessera_dra_prepare_seconds_count 2")) << text;
  EXPECT_TRUE(has("tessera_dra_prepare_seconds_bucket{le=\"+Inf\"} 2")) << text;
  EXPECT_TRUE(has("tessera_dra_prepared_claims 1")) << text;
  EXPECT_TRUE(has("tessera_dra_mig_instances 1")) << text;
  EXPECT_TRUE(has("tessera_dra_mig_instances_total{action=\"cut\"} 1")) << text;
  EXPECT_TRUE(has("# TYPE tessera_dra_prepare_seconds histogram")) << text;
  ASSERT_EQ(n.unprepare(kUid1, "c1"), "");
  text = n.driver->metrics_text();
  EXPECT_TRUE(has("tessera_dra_unprepare_claims_total{result=\"ok\"} 1")) << text;
  EXPECT_TRUE(has("tessera_dra_prepared_claims 0")) << text;
  EXPECT_TRUE(has("tessera_dra_mig_instances 0")) << text;
  EXPECT_TRUE(has("tessera_dra_mig_instances_total{action=\"destroyed\"} 1")) << text;
}

// The driver killed between NVML creating the instance and the checkpoint
// recording it (a crash fault: the simulated call makes its change, then the
// process exits with 137 at once, as a SIGKILL would end it): the next start
// destroys what the cut-short prepare made, and the kubelet's retry cuts it
// again from scratch. The same for a kill inside the compute instance's create.
TEST(DraDriver, AKillBetweenCreateAndCheckpointIsUndoneAtTheNextStart) {
  for (const char* function : {"nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceCreateComputeInstance"}) {
    SCOPED_TRACE(function);
    Node n;
    n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}});
    auto planned = run({TESSERA_BIN, "sim", "fault", n.node, "--function", function, "--crash"});
    ASSERT_EQ(planned.exit_code, 0) << planned.err;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // the driver's process: it dies inside the create
      try {
        n.start();
        n.prepare(kUid1, "c1");
      } catch (...) {
      }
      std::_Exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 137) << "the crash fault did not fire";
    EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"}));  // made, and never recorded as made
    auto& d = n.start();
    EXPECT_TRUE(n.instances().empty());
    EXPECT_TRUE(d.checkpoint().claims.empty());
    EXPECT_TRUE(d.checkpoint().instances.empty());
    bool said = false;
    for (const auto& line : d.start_report()) said = said || line == "checkpoint: claim default/c1 was cut short; what it had made is undone";
    EXPECT_TRUE(said) << ::testing::PrintToString(d.start_report());
    // The retry: cut again, once.
    ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
    EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"}));
    EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
    EXPECT_TRUE(n.instances().empty());
  }
}

// NVIDIA's attributes as its driver reads them, from NVML: the simulated
// H100's brand (which no catalog holds), architecture and compute capability.
TEST(DraDriver, BrandArchitectureAndComputeCapabilityComeFromNvml) {
  Node n("H100-SXM5-80GB", /*mig=*/false);
  const auto pool = n.start().pool();
  const auto* gpu = find(pool, "gpu-0");
  ASSERT_TRUE(gpu);
  EXPECT_EQ(std::get<std::string>(gpu->attributes.at("brand")), "Nvidia");
  EXPECT_EQ(std::get<std::string>(gpu->attributes.at("architecture")), "Hopper");
  EXPECT_EQ(std::get<sharing::dra::Version>(gpu->attributes.at("cudaComputeCapability")).value, "9.0.0");
}

// Kubernetes' standard attributes of place, read from sysfs as the kernel lays
// it out: GPU 0 under root complex pci0000:00 on NUMA node 1, GPU 1 under
// pci0000:80 with no NUMA node (-1); MIG devices carry their GPU's. Where
// sysfs says nothing, nothing is published.
TEST(DraDriver, PcieRootAndNumaNodeComeFromSysfs) {
  Node n("A100-SXM4-80GB", /*mig=*/true);
  auto& bare = n.start();
  const auto plain = bare.pool();
  const auto* plain_mig = find(plain, "gpu-0-mig-1g10gb-19-0");
  ASSERT_TRUE(plain_mig);
  const auto bdf0 = std::get<std::string>(plain_mig->attributes.at("resource.kubernetes.io/pciBusID"));
  EXPECT_FALSE(plain_mig->attributes.contains("resource.kubernetes.io/pcieRoot"));
  EXPECT_FALSE(plain_mig->attributes.contains("resource.kubernetes.io/numaNode"));
  std::string bdf1;
  for (const auto& d : plain.devices)
    if (d.name.starts_with("gpu-1-"))
      bdf1 = std::get<std::string>(d.attributes.at("resource.kubernetes.io/pciBusID"));
  ASSERT_FALSE(bdf1.empty());
  namespace fs = std::filesystem;
  const fs::path sys = n.options.sysfs;
  auto device = [&](const std::string& root, const std::string& bdf, const std::string& numa) {
    const fs::path dir = sys / "devices" / root / (root.substr(3) + ":01.0") / bdf;
    fs::create_directories(dir);
    std::ofstream(dir / "numa_node") << numa << "\n";
    fs::create_directories(sys / "bus/pci/devices");
    fs::create_symlink(fs::path("../../..") / fs::relative(dir, sys), sys / "bus/pci/devices" / bdf);
  };
  device("pci0000:00", bdf0, "1");
  device("pci0000:80", bdf1, "-1");
  auto& d = n.start();
  const auto pool = d.pool();
  for (const auto& dev : pool.devices) {
    SCOPED_TRACE(dev.name);
    const bool first = dev.name.starts_with("gpu-0-");
    ASSERT_TRUE(dev.attributes.contains("resource.kubernetes.io/pcieRoot"));
    EXPECT_EQ(std::get<std::string>(dev.attributes.at("resource.kubernetes.io/pcieRoot")), first ? "pci0000:00" : "pci0000:80");
    EXPECT_EQ(dev.attributes.contains("resource.kubernetes.io/numaNode"), first);
    if (first) {
      EXPECT_EQ(std::get<int64_t>(dev.attributes.at("resource.kubernetes.io/numaNode")), 1);
    }
  }
  // A link that does not lead into /sys/devices/pci*: no root is made up.
  fs::remove(sys / "bus/pci/devices" / bdf1);
  fs::create_symlink("../../../elsewhere/" + bdf1, sys / "bus/pci/devices" / bdf1);
  auto& again = n.start();
  for (const auto& dev : again.pool().devices)
    if (dev.name.starts_with("gpu-1-")) {
      EXPECT_FALSE(dev.attributes.contains("resource.kubernetes.io/pcieRoot")) << dev.name;
    }
}

// Destroyed by UUID: when someone destroys the instance tessera cut and makes
// another in its place, tessera does not adopt it, and unprepare leaves it.
TEST(DraDriver, AnInstanceMadeInPlaceOfOursIsNeitherAdoptedNorDestroyed) {
  Node n;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}});
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  const std::string ours = n.driver->checkpoint().instances.at("gpu-0-mig-3g40gb-9-4").uuid;
  ASSERT_EQ(ours.rfind("MIG-", 0), 0u);
  // Behind the driver's back: destroyed and made again at the same place.
  auto state = reconciler::read_node_state(*n.session);
  ASSERT_TRUE(state);
  const auto& gpu = (*state)[0].state;
  ASSERT_EQ(gpu.instances.size(), 1u);
  const auto& inst = gpu.instances[0];
  const GpuModel& model = *gpu.model;
  using mig::OpKind;
  for (const auto& op : {mig::Operation{OpKind::destroy_compute_instances, 0, false, inst.placed.profile, 4, inst.gi_id, inst.uuid},
                         mig::Operation{OpKind::destroy_gpu_instance, 0, false, inst.placed.profile, 4, inst.gi_id, inst.uuid}})
    ASSERT_TRUE(reconciler::run_operation(*n.session, model, op));
  auto gi = reconciler::run_operation(*n.session, model, {OpKind::create_gpu_instance, 0, false, inst.placed.profile, 4, 0, ""});
  ASSERT_TRUE(gi);
  ASSERT_TRUE(reconciler::run_operation(*n.session, model, {OpKind::create_compute_instance, 0, false, inst.placed.profile, 4, *gi, ""}));
  ASSERT_TRUE(n.driver->refresh());
  EXPECT_EQ(n.driver->checkpoint().instances.at("gpu-0-mig-3g40gb-9-4").uuid, ours) << "the other's UUID was adopted";
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"})) << "the other's instance was destroyed";
  EXPECT_TRUE(n.driver->checkpoint().instances.empty());
}

TEST(DraDriver, AClaimOfTwoPlacementsOnTwoGpusIsCutWhole) {
  Node n;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-1g10gb-19-6", {}, "a"}, {"gpu-1-mig-4g40gb-5-0", {}, "b"}});
  auto out = n.prepare(kUid1, "c1");
  ASSERT_EQ(out.error, "");
  EXPECT_EQ(out.devices.size(), 2u);
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:1g.10gb@6", "1:4g.40gb@0"}));
  EXPECT_EQ(n.spec_of(kUid1)["devices"].size(), 2u);
}

TEST(DraDriver, BadClaimsAreRefusedWithAReasonAndChangeNothing) {
  Node n;
  n.start();
  struct Case {
    std::string why;
    json claim;
    std::string expect;
  };
  const json bad_config = json::array({{{"source", "FromClaim"},
                                        {"requests", json::array()},
                                        {"opaque", {{"driver", "gpu.nvidia.com"},
                                                    {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                                                    {"kind", "MigDeviceConfig"},
                                                                    {"sharing", {{"strategy", "Sometimes"}}}}}}}}});
  const json gpu_config_on_mig = json::array({{{"source", "FromClaim"},
                                               {"opaque", {{"driver", "gpu.nvidia.com"},
                                                           {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                                                           {"kind", "GpuConfig"}}}}}}});
  std::vector<Case> cases{
      {"an unknown strategy", claim_object(kUid1, "c", {{"gpu-0-mig-1g10gb-19-0"}}, bad_config), "Sometimes"},
      {"a GpuConfig on a MIG device", claim_object(kUid1, "c", {{"gpu-0-mig-1g10gb-19-0"}}, gpu_config_on_mig), "GpuConfig"},
      {"a device the node does not have", claim_object(kUid1, "c", {{"gpu-7-mig-1g10gb-19-0"}}), "not one this node offers"},
      {"another node's pool only", claim_object(kUid1, "c", {{"gpu-0-mig-1g10gb-19-0"}}, json::array(), "node-b"), "no device"},
      {"a claim replaced under the same name", claim_object(kUid2, "c", {{"gpu-0-mig-1g10gb-19-0"}}), "created again"},
      {"two overlapping placements", claim_object(kUid1, "c", {{"gpu-0-mig-4g40gb-5-0"}, {"gpu-0-mig-1g10gb-19-0"}}), "no longer fits"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    n.claims.objects["default/c"] = c.claim;
    auto out = n.prepare(kUid1, "c");
    EXPECT_NE(out.error.find(c.expect), std::string::npos) << out.error;
    EXPECT_TRUE(out.devices.empty());
    EXPECT_TRUE(n.instances().empty());
    EXPECT_TRUE(n.driver->checkpoint().claims.empty());
    EXPECT_TRUE(n.driver->checkpoint().instances.empty());
    EXPECT_TRUE(n.spec_of(kUid1).is_null());
  }
  // A missing claim, and other claims untouched by a bad one in the same call.
  n.add(kUid2, "good", {{"gpu-1-mig-1g10gb-19-6"}});
  n.claims.objects.erase("default/c");
  auto both = n.driver->prepare({{kUid1, "default", "c"}, {kUid2, "default", "good"}});
  EXPECT_NE(both.at(kUid1).error.find("cannot read the ResourceClaim"), std::string::npos) << both.at(kUid1).error;
  EXPECT_EQ(both.at(kUid2).error, "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"1:1g.10gb@6"}));
}

TEST(DraDriver, APlacementAnotherWriterTookIsRefusedNotForced) {
  Node n;
  n.start();
  // Another writer cuts a 4g.40gb at 0 behind the driver's back.
  const auto& m = *Catalog::builtin().find("A100-SXM4-80GB");
  const uint32_t four = static_cast<uint32_t>(m.profile("4g.40gb") - m.profiles.data());
  auto gi = reconciler::run_operation(*n.session, m, {mig::OpKind::create_gpu_instance, 0, false, four, 0, 0, ""});
  ASSERT_TRUE(gi) << gi.error().message;
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-0"}});
  auto out = n.prepare(kUid1, "c1");
  EXPECT_NE(out.error.find("no longer fits GPU 0"), std::string::npos) << out.error;
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:4g.40gb@0"}));
  // Once read again, the pool serves the foreign instance as it is and
  // offers nothing that overlaps it.
  ASSERT_TRUE(n.driver->refresh());
  auto pool = n.driver->pool();
  const auto* fixed = find(pool, "gpu-0-mig-4g40gb-5-0");
  ASSERT_TRUE(fixed);
  EXPECT_TRUE(fixed->fixed);
  EXPECT_FALSE(find(pool, "gpu-0-mig-3g40gb-9-0"));
  EXPECT_TRUE(find(pool, "gpu-0-mig-3g40gb-9-4"));
}

TEST(DraDriver, ARestartAdoptsWhatTheCheckpointNamesAndReportsTheRest) {
  Node n;
  n.start();
  n.add(kUid1, "c1", {{"gpu-1-mig-2g20gb-14-2"}});
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  const auto& m = *Catalog::builtin().find("A100-SXM4-80GB");
  const uint32_t seven = static_cast<uint32_t>(m.profile("7g.80gb") - m.profiles.data());
  ASSERT_TRUE(reconciler::run_operation(*n.session, m, {mig::OpKind::create_gpu_instance, 0, false, seven, 0, 0, ""}));
  auto& d = n.start();  // a new process: the checkpoint is all it knows
  std::string report;
  for (const auto& line : d.start_report()) report += line + "\n";
  EXPECT_NE(report.find("adopted gpu-1-mig-2g20gb-14-2"), std::string::npos) << report;
  EXPECT_NE(report.find("7g.80gb@0 was not cut by tessera"), std::string::npos) << report;
  // The prepared claim answers as before; unprepare destroys only its instance.
  EXPECT_EQ(n.prepare(kUid1, "c1").error, "");
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:7g.80gb@0"}));
}

// A reboot takes the MIG instances, the CDI specs (a tmpfs) and MIG mode
// with it while the checkpoint on disk says "prepared": the driver sees the
// new boot id and prepares the claim again when the kubelet asks (the same
// CDI names, a new instance), never answering from the checkpoint of another
// boot (NVIDIA's DRA driver #951).
TEST(DraDriver, AfterARebootTheKubeletsPrepareCutsAndWritesEverythingAgain) {
  Node n("H100-SXM5-80GB", /*mig=*/false);
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-1g10gb-19-6"}});
  const auto before = n.prepare(kUid1, "c1");
  ASSERT_EQ(before.error, "");
  const std::string cut = n.driver->checkpoint().instances.at("gpu-0-mig-1g10gb-19-6").uuid;
  const std::string boot = n.driver->checkpoint().boot_id;
  ASSERT_FALSE(boot.empty()) << "the checkpoint records no boot";
  n.driver.reset();  // the node goes down with the driver
  auto rebooted = run({TESSERA_BIN, "sim", "reboot", n.node});
  ASSERT_EQ(rebooted.exit_code, 0) << rebooted.err;
  std::filesystem::remove_all(n.options.cdi.spec_dir);  // a tmpfs
  ASSERT_TRUE(n.instances().empty());
  auto& d = n.start();
  std::string report;
  for (const auto& line : d.start_report()) report += line + "\n";
  EXPECT_NE(report.find("the node rebooted since the checkpoint was written (boot " + boot), std::string::npos) << report;
  EXPECT_TRUE(d.checkpoint().claims.empty()) << "a claim of the previous boot is still recorded as prepared";
  EXPECT_NE(d.checkpoint().boot_id, boot);
  const auto after = n.prepare(kUid1, "c1");
  ASSERT_EQ(after.error, "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:1g.10gb@6"})) << "the claim's instance was not cut again";
  ASSERT_EQ(after.devices.size(), 1u);
  EXPECT_EQ(after.devices[0].cdi_ids, before.devices[0].cdi_ids);
  EXPECT_TRUE(n.spec_of(kUid1).is_object()) << "the claim's CDI spec was not written again";
  EXPECT_NE(d.checkpoint().instances.at("gpu-0-mig-1g10gb-19-6").uuid, cut);
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  EXPECT_TRUE(n.instances().empty());
}

// Without a reboot: a prepared claim whose CDI spec was deleted, or whose
// MIG instance someone destroyed, is prepared again rather than answered
// with names that no longer resolve.
TEST(DraDriver, APreparedClaimWhoseSpecOrInstanceIsGoneIsPreparedAgain) {
  Node n;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}});
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  std::filesystem::remove(n.options.cdi.spec_dir + "/k8s.gpu.nvidia.com-claim_" + std::string(kUid1) + ".json");
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  EXPECT_TRUE(n.spec_of(kUid1).is_object()) << "answered from the checkpoint without its spec";
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"}));
  // The instance destroyed behind the driver's back.
  auto state = reconciler::read_node_state(*n.session);
  ASSERT_TRUE(state);
  const auto& gpu = (*state)[0].state;
  ASSERT_EQ(gpu.instances.size(), 1u);
  const auto& inst = gpu.instances[0];
  using mig::OpKind;
  for (const auto& op : {mig::Operation{OpKind::destroy_compute_instances, 0, false, inst.placed.profile, 4, inst.gi_id, inst.uuid},
                         mig::Operation{OpKind::destroy_gpu_instance, 0, false, inst.placed.profile, 4, inst.gi_id, inst.uuid}})
    ASSERT_TRUE(reconciler::run_operation(*n.session, *gpu.model, op));
  ASSERT_TRUE(n.instances().empty());
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"})) << "answered from the checkpoint without its instance";
  EXPECT_NE(n.driver->checkpoint().instances.at("gpu-0-mig-3g40gb-9-4").uuid, inst.uuid);
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  EXPECT_TRUE(n.instances().empty());
}

// Admin access (resource.k8s.io/v1, GA in 1.36): the scheduler gives an
// admin claim devices that ordinary claims hold; tessera gives it them as
// they are, without counting it as their user: no refusal of the workload
// beside it, nothing cut for it (a placement nobody cut gives the admin its
// GPU's own nodes), and nothing destroyed when it goes.
TEST(DraDriver, AnAdminAccessClaimSharesDevicesWithoutUsingThemOrCuttingAny) {
  constexpr const char* kAdmin1 = "aaaaaaaa-0000-0000-0000-000000000001";
  constexpr const char* kAdmin2 = "aaaaaaaa-0000-0000-0000-000000000002";
  Node n;
  n.start();
  auto admin = [&](const std::string& uid, const std::string& name, const std::string& device) {
    n.add(uid, name, {{device}});
    n.claims.objects["default/" + name]["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = true;
  };
  auto nodes = [&](const std::string& uid) {
    std::set<std::string> out;
    const auto spec = n.spec_of(uid);
    if (!spec.is_object()) return out;
    for (const auto& d : spec["devices"])
      for (const auto& node : d["containerEdits"].value("deviceNodes", json::array())) out.insert(node["path"]);
    return out;
  };
  auto caps = [](const std::set<std::string>& s) {
    return std::count_if(s.begin(), s.end(), [](const std::string& p) { return p.starts_with("/dev/nvidia-caps/"); });
  };
  n.add(kUid1, "work-1", {{"gpu-0-mig-3g40gb-9-4"}});
  ASSERT_EQ(n.prepare(kUid1, "work-1").error, "");
  admin(kAdmin1, "admin-1", "gpu-0-mig-3g40gb-9-4");
  ASSERT_EQ(n.prepare(kAdmin1, "admin-1").error, "") << "the admin claim was refused beside the workload";
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"}));
  EXPECT_EQ(caps(nodes(kAdmin1)), 2) << "the admin gets the instance as it is";
  // A placement nobody cut: the GPU's own nodes, nothing cut.
  admin(kAdmin2, "admin-2", "gpu-1-mig-1g10gb-19-6");
  ASSERT_EQ(n.prepare(kAdmin2, "admin-2").error, "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"})) << "an admin claim cut an instance";
  const auto whole = nodes(kAdmin2);
  EXPECT_EQ(caps(whole), 0);
  EXPECT_TRUE(whole.contains("/dev/nvidia1")) << "the admin of GPU 1's placement does not get GPU 1";
  // The workload on the admin's placement is neither refused nor joined to it.
  n.add(kUid2, "work-2", {{"gpu-1-mig-1g10gb-19-6"}});
  ASSERT_EQ(n.prepare(kUid2, "work-2").error, "") << "a workload was refused beside an admin claim";
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4", "1:1g.10gb@6"}));
  // Admins go: nothing destroyed. Workloads go: everything.
  EXPECT_EQ(n.unprepare(kAdmin1, "admin-1"), "");
  EXPECT_EQ(n.unprepare(kAdmin2, "admin-2"), "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4", "1:1g.10gb@6"}));
  EXPECT_EQ(n.unprepare(kUid1, "work-1"), "");
  EXPECT_EQ(n.unprepare(kUid2, "work-2"), "");
  EXPECT_TRUE(n.instances().empty());
  // A malformed flag is refused with the reason.
  admin(kAdmin1, "admin-1", "gpu-0");
  n.claims.objects["default/admin-1"]["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = "yes";
  const auto bad = n.prepare(kAdmin1, "admin-1");
  EXPECT_NE(bad.error.find("adminAccess is \"yes\", not true or false"), std::string::npos) << bad.error;
}

TEST(DraDriver, ACheckpointThatIsNotOursStopsTheStart) {
  Node n;
  std::filesystem::create_directories(n.options.state_dir);
  std::ofstream(n.options.state_dir + "/checkpoint.json") << "{\"version\": 1, \"node\": \"node-z\"}";
  auto d = Driver::start(*n.session, n.options, n.claims);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("node node-z's"), std::string::npos) << d.error().message;
  std::ofstream(n.options.state_dir + "/checkpoint.json") << "{not json";
  d = Driver::start(*n.session, n.options, n.claims);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("cannot be read"), std::string::npos) << d.error().message;
}

// Beside NVIDIA's DRA driver: its checkpoint.json in the plugin's directory
// is left alone and tessera's state goes to a directory of its own, where a
// driver starts; tessera's own checkpoint from before moves there once.
TEST(DraDriver, TheDefaultStateDirectoryLeavesNvidiasCheckpointAlone) {
  Node n;
  const std::string plugin = n.options.state_dir + "-plugin";
  std::filesystem::create_directories(plugin);
  const std::string nvidias = R"({"checksum": 1234, "v1": {"preparedClaims": {}}})";
  std::ofstream(plugin + "/checkpoint.json") << nvidias;
  const std::string dir = default_state_dir(plugin, n.options.driver);
  EXPECT_EQ(dir, plugin + "/tessera");
  n.options.state_dir = dir;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}});
  EXPECT_EQ(n.prepare(kUid1, "c1").error, "");
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint.json"));
  std::ifstream in(plugin + "/checkpoint.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), nvidias) << "NVIDIA's checkpoint was changed";
  EXPECT_EQ(default_state_dir(plugin, n.options.driver), dir) << "the second start: the same directory";

  // tessera's checkpoint at the old path (its own format and driver) moves once.
  const std::string old_plugin = n.options.state_dir + "-old";
  std::filesystem::create_directories(old_plugin);
  std::filesystem::copy_file(dir + "/checkpoint.json", old_plugin + "/checkpoint.json");
  EXPECT_EQ(default_state_dir(old_plugin, n.options.driver), old_plugin + "/tessera");
  EXPECT_FALSE(std::filesystem::exists(old_plugin + "/checkpoint.json"));
  EXPECT_TRUE(std::filesystem::exists(old_plugin + "/tessera/checkpoint.json"));
  // Another driver's name in it: not ours, left.
  const std::string other = n.options.state_dir + "-other";
  std::filesystem::create_directories(other);
  std::filesystem::copy_file(dir + "/checkpoint.json", other + "/checkpoint.json");
  EXPECT_EQ(default_state_dir(other, "gpu.example.com"), other + "/tessera");
  EXPECT_TRUE(std::filesystem::exists(other + "/checkpoint.json"));
}

// Every NVML call a prepare makes, failed once at its Nth call: the prepare
// fails with the driver's error, nothing it cut is left, the checkpoint names
// no claim and no instance, and the kubelet's retry succeeds.
TEST(DraDriver, AFailureAtAnyNvmlCallOfAPrepareLeavesNothingAndTheRetrySucceeds) {
  const std::vector<std::string> functions{
      "nvmlDeviceGetGpuInstanceProfileInfo", "nvmlDeviceGetGpuInstanceProfileInfoV",
      "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceGetInfo", "nvmlDeviceGetGpuInstanceById",
      "nvmlGpuInstanceGetComputeInstanceProfileInfo", "nvmlGpuInstanceCreateComputeInstance", "nvmlDeviceGetGpuInstances", "nvmlGpuInstanceGetComputeInstances",
      "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetUUID"};
  size_t injected = 0, failed = 0;
  for (const auto& fn : functions) {
    for (int nth = 1; nth < 30; ++nth) {
      SCOPED_TRACE(fn + " call " + std::to_string(nth));
      Node n;
      n.start();
      n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}});
      ASSERT_EQ(run({TESSERA_BIN, "sim", "fault", n.node, "--function", fn, "--nth", std::to_string(nth), "--error",
                     "NVML_ERROR_UNKNOWN"}).exit_code, 0);
      auto out = n.prepare(kUid1, "c1");
      auto show = json::parse(run({TESSERA_BIN, "sim", "show", n.node}).out);
      if (!show["faults"].empty()) break;  // this call happens fewer than nth times
      ++injected;
      if (!out.error.empty()) {
        ++failed;
        EXPECT_TRUE(n.instances().empty()) << out.error;
        EXPECT_TRUE(n.driver->checkpoint().claims.empty()) << out.error;
        EXPECT_TRUE(n.driver->checkpoint().instances.empty()) << out.error;
        EXPECT_TRUE(n.spec_of(kUid1).is_null());
      }
      auto retry = n.prepare(kUid1, "c1");
      ASSERT_EQ(retry.error, "") << "first: " << out.error;
      EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"}));
    }
  }
  EXPECT_GT(injected, 10u);
  EXPECT_GT(failed, 5u);
}

// A destroy that fails (a process still on the instance, a driver error):
// unprepare says why, the checkpoint keeps the instance as being destroyed
// (so a restart finishes it), and the retry converges.
TEST(DraDriver, AFailedDestroyIsKeptAndFinishedByTheRetryOrARestart) {
  for (const std::string fn : {"nvmlGpuInstanceDestroy", "nvmlComputeInstanceDestroy"}) {
    SCOPED_TRACE(fn);
    Node n;
    n.start();
    n.add(kUid1, "c1", {{"gpu-0-mig-1g10gb-19-6"}});
    ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
    ASSERT_EQ(run({TESSERA_BIN, "sim", "fault", n.node, "--function", fn, "--nth", "1", "--error", "NVML_ERROR_IN_USE"})
                  .exit_code, 0);
    auto err = n.unprepare(kUid1, "c1");
    EXPECT_NE(err.find("cannot destroy"), std::string::npos) << err;
    auto cp = n.driver->checkpoint();
    ASSERT_EQ(cp.instances.count("gpu-0-mig-1g10gb-19-6"), 1u);
    EXPECT_EQ(cp.instances["gpu-0-mig-1g10gb-19-6"].state, CheckpointInstance::State::destroying);
    EXPECT_EQ(n.instances().size(), 1u);
    // Meanwhile the instance is withdrawn: neither it nor a placement on its slice is offered, and its
    // slice is out of the GPU's counters, so the scheduler picks nothing there.
    {
      const auto pool = n.driver->pool();
      EXPECT_FALSE(find(pool, "gpu-0-mig-1g10gb-19-6"));
      EXPECT_FALSE(find(pool, "gpu-0-mig-2g20gb-14-6")) << "overlaps the instance being destroyed";
      EXPECT_FALSE(find(pool, "gpu-0")) << "an instance is on the GPU";
      EXPECT_TRUE(find(pool, "gpu-0-mig-1g10gb-19-5"));
      ASSERT_FALSE(pool.counter_sets.empty());
      for (const auto& c : pool.counter_sets[0].counters) {
        if (c.name == "memory-slice-6") {
          EXPECT_EQ(c.value, 0) << "slice 6 is taken out of the counters";
        }
      }
    }
    auto& restarted = n.start();
    EXPECT_TRUE(n.instances().empty());  // the restart finished the destroy
    EXPECT_TRUE(restarted.checkpoint().instances.empty());
    EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
    EXPECT_TRUE(restarted.checkpoint().claims.empty());
  }
}

TEST(DraDriver, MemorySharesOfAWholeGpuGetTheirOwnQuotaFiles) {
  Node n("A100-SXM4-80GB", /*mig=*/false, /*shares=*/true);
  auto& d = n.start();
  const auto pool = d.pool();  // a snapshot: find points into it
  const auto* whole = find(pool, "gpu-0");
  ASSERT_TRUE(whole);
  EXPECT_TRUE(whole->allow_multiple_allocations);
  n.add(kUid1, "a", {{"gpu-0", "20Gi"}});
  n.add(kUid2, "b", {{"gpu-0", "30Gi"}});
  ASSERT_EQ(n.prepare(kUid1, "a").error, "");
  ASSERT_EQ(n.prepare(kUid2, "b").error, "");
  // Read as the library in the container reads it: one device, the share's bytes, the claim's key.
  const std::string dir = n.options.quota.ledger_root + "/dra-" + kUid1;
  std::ifstream limits(dir + "/limits");
  std::string text((std::istreambuf_iterator<char>(limits)), {});
  quota::Limits parsed;
  char why[256] = {};
  ASSERT_TRUE(quota::parse_limits(text.data(), text.size(), parsed, why, sizeof why)) << why << "\n" << text;
  EXPECT_EQ(parsed.device_count, 1u);
  EXPECT_EQ(std::string(parsed.key), "dra-" + std::string(kUid1));
  EXPECT_EQ(std::string(parsed.devices[0].uuid).rfind("GPU-", 0), 0u) << text;
  EXPECT_EQ(parsed.devices[0].quota, 20ull << 30);
  // The ledger exists before any container does, made by the driver (not an empty file a tenant could fill).
  EXPECT_GT(std::filesystem::file_size(dir + "/ledger"), 0u);
  auto spec = n.spec_of(kUid2);
  std::set<std::string> mounts;
  for (const auto& m : spec["devices"][0]["containerEdits"]["mounts"]) mounts.insert(m["containerPath"]);
  EXPECT_TRUE(mounts.contains("/run/tessera/limits")) << spec.dump(2);
  EXPECT_TRUE(mounts.contains("/run/tessera/ledger/ledger")) << spec.dump(2);
  EXPECT_FALSE(spec["devices"][0]["containerEdits"].contains("hooks")) << "no memory hook configured";
  // NVIDIA's toolkit's hook, where the node has one, reads the same quota in whole MiB.
  std::set<std::string> env;
  for (const auto& e : spec["devices"][0]["containerEdits"]["env"]) env.insert(e);
  EXPECT_TRUE(env.contains("NVIDIA_GPU_MEMORY_LIMIT=30720")) << spec.dump(2);
  // A share larger than the device is refused.
  n.add("33333333-3333-3333-3333-333333333333", "huge", {{"gpu-1", "200Gi"}});
  auto huge = n.prepare("33333333-3333-3333-3333-333333333333", "huge");
  EXPECT_NE(huge.error.find("asks for 204800 MiB"), std::string::npos) << huge.error;
  // One share goes; the other stays.
  EXPECT_EQ(n.unprepare(kUid1, "a"), "");
  EXPECT_FALSE(std::filesystem::exists(n.options.quota.ledger_root + "/dra-" + kUid1));
  EXPECT_TRUE(std::filesystem::exists(n.options.quota.ledger_root + "/dra-" + kUid2 + "/limits"));
}

json time_slicing(const std::string& interval) {
  return json::array({{{"source", "FromClaim"},
                       {"opaque",
                        {{"driver", "gpu.nvidia.com"},
                         {"parameters",
                          {{"apiVersion", "resource.nvidia.com/v1beta1"},
                           {"kind", "GpuConfig"},
                           {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", interval}}}}}}}}}}});
}

// Each GPU's time-slice level as the simulated node records it, read back through the simulated
// nvidia-smi's own list: "DEFAULT,LONG".
std::string timeslices(const std::string& node) {
  testing::ScopedSimEnv env(node);
  auto r = run({TESSERA_NVIDIA_SMI_SIM, "compute-policy", "-l"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    out += (out.empty() ? "" : ",") + line.substr(line.rfind(' ') + 1);
  return out;
}

// NVIDIA's TimeSlicingConfig: the interval is set on the claim's GPU with
// `nvidia-smi compute-policy --set-timeslice` (the quickstart's claims ask for
// Long), a claim asking another interval of a GPU already set is refused
// before anything changes, and the level goes back to the default with the
// last claim that asked for it, also after a crash left it recorded.
TEST(DraDriver, TimeSliceIntervalsAreSetOnTheGpuAndPutBackWithTheLastClaim) {
  Node n("A100-SXM4-80GB", /*mig=*/false, /*shares=*/true);
  n.options.nvidia_smi = TESSERA_NVIDIA_SMI_SIM;
  testing::ScopedSimEnv env(n.node);  // as `tessera dra --sim` sets it: the driver's nvidia-smi reads it
  n.start();
  EXPECT_EQ(timeslices(n.node), "DEFAULT,DEFAULT");
  n.add(kUid1, "a", {{"gpu-0", "20Gi"}}, time_slicing("Long"));
  ASSERT_EQ(n.prepare(kUid1, "a").error, "");
  EXPECT_EQ(timeslices(n.node), "LONG,DEFAULT");
  n.add(kUid2, "b", {{"gpu-0", "20Gi"}}, time_slicing("Short"));
  auto refused = n.prepare(kUid2, "b");
  EXPECT_NE(refused.error.find("asks for the time-slice interval Short on GPU 0, which runs Long for claim default/a"),
            std::string::npos)
      << refused.error;
  EXPECT_EQ(timeslices(n.node), "LONG,DEFAULT");
  EXPECT_FALSE(std::filesystem::exists(n.options.cdi.spec_dir + "/k8s.gpu.nvidia.com-claim_" + kUid2 + ".json"));
  const std::string uid3 = "33333333-3333-3333-3333-333333333333";
  n.add(uid3, "c", {{"gpu-0", "20Gi"}}, time_slicing("Long"));
  ASSERT_EQ(n.prepare(uid3, "c").error, "");
  const std::string uid4 = "44444444-4444-4444-4444-444444444444";
  n.add(uid4, "d", {{"gpu-1", "20Gi"}}, time_slicing("Medium"));
  ASSERT_EQ(n.prepare(uid4, "d").error, "");
  EXPECT_EQ(timeslices(n.node), "LONG,MEDIUM");
  EXPECT_EQ(n.unprepare(kUid1, "a"), "");
  EXPECT_EQ(timeslices(n.node), "LONG,MEDIUM");  // claim c still asks for it
  EXPECT_EQ(n.unprepare(uid3, "c"), "");
  EXPECT_EQ(timeslices(n.node), "DEFAULT,MEDIUM");
  // A restart keeps what prepared claims asked for, and puts back a level no claim asks for any
  // more: the record is written before the change, so a crash right after it leaves this.
  n.driver.reset();
  std::string gpu0;
  {
    testing::ScopedSimEnv other(n.node);
    auto set = run({TESSERA_NVIDIA_SMI_SIM, "compute-policy", "-i", "0", "--set-timeslice=2"});
    ASSERT_EQ(set.exit_code, 0) << set.err;
    gpu0 = set.out.substr(set.out.rfind(' ') + 1);  // "Set timeslice to MEDIUM for GPU <uuid>"
    gpu0.erase(gpu0.find_last_not_of('\n') + 1);
  }
  auto cp = json::parse(std::ifstream(n.options.state_dir + "/checkpoint.json"));
  cp["timeslices"][gpu0] = 2;
  std::ofstream(n.options.state_dir + "/checkpoint.json") << cp.dump(2);
  EXPECT_EQ(timeslices(n.node), "MEDIUM,MEDIUM");
  n.start();
  EXPECT_EQ(timeslices(n.node), "DEFAULT,MEDIUM");
  // A tool that cannot run fails the prepare, saying why, and leaves the claim unprepared.
  n.options.nvidia_smi = n.dir.path() + "/no-such-nvidia-smi";
  n.start();
  const std::string uid5 = "55555555-5555-5555-5555-555555555555";
  n.add(uid5, "e", {{"gpu-0", "20Gi"}}, time_slicing("Short"));
  auto broken = n.prepare(uid5, "e");
  EXPECT_NE(broken.error.find("cannot set the time-slice interval of GPU " + gpu0 + ": cannot run '" + n.dir.path() +
                              "/no-such-nvidia-smi': No such file or directory"),
            std::string::npos)
      << broken.error;
  EXPECT_TRUE(broken.devices.empty());
  EXPECT_EQ(timeslices(n.node), "DEFAULT,MEDIUM");
}

// NVIDIA's counted (and unlimited) shares: a claim that takes no memory shares
// the GPU with no quota; one that asks for memory is held to it.
TEST(DraDriver, CountedSharesHoldOnlyTheClaimsThatAskForMemory) {
  Node n("A100-SXM4-80GB", /*mig=*/false, /*shares=*/true);
  n.options.shares = *sharing::dra::parse_shares_mode("4");
  n.start();
  n.add(kUid1, "no-memory", {{"gpu-0", "0"}});
  n.add(kUid2, "some-memory", {{"gpu-0", "20Gi"}});
  ASSERT_EQ(n.prepare(kUid1, "no-memory").error, "");
  ASSERT_EQ(n.prepare(kUid2, "some-memory").error, "");
  EXPECT_FALSE(std::filesystem::exists(n.options.quota.ledger_root + "/dra-" + kUid1)) << "a quota of nothing";
  EXPECT_FALSE(n.spec_of(kUid1)["devices"][0]["containerEdits"].contains("mounts")) << n.spec_of(kUid1).dump(2);
  std::ifstream limits(n.options.quota.ledger_root + "/dra-" + kUid2 + "/limits");
  std::string text((std::istreambuf_iterator<char>(limits)), {});
  EXPECT_NE(text.find(" 21474836480"), std::string::npos) << text;
}

// With the memory hook, a share's spec carries it, naming the claim's own
// limits file: the runtime runs it as a createRuntime hook when the claim's
// container is created (on the host, where the container's pid and cgroup
// are real) and with --clear at poststop.
TEST(DraDriver, AMemoryShareCarriesTheMemoryHookWhenOneIsConfigured) {
  Node n("A100-SXM4-80GB", /*mig=*/false, /*shares=*/true);
  n.options.quota.memory_hook = {"/var/lib/tessera/lib/tessera-memory-hook", {"--nvml", "/x/libnvidia-ml.so.1"}, {}};
  n.start();
  n.add(kUid1, "a", {{"gpu-0", "20Gi"}});
  ASSERT_EQ(n.prepare(kUid1, "a").error, "");
  auto spec = n.spec_of(kUid1);
  const auto& hooks = spec["devices"][0]["containerEdits"]["hooks"];
  ASSERT_EQ(hooks.size(), 2u) << spec.dump(2);
  const std::string limits = n.options.quota.ledger_root + "/dra-" + kUid1 + "/limits";
  EXPECT_EQ(hooks[0]["hookName"], "createRuntime");
  EXPECT_EQ(hooks[0]["path"], "/var/lib/tessera/lib/tessera-memory-hook");
  EXPECT_EQ(hooks[0]["args"], nlohmann::json({"tessera-memory-hook", "--limits", limits, "--nvml", "/x/libnvidia-ml.so.1"}));
  EXPECT_EQ(hooks[1]["hookName"], "poststop");
  EXPECT_EQ(hooks[1]["path"], "/var/lib/tessera/lib/tessera-memory-hook");
  EXPECT_EQ(hooks[1]["args"],
            nlohmann::json({"tessera-memory-hook", "--limits", limits, "--clear", "--nvml", "/x/libnvidia-ml.so.1"}));
}

TEST(DraDriver, SharesOfOneMigInstanceCutItOnceAndDestroyItWithTheLast) {
  Node n("A100-SXM4-80GB", true, true);
  n.start();
  n.add(kUid1, "a", {{"gpu-0-mig-3g40gb-9-4", "10Gi"}});
  n.add(kUid2, "b", {{"gpu-0-mig-3g40gb-9-4", "10Gi"}});
  ASSERT_EQ(n.prepare(kUid1, "a").error, "");
  ASSERT_EQ(n.prepare(kUid2, "b").error, "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:3g.40gb@4"}));
  // The shared instance comes first now: nothing to cut.
  EXPECT_EQ(n.driver->pool().devices.front().name, "gpu-0-mig-3g40gb-9-4");
  EXPECT_EQ(n.unprepare(kUid1, "a"), "");
  EXPECT_EQ(n.instances().size(), 1u);
  EXPECT_EQ(n.unprepare(kUid2, "b"), "");
  EXPECT_TRUE(n.instances().empty());
}

TEST(DraDriver, AHopperGpuLeavesAndEntersMigModeAtPrepare) {
  Node n("H100-SXM5-80GB", /*mig=*/false);
  auto& d = n.start();
  const auto pool = d.pool();
  EXPECT_TRUE(find(pool, "gpu-0"));
  EXPECT_TRUE(find(pool, "gpu-0-mig-1g10gb-19-6"));
  n.add(kUid1, "c1", {{"gpu-0-mig-1g10gb-19-6"}});
  // A prepare that fails after turning MIG mode on turns it off again.
  auto planned = run({TESSERA_BIN, "sim", "fault", n.node, "--function", "nvmlDeviceCreateGpuInstanceWithPlacement"});
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  auto failed = n.prepare(kUid1, "c1");
  EXPECT_NE(failed.error.find("cannot create"), std::string::npos) << failed.error;
  auto state = reconciler::read_node_state(*n.session);
  ASSERT_TRUE(state);
  EXPECT_FALSE((*state)[0].state.mig_enabled) << "MIG mode left on by a prepare that failed";
  const auto after = d.pool();
  EXPECT_TRUE(find(after, "gpu-0"));
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  state = reconciler::read_node_state(*n.session);
  ASSERT_TRUE(state);
  EXPECT_TRUE((*state)[0].state.mig_enabled);
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  n.add(kUid2, "whole", {{"gpu-0"}});
  ASSERT_EQ(n.prepare(kUid2, "whole").error, "");
  state = reconciler::read_node_state(*n.session);
  EXPECT_FALSE((*state)[0].state.mig_enabled);
}

TEST(DraDriver, HealthEventsTaintTheGpusDevicesAndALostGpuEvictsWhatRuns) {
  Node n;
  auto& d = n.start();
  auto pool = d.pool();
  const auto* any0 = find(pool, "gpu-0-mig-1g10gb-19-0");
  ASSERT_TRUE(any0);
  const std::string gpu0 = std::get<std::string>(any0->attributes.at("parentUUID"));
  ASSERT_FALSE(gpu0.empty());
  sharing::HealthEvent e;
  e.kind = sharing::HealthEvent::Kind::xid;
  e.xid = 48;
  e.gpu_uuid = gpu0;
  e.at = sharing::Clock::now();
  d.record_health(e);
  pool = d.pool();
  for (const auto& dev : pool.devices) {
    if (dev.gpu != 0) {
      EXPECT_TRUE(dev.taints.empty()) << dev.name;
      continue;
    }
    ASSERT_EQ(dev.taints.size(), 1u) << dev.name;
    EXPECT_EQ(dev.taints[0].key, "gpu.nvidia.com/xid");
    EXPECT_EQ(dev.taints[0].value, "48");
    EXPECT_EQ(dev.taints[0].effect, "NoSchedule");
  }
  e.xid = 79;
  d.record_health(e);
  for (const auto& dev : d.pool().devices) {
    if (dev.gpu != 0) continue;
    ASSERT_FALSE(dev.taints.empty()) << dev.name;
    EXPECT_EQ(dev.taints[0].effect, "NoExecute") << dev.name;
  }
}

json mps_config(const std::string& kind, const json& mps = json::object()) {
  return json::array({{{"source", "FromClaim"},
                       {"opaque", {{"driver", "gpu.nvidia.com"},
                                   {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                                   {"kind", kind},
                                                   {"sharing", {{"strategy", "MPS"}, {"mpsConfig", mps}}}}}}}}});
}

// MPS daemons for `n`'s driver, under <its dir>/mps, run by the control
// program `binary` (the simulated one unless a test names another), with
// `timeout` per command where a test sets one.
struct MpsDaemons {
  static mps::SupervisorOptions options(std::string binary, std::optional<std::chrono::milliseconds> timeout) {
    mps::SupervisorOptions so;
    so.control.binary = std::move(binary);
    if (timeout) so.control.timeout = *timeout;
    return so;
  }
  explicit MpsDaemons(Node& n, std::string binary = TESSERA_MPS_CONTROL_SIM,
                      std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : supervisor(options(std::move(binary), timeout)) {
    n.options.daemons = &supervisor;
    n.options.mps_root = n.dir.path() + "/mps";
  }
  mps::Supervisor supervisor;
};

TEST(DraDriver, MpsInsideAMigInstanceRunsUnderADaemonOfThatInstance) {
  Node n;
  MpsDaemons mps_daemons(n, TESSERA_MPS_CONTROL_SIM, std::chrono::seconds(3));
  auto& daemons = mps_daemons.supervisor;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}},
        mps_config("MigDeviceConfig", {{"defaultActiveThreadPercentage", 40}, {"defaultPinnedDeviceMemoryLimit", "8Gi"}}));
  auto out = n.prepare(kUid1, "c1");
  ASSERT_EQ(out.error, "");
  const auto cp = n.driver->checkpoint();
  const std::string mig = cp.instances.at("gpu-0-mig-3g40gb-9-4").uuid;
  ASSERT_EQ(mig.rfind("MIG-", 0), 0u);
  EXPECT_TRUE(daemons.up().contains(mig));  // the instance's own daemon, up before prepare answered
  EXPECT_EQ(daemons.up().size(), 1u);
  // The daemon holds the claim's limits (as NVIDIA's driver sets them), not
  // only the client's environment, which the tenant controls: read from the
  // simulated daemon's own state.
  std::ifstream state_file(n.options.mps_root + "/" + mig + "/pipe/tessera-sim-mps.json");
  ASSERT_TRUE(state_file) << "no state of the simulated daemon";
  const auto daemon = json::parse(state_file);
  EXPECT_EQ(daemon["default_device_pinned_mem_limits"]["0"]["value"], "8192M") << daemon.dump(2);
  EXPECT_EQ(daemon["default_active_thread_percentage"].get<double>(), 40.0) << daemon.dump(2);
  auto spec = n.spec_of(kUid1);
  std::set<std::string> env;
  for (const auto& e : spec["devices"][0]["containerEdits"]["env"]) env.insert(e);
  EXPECT_TRUE(env.contains("CUDA_MPS_PIPE_DIRECTORY=/mps/pipe")) << spec.dump(2);
  EXPECT_TRUE(env.contains("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M")) << spec.dump(2);
  EXPECT_TRUE(env.contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40")) << spec.dump(2);
  bool pipe = false;
  for (const auto& m : spec["devices"][0]["containerEdits"]["mounts"])
    pipe = pipe || (m["hostPath"] == n.options.mps_root + "/" + mig + "/pipe" && m["containerPath"] == "/mps/pipe" &&
                    std::ranges::count(m["options"], "ro") == 1);  // clients connect; none binds a daemon there
  EXPECT_TRUE(pipe) << spec.dump(2);
  // Unprepared: the daemon is no longer wanted, and stops.
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  EXPECT_TRUE(daemons.status().empty());
  daemons.stop();
}

// multiUser: the device's daemon runs with -M (as NVIDIA's driver starts
// it), kept so while any claim there asks for it, restarted without it after.
TEST(DraDriver, AMultiUserMpsClaimGetsAMultiUserDaemon) {
  Node n;
  MpsDaemons mps_daemons(n, TESSERA_MPS_CONTROL_SIM, std::chrono::seconds(3));
  auto& daemons = mps_daemons.supervisor;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-3g40gb-9-4"}}, mps_config("MigDeviceConfig", {{"multiUser", true}}));
  n.add(kUid2, "c2", {{"gpu-0-mig-1g10gb-19-0"}}, mps_config("MigDeviceConfig"));
  ASSERT_EQ(n.prepare(kUid1, "c1").error, "");
  ASSERT_EQ(n.prepare(kUid2, "c2").error, "");
  const auto cp = n.driver->checkpoint();
  const std::string multi = cp.instances.at("gpu-0-mig-3g40gb-9-4").uuid, single = cp.instances.at("gpu-0-mig-1g10gb-19-0").uuid;
  auto daemon_state = [&](const std::string& uuid) {
    std::ifstream in(n.options.mps_root + "/" + uuid + "/pipe/tessera-sim-mps.json");
    return in ? json::parse(in) : json();
  };
  EXPECT_TRUE(daemons.up().contains(multi) && daemons.up().contains(single));
  EXPECT_EQ(daemon_state(multi)["multi_user"], true) << daemon_state(multi).dump(2);
  EXPECT_EQ(daemon_state(single)["multi_user"], false) << daemon_state(single).dump(2);
  EXPECT_TRUE(cp.claims.at(kUid1).devices.at(0).mps_multi_user) << "kept across restarts";
  // The driver starts again from its checkpoint: the same wish.
  n.start();
  const auto wanted = daemons.status();
  EXPECT_TRUE(std::any_of(wanted.begin(), wanted.end(), [&](const auto& st) { return st.spec.uuid == multi && st.spec.multi_user; }));
  EXPECT_EQ(n.unprepare(kUid1, "c1"), "");
  EXPECT_EQ(n.unprepare(kUid2, "c2"), "");
  EXPECT_TRUE(daemons.status().empty());
  daemons.stop();
}

// Shares of one GPU have one daemon, started in one mode: a claim asking the
// other mode than the claim it serves waits (refused, saying why) until that
// claim is gone, never restarting the daemon under its clients.
TEST(DraDriver, AClaimOfTheOtherMpsModeWaitsForTheDaemonsClaimsToGo) {
  Node n("A100-SXM4-80GB", /*mig=*/false, /*shares=*/true);
  MpsDaemons mps_daemons(n, TESSERA_MPS_CONTROL_SIM, std::chrono::seconds(3));
  auto& daemons = mps_daemons.supervisor;
  n.start();
  n.add(kUid1, "multi", {{"gpu-0", "10Gi"}}, mps_config("GpuConfig", {{"multiUser", true}}));
  n.add(kUid2, "single", {{"gpu-0", "10Gi"}}, mps_config("GpuConfig"));
  ASSERT_EQ(n.prepare(kUid1, "multi").error, "");
  const pid_t pid = daemons.status().at(0).pid;
  auto refused = n.prepare(kUid2, "single");
  EXPECT_NE(refused.error.find("the MPS daemon of gpu-0 serves claim default/multi in multi-user mode; this claim asks "
                               "multiUser: false, which needs a new daemon"),
            std::string::npos)
      << refused.error;
  EXPECT_EQ(daemons.status().at(0).pid, pid) << "the daemon of the first claim was left alone";
  EXPECT_EQ(n.unprepare(kUid1, "multi"), "");
  EXPECT_EQ(n.prepare(kUid2, "single").error, "") << "prepared once the other mode's claim is gone";
  EXPECT_EQ(n.unprepare(kUid2, "single"), "");
  daemons.stop();
}

// One container reaches one MPS control daemon, and each device has its
// own: MPS on two devices of one claim is refused with why, before anything
// is cut or started.
TEST(DraDriver, MpsOnSeveralDevicesOfOneClaimIsRefusedBeforeAnythingHappens) {
  Node n;
  MpsDaemons mps_daemons(n);
  auto& daemons = mps_daemons.supervisor;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-1g10gb-19-6"}, {"gpu-0-mig-1g10gb-19-5"}}, mps_config("MigDeviceConfig"));
  auto out = n.prepare(kUid1, "c1");
  EXPECT_NE(out.error.find("an MPS client connects to one control daemon, and each GPU or MIG device has its own: the "
                           "claim asks for MPS on 2 devices (gpu-0-mig-1g10gb-19-6, gpu-0-mig-1g10gb-19-5)"),
            std::string::npos)
      << out.error;
  EXPECT_TRUE(n.instances().empty());
  EXPECT_TRUE(n.driver->checkpoint().claims.empty());
  EXPECT_TRUE(daemons.status().empty());
  daemons.stop();
}

TEST(DraDriver, MpsWithoutDaemonsOrWithADaemonThatCannotStartIsRefused) {
  Node n;
  n.start();
  n.add(kUid1, "c1", {{"gpu-0-mig-1g10gb-19-6"}}, mps_config("MigDeviceConfig"));
  auto out = n.prepare(kUid1, "c1");
  EXPECT_NE(out.error.find("runs no MPS daemons"), std::string::npos) << out.error;
  EXPECT_TRUE(n.instances().empty());

  MpsDaemons mps_daemons(n, n.dir.path() + "/no-such-mps-control");
  auto& daemons = mps_daemons.supervisor;
  n.options.mps_start_timeout = std::chrono::milliseconds(1500);
  n.start();
  out = n.prepare(kUid1, "c1");
  EXPECT_NE(out.error.find("did not come up"), std::string::npos) << out.error;
  EXPECT_TRUE(n.instances().empty());  // the instance cut for it is destroyed again
  EXPECT_TRUE(n.driver->checkpoint().claims.empty());
  EXPECT_TRUE(daemons.status().empty());
  daemons.stop();
}

// A claim whose MPS daemon is slow to come up holds up only itself: while it
// waits, another claim is prepared, the pool is read and health is recorded;
// a second prepare or an unprepare of the waiting claim is refused until the
// first is done, which then fails cleanly.
TEST(DraDriver, AClaimWaitingForItsMpsDaemonDoesNotHoldUpTheOthers) {
  Node n;
  MpsDaemons mps_daemons(n, n.dir.path() + "/no-such-mps-control");  // never comes up
  auto& daemons = mps_daemons.supervisor;
  n.options.mps_start_timeout = std::chrono::milliseconds(6000);
  n.start();
  n.add(kUid1, "slow", {{"gpu-0-mig-1g10gb-19-6"}}, mps_config("MigDeviceConfig"));
  n.add(kUid2, "quick", {{"gpu-1-mig-1g10gb-19-6"}});
  std::atomic<bool> slow_done{false};
  PrepareOutcome slow;
  std::thread waiting([&] {
    slow = n.prepare(kUid1, "slow");
    slow_done = true;
  });
  // Waiting for its daemon: its instance is cut and recorded.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until && !n.driver->checkpoint().instances.contains("gpu-0-mig-1g10gb-19-6"))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(n.driver->checkpoint().instances.contains("gpu-0-mig-1g10gb-19-6"));
  auto quick = n.prepare(kUid2, "quick");
  EXPECT_EQ(quick.error, "");
  EXPECT_FALSE(slow_done) << "the quick claim waited for the slow one's daemon";
  EXPECT_NE(n.prepare(kUid1, "slow").error.find("an earlier prepare of it is still running"), std::string::npos);
  EXPECT_NE(n.unprepare(kUid1, "slow").find("its prepare is still running"), std::string::npos);
  sharing::HealthEvent event;
  event.xid = 13;  // an application error: recorded, taints nothing
  event.gpu_uuid = "GPU-00000000-0000-0000-0000-000000000000";
  n.driver->record_health(event);
  EXPECT_FALSE(n.driver->pool().devices.empty());
  EXPECT_FALSE(slow_done);
  waiting.join();
  EXPECT_NE(slow.error.find("did not come up"), std::string::npos) << slow.error;
  EXPECT_EQ(n.instances(), (std::set<std::string>{"1:1g.10gb@6"}));  // the slow claim's instance destroyed again
  EXPECT_EQ(n.unprepare(kUid2, "quick"), "");
  daemons.stop();
}

// The ResourceClaim is read from the API server without the driver's lock:
// while one claim's read hangs, another claim is prepared, the pool is read
// and health is recorded; the same claim again is told it is in flight.
TEST(DraDriver, TheApiServerIsAskedWithoutTheDriversLock) {
  Node n;
  n.start();
  n.add(kUid1, "slow", {{"gpu-0-mig-1g10gb-19-6"}});
  n.add(kUid2, "quick", {{"gpu-1-mig-1g10gb-19-6"}});
  std::mutex m;
  std::condition_variable cv;
  bool asked = false, answer = false;
  n.claims.before = [&](const std::string& name) {
    if (name != "slow") return;
    std::unique_lock lock(m);
    asked = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return answer; });
  };
  PrepareOutcome slow;
  std::thread waiting([&] { slow = n.prepare(kUid1, "slow"); });
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return asked; }));
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(n.prepare(kUid2, "quick").error, "");
  EXPECT_FALSE(n.driver->pool().devices.empty());
  sharing::HealthEvent event;
  event.xid = 13;
  event.gpu_uuid = "GPU-00000000-0000-0000-0000-000000000000";
  n.driver->record_health(event);
  EXPECT_NE(n.prepare(kUid1, "slow").error.find("an earlier prepare of it is still running"), std::string::npos);
  EXPECT_NE(n.unprepare(kUid1, "slow").find("its prepare is still running"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "waited for the hanging read";
  {
    std::lock_guard lock(m);
    answer = true;
  }
  cv.notify_all();
  waiting.join();
  EXPECT_EQ(slow.error, "");
  EXPECT_EQ(n.instances(), (std::set<std::string>{"0:1g.10gb@6", "1:1g.10gb@6"}));
  EXPECT_EQ(n.unprepare(kUid1, "slow"), "");
  EXPECT_EQ(n.unprepare(kUid2, "quick"), "");
}

// A MIG device's memory capacity is what its driver reports (NVML's profile info), not the
// catalog's: an H100's R525 driver reports 1g.10gb as 9,856 MiB and 3g.40gb as 40,192 MiB, where
// later drivers (and the catalog) say 9,984 and 40,448; a claim asking for all the catalog's
// figure is refused as more than the device has.
TEST(DraDriver, MigCapacitiesAreWhatTheDriverReports) {
  auto memory_of = [](Driver& d, const std::string& profile) {
    std::set<uint64_t> mib;
    for (const auto& dev : d.pool().devices)
      if (dev.attributes.count("profile") && std::get<std::string>(dev.attributes.at("profile")) == profile)
        mib.insert(dev.capacity.at("memory") >> 20);
    return mib;
  };
  Node older("H100-SXM5-80GB", true, true, {"--driver-version", "525.125.06"});
  Driver& d = older.start();
  EXPECT_EQ(memory_of(d, "1g.10gb"), (std::set<uint64_t>{9856}));
  EXPECT_EQ(memory_of(d, "3g.40gb"), (std::set<uint64_t>{40192}));
  EXPECT_EQ(memory_of(d, "7g.80gb"), (std::set<uint64_t>{81152}));
  older.add("uid-all", "all", {{"gpu-0-mig-1g10gb-19-0", "9984Mi"}});
  const auto refused = older.prepare("uid-all", "all");
  EXPECT_NE(refused.error.find("asks for 9984 MiB of gpu-0-mig-1g10gb-19-0, which has 9856 MiB"), std::string::npos) << refused.error;
}

// Multiprocessors and engines too are what the driver reports: the catalog has no engine counts
// for a GB200's 3g.93gb (0/0/0/0/0) and estimates its multiprocessors, where its driver (here
// the simulator's, taking the B200's engines) reports 6 copy engines, a decoder and a JPEG engine.
TEST(DraDriver, MigMultiprocessorsAndEnginesAreWhatTheDriverReports) {
  Node gb200("GB200", true, true);
  Driver& d = gb200.start();
  std::set<std::string> seen;
  for (const auto& dev : d.pool().devices) {
    if (!dev.attributes.count("profile") || std::get<std::string>(dev.attributes.at("profile")) != "3g.93gb") continue;
    seen.insert(std::to_string(dev.capacity.at("multiprocessors")) + " " + std::to_string(dev.capacity.at("copyEngines")) +
                "/" + std::to_string(dev.capacity.at("decoders")) + "/" + std::to_string(dev.capacity.at("encoders")) + "/" +
                std::to_string(dev.capacity.at("jpegEngines")) + "/" + std::to_string(dev.capacity.at("ofaEngines")));
  }
  EXPECT_EQ(seen, (std::set<std::string>{"54 6/1/0/1/0"}));
}

// The same GPU on a later driver: the figures it reports, which the catalog has too.
TEST(DraDriver, MigCapacitiesOfALaterDriver) {
  Node later("H100-SXM5-80GB", true, true);
  std::set<uint64_t> mib;
  for (const auto& dev : later.start().pool().devices)
    if (dev.attributes.count("profile") && std::get<std::string>(dev.attributes.at("profile")) == "1g.10gb")
      mib.insert(dev.capacity.at("memory") >> 20);
  EXPECT_EQ(mib, (std::set<uint64_t>{9984}));
}

}  // namespace
}  // namespace tessera::dra
