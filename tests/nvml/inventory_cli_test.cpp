// `tessera inventory` and `tessera sim`, run as a user runs them, against
// simulated nodes; and without any NVIDIA library.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/catalog.hpp"
#include "core/units.hpp"
#include "sim_node.hpp"

namespace tessera {
namespace {

using testing::kBin;
using testing::run;
using testing::SimNode;

class InventoryCli : public ::testing::TestWithParam<const char*> {};

TEST_P(InventoryCli, ListsTheGpus) {
  const GpuModel* model = Catalog::builtin().find(GetParam());
  ASSERT_NE(model, nullptr);
  SimNode node(GetParam(), 3);
  auto r = node.tessera({"inventory", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["driver_version"], "550.90.07");
  EXPECT_EQ(j["cuda_version"], "12.4");
  ASSERT_EQ(j["gpus"].size(), 3u);
  std::set<std::string> uuids, buses;
  for (size_t i = 0; i < 3; ++i) {
    const auto& g = j["gpus"][i];
    EXPECT_EQ(g["index"], i);
    EXPECT_EQ(g["model"], model->name);
    EXPECT_EQ(g["name"], model->nvml_name);
    EXPECT_EQ(g["pci_device_id"], format_pci_id(model->pci_device_id));
    EXPECT_EQ(g["memory"]["total_bytes"], model->memory_mib * kMiB);
    // Idle: only what the driver reserves is used.
    EXPECT_EQ(g["memory"]["used_bytes"], g["memory"]["reserved_bytes"]);
    EXPECT_GT(g["memory"]["reserved_bytes"].get<uint64_t>(), 0u);
    EXPECT_EQ(g["mig"]["current"], false);
    EXPECT_EQ(g["mig"]["pending"], false);
    EXPECT_EQ(g["minor"], i);
    EXPECT_TRUE(g["gpu_instances"].empty());
    uuids.insert(g["uuid"].get<std::string>());
    buses.insert(g["pci_bus_id"].get<std::string>());
    EXPECT_TRUE(std::regex_match(g["pci_bus_id"].get<std::string>(), std::regex("00000000:[0-9A-F]{2}:00\\.0")));
  }
  EXPECT_EQ(uuids.size(), 3u);
  EXPECT_EQ(buses.size(), 3u);

  auto table = node.tessera({"inventory"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(model->name), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(j["gpus"][2]["uuid"].get<std::string>()), std::string::npos);
}

TEST_P(InventoryCli, ShowsMigInstancesMadeByAnotherProcess) {
  const GpuModel* model = Catalog::builtin().find(GetParam());
  SimNode node(GetParam(), 1, {"--mig"});
  auto s = node.open();
  auto gpu = OK(s.device(0));
  // The largest profile's sibling: 3g at its last placement, and a 1g.
  const auto* three = model->profile_by_nvml_index(nvml::abi::NVML_GPU_INSTANCE_PROFILE_1_SLICE + 2);
  const auto* one = model->profile_by_nvml_index(nvml::abi::NVML_GPU_INSTANCE_PROFILE_1_SLICE);
  auto gi3 = OK(gpu.create_gpu_instance(three->profile_id, three->placements.back()));
  auto gi1 = OK(gpu.create_gpu_instance(one->profile_id, one->placements.front()));
  (void)OK(gi3.create_compute_instance(three->default_compute_profile()->profile_id));
  (void)OK(gi1.create_compute_instance(one->default_compute_profile()->profile_id));
  node.drive("process", {"--pid", "900", "--mig-device", OK(OK(gpu.mig_devices()).at(0).uuid()), "--memory", "1GiB"});

  auto r = node.tessera({"inventory", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto g = nlohmann::json::parse(r.out)["gpus"][0];
  EXPECT_EQ(g["mig"]["current"], true);
  ASSERT_EQ(g["gpu_instances"].size(), 2u);
  std::map<std::string, nlohmann::json> by_profile;
  for (const auto& gi : g["gpu_instances"]) by_profile[gi["profile"].get<std::string>()] = gi;
  ASSERT_TRUE(by_profile.count(three->name)) << g.dump();
  ASSERT_TRUE(by_profile.count(one->name)) << g.dump();
  EXPECT_EQ(by_profile[three->name]["placement"]["start"], three->placements.back().start);
  EXPECT_EQ(by_profile[three->name]["placement"]["size"], three->memory_slices);
  EXPECT_EQ(by_profile[three->name]["compute_instances"][0]["profile"], three->default_compute_profile()->name);
  ASSERT_EQ(g["mig_devices"].size(), 2u);
  std::set<std::string> wrapper_uuids;
  for (const auto& m : OK(gpu.mig_devices())) wrapper_uuids.insert(OK(m.uuid()));
  uint64_t used = 0;
  for (const auto& m : g["mig_devices"]) {
    EXPECT_TRUE(wrapper_uuids.count(m["uuid"].get<std::string>()));
    uint32_t gi_id = m["gpu_instance"];
    const auto* p = gi_id == OK(gi3.info()).id ? three : one;
    EXPECT_EQ(m["memory"]["total_bytes"], p->memory_mib * kMiB);
    used += m["memory"]["used_bytes"].get<uint64_t>();
  }
  EXPECT_EQ(used, kGiB);
  auto table = node.tessera({"inventory"});
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find(*wrapper_uuids.begin()), std::string::npos) << table.out;
}

TEST_P(InventoryCli, ProfilesAreTheDriversAndMatchTheCatalog) {
  const GpuModel* model = Catalog::builtin().find(GetParam());
  SimNode node(GetParam(), 1, {"--mig"});
  auto r = node.tessera({"inventory", "--json", "--profiles"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto profiles = nlohmann::json::parse(r.out)["gpus"][0]["profiles"];
  ASSERT_EQ(profiles.size(), model->profiles.size());
  for (const auto& p : profiles) {
    const auto* c = model->profile_by_nvml_index(p["index"]);
    ASSERT_NE(c, nullptr) << p.dump();
    EXPECT_EQ(p["id"], c->profile_id);
    EXPECT_EQ(p["name"], "MIG " + c->name);
    EXPECT_EQ(p["memory_mib"], c->memory_mib);
    ASSERT_EQ(p["placements"].size(), c->placements.size());
    for (size_t i = 0; i < c->placements.size(); ++i) {
      EXPECT_EQ(p["placements"][i]["start"], c->placements[i].start);
      EXPECT_EQ(p["placements"][i]["size"], c->placements[i].size);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, InventoryCli, ::testing::Values("A100-80GB", "H100-80GB", "H200"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

size_t line_count(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(InventoryWithoutDriver, SaysSoInOneLine) {
  auto r = run({kBin, "inventory"}, "", {"TESSERA_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1", "TESSERA_SIM="});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(line_count(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("tessera inventory: no NVIDIA driver found", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("--sim DIR"), std::string::npos) << r.err;
  // With the system's default library name, where this machine has none.
  if (void* h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_NOLOAD);
      h == nullptr && !dlopen("libnvidia-ml.so.1", RTLD_LAZY)) {
    auto d = run({kBin, "inventory", "--json"}, "", {"TESSERA_SIM="});
    EXPECT_EQ(d.exit_code, 1);
    EXPECT_EQ(line_count(d.err), 1u) << d.err;
    EXPECT_NE(d.err.find("no NVIDIA driver found"), std::string::npos) << d.err;
  }
}

TEST(InventoryWithoutPrivileges, NotesWhatItCouldNotRead) {
  SimNode node("H100-80GB", 1, {"--mig"});
  {
    auto s = node.open();
    auto gpu = OK(s.device(0));
    auto gi = OK(gpu.create_gpu_instance(9));
    (void)OK(gi.create_compute_instance(2));
  }
  // Non-root users may not list instances; MIG devices stay readable.
  node.drive("fault", {"--function", "nvmlDeviceGetGpuInstances", "--error", "NO_PERMISSION", "--times", "100"});
  auto r = node.tessera({"inventory", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto g = nlohmann::json::parse(r.out)["gpus"][0];
  EXPECT_TRUE(g["gpu_instances"].empty());
  EXPECT_EQ(g["mig_devices"].size(), 1u);
  ASSERT_EQ(g["notes"].size(), 1u);
  EXPECT_NE(g["notes"][0].get<std::string>().find("nvmlDeviceGetGpuInstances"), std::string::npos);
  EXPECT_NE(g["notes"][0].get<std::string>().find("NVML_ERROR_NO_PERMISSION"), std::string::npos);
  // Any other error is an error.
  node.drive("fault", {"--function", "nvmlDeviceGetMigDeviceHandleByIndex", "--error", "UNKNOWN"});
  EXPECT_EQ(node.tessera({"inventory", "--json"}).exit_code, 1);
}

TEST(InventoryWithLibrary, LoadsTheNamedLibrary) {
  // --nvml-library loads any NVML; here the simulator's, told its node by
  // TESSERA_SIM. That is also --sim's variable, so `--sim ''` keeps the
  // command on the named library rather than the simulator's own path.
  SimNode node("H100-80GB", 2);
  const std::string sim = "TESSERA_SIM=" + node.dir();
  auto r = run({kBin, "inventory", "--json", "--sim", "", "--nvml-library", testing::kSimLibrary}, "", {sim});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpus"].size(), 2u);
  auto env = run({kBin, "inventory", "--json", "--sim", ""}, "", {sim, "TESSERA_NVML_LIBRARY=" + testing::kSimLibrary});
  ASSERT_EQ(env.exit_code, 0) << env.err;
  auto foreign = run({kBin, "inventory", "--nvml-library", "libc.so.6"}, "", {"TESSERA_SIM="});
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_NE(foreign.err.find("lacks the NVML symbol nvmlInit_v2"), std::string::npos) << foreign.err;
}

TEST(SimCli, RefusesBadInput) {
  testing::TempDir tmp;
  auto unknown = run({kBin, "sim", "create", tmp.path() + "/n", "--gpu", "A100-80G"});
  EXPECT_EQ(unknown.exit_code, 2);  // a usage error, as in every command taking --gpu (docs/errors.md)
  EXPECT_NE(unknown.err.find("unknown GPU model 'A100-80G' (nearest: "), std::string::npos) << unknown.err;
  auto not_node = run({kBin, "inventory", "--sim", tmp.path()});
  EXPECT_EQ(not_node.exit_code, 1);
  EXPECT_NE(not_node.err.find("is not a simulated node"), std::string::npos) << not_node.err;
  SimNode node("A100-80GB", 1);
  auto twice = run({kBin, "sim", "create", node.dir(), "--gpu", "A100-80GB"});
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.err.find("already holds a simulated node"), std::string::npos) << twice.err;
  auto no_gpu = run({kBin, "sim", "event", node.dir(), "--gpu", "3", "--xid", "79"});
  EXPECT_EQ(no_gpu.exit_code, 1);
  EXPECT_NE(no_gpu.err.find("GPU 3 does not exist"), std::string::npos) << no_gpu.err;
  auto mig_proc = run({kBin, "sim", "process", node.dir(), "--pid", "1", "--mig-device", "MIG-nope"});
  EXPECT_EQ(mig_proc.exit_code, 1);
  auto show = run({kBin, "sim", "show", node.dir()});
  ASSERT_EQ(show.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(show.out)["gpus"].size(), 1u);
}

// One GPU fell off the bus (XID 79, then GPU_IS_LOST): the inventory still shows the others,
// names the lost one and why, and exits 1.
TEST(InventoryCli, AGpuThatFellOffTheBusIsNamedAndTheOthersShown) {
  SimNode node("A100-80GB", 2);
  ASSERT_EQ(run({kBin, "sim", "event", node.dir(), "--gpu", "1", "--lost"}).exit_code, 0);
  auto table = run({kBin, "inventory", "--sim", node.dir()});
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_NE(table.err.find("tessera inventory: GPU 1 cannot be read: "), std::string::npos) << table.err;
  EXPECT_NE(table.err.find("GPU_IS_LOST"), std::string::npos) << table.err;
  EXPECT_NE(table.out.find("A100-SXM4-80GB"), std::string::npos) << table.out;  // GPU 0's row
  EXPECT_NE(table.out.find("UNREADABLE"), std::string::npos) << table.out;
  auto json = run({kBin, "inventory", "--sim", node.dir(), "--json"});
  EXPECT_EQ(json.exit_code, 1);
  auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_TRUE(j["gpus"][0]["uuid"].get<std::string>().starts_with("GPU-"));
  EXPECT_EQ(j["gpus"][1]["index"], 1);
  EXPECT_NE(j["gpus"][1]["error"].get<std::string>().find("GPU_IS_LOST"), std::string::npos) << json.out;
}

}  // namespace
}  // namespace tessera
