// The simulated node as one driver shared by processes, and driven from
// outside: concurrent writers, faults, events, processes, GPM, NVLink.
#include "sim_node.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/units.hpp"

namespace tessera {
namespace {

using namespace nvml::abi;
using testing::SimNode;

TEST(SimNode, ProcessesSeeOneState) {
  SimNode node("A100-80GB", 1, {"--mig"});
  // Four processes create a 1g.10gb instance each at the same time; NVML
  // picks the placement, so without one consistent driver they would collide.
  constexpr int kChildren = 4;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 1;
      try {
        auto s = node.open();
        auto gpu = s.device(0);
        rc = gpu && gpu->create_gpu_instance(19) ? 0 : 2;  // 1g.10gb on A100
      } catch (...) {
        rc = 3;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  auto s = node.open();
  auto gis = OK(OK(s.device(0)).gpu_instances());
  ASSERT_EQ(gis.size(), static_cast<size_t>(kChildren));
  std::set<uint32_t> starts, ids;
  for (const auto& gi : gis) {
    starts.insert(OK(gi.info()).placement.start);
    ids.insert(OK(gi.info()).id);
  }
  EXPECT_EQ(starts.size(), static_cast<size_t>(kChildren));
  EXPECT_EQ(ids.size(), static_cast<size_t>(kChildren));
  // And another program (the CLI) sees what this process sees.
  auto r = node.tessera({"inventory", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpus"][0]["gpu_instances"].size(), static_cast<size_t>(kChildren));
}

TEST(SimNode, ChangesFromAnotherProcessAreSeenAtOnce) {
  SimNode node("H100-80GB", 1);
  auto s = node.open();
  auto gpu = OK(s.device(0));
  EXPECT_TRUE(OK(gpu.compute_processes()).empty());
  node.drive("process", {"--pid", "31337", "--gpu", "0", "--memory", "3GiB"});
  auto procs = OK(gpu.compute_processes());
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 31337u);
  EXPECT_EQ(procs[0].used_bytes, 3 * kGiB);
  EXPECT_FALSE(procs[0].gpu_instance_id);  // not MIG: 0xFFFFFFFF in NVML
  auto mem = OK(gpu.memory_info());
  EXPECT_EQ(mem.used, 3 * kGiB + mem.reserved);  // used includes what the driver reserves
  node.drive("end-process", {"--pid", "31337"});
  EXPECT_TRUE(OK(gpu.compute_processes()).empty());
}

TEST(SimNode, FaultsSurfaceAsTypedErrors) {
  SimNode node("H200", 2);
  auto s = node.open();
  node.drive("fault", {"--function", "nvmlDeviceGetCount_v2", "--error", "NVML_ERROR_UNKNOWN", "--nth", "2"});
  EXPECT_EQ(OK(s.device_count()), 2u);  // the first call passes
  auto failed = s.device_count();
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, NVML_ERROR_UNKNOWN);
  EXPECT_EQ(failed.error().call, "nvmlDeviceGetCount_v2");
  EXPECT_EQ(failed.error().message(), "nvmlDeviceGetCount_v2: NVML_ERROR_UNKNOWN");
  EXPECT_EQ(failed.error().to_error().code, Errc::driver);
  EXPECT_EQ(OK(s.device_count()), 2u);  // one-shot

  node.drive("fault", {"--function", "nvmlDeviceGetMemoryInfo_v2", "--error", "GPU_IS_LOST", "--times", "2"});
  auto gpu = OK(s.device(1));
  for (int i = 0; i < 2; ++i) {
    auto lost = gpu.memory_info();
    ASSERT_FALSE(lost);
    EXPECT_EQ(lost.error().code, NVML_ERROR_GPU_IS_LOST);
    EXPECT_NE(lost.error().message().find(OK(gpu.uuid())), std::string::npos) << lost.error().message();
  }
  EXPECT_NVML_OK(gpu.memory_info());
}

TEST(SimNode, FaultsReachTheProgram) {
  SimNode node("A100-80GB", 1);
  node.drive("fault", {"--function", "nvmlDeviceGetHandleByIndex_v2", "--error", "NVML_ERROR_UNKNOWN"});
  auto r = node.tessera({"inventory"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nvmlDeviceGetHandleByIndex_v2 (index 0): NVML_ERROR_UNKNOWN"), std::string::npos) << r.err;
  EXPECT_EQ(node.tessera({"inventory"}).exit_code, 0);  // the fault fired once
  auto bad =
      node.tessera({"sim", "fault", node.dir(), "--function", "nvmlInit_v2", "--error", "NVML_ERROR_NOPE"}, false);
  EXPECT_EQ(bad.exit_code, 2);
  auto init =
      node.tessera({"sim", "fault", node.dir(), "--function", "nvmlInit_v2", "--error", "DRIVER_NOT_LOADED"}, false);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto r2 = node.tessera({"inventory"});
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_NE(r2.err.find("nvmlInit_v2"), std::string::npos) << r2.err;
  EXPECT_NE(r2.err.find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos) << r2.err;
}

TEST(SimNode, XidAndEccEventsArrive) {
  SimNode node("H100-80GB", 2);
  auto s = node.open();
  auto gpu0 = OK(s.device(0)), gpu1 = OK(s.device(1));
  auto supported = OK(gpu0.supported_event_types());
  EXPECT_TRUE(supported & nvmlEventTypeXidCriticalError);
  auto set = OK(s.create_event_set());
  EXPECT_NVML_OK(set.add(gpu0, nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError));
  auto unsupported = set.add(gpu1, nvmlEventTypePState);
  ASSERT_FALSE(unsupported);
  EXPECT_EQ(unsupported.error().code, NVML_ERROR_NOT_SUPPORTED);

  auto quiet = set.wait(20);
  ASSERT_FALSE(quiet);
  EXPECT_EQ(quiet.error().code, NVML_ERROR_TIMEOUT);

  node.drive("event", {"--gpu", "1", "--xid", "48"});  // not registered on GPU 1
  node.drive("event", {"--gpu", "0", "--xid", "79"});
  node.drive("event", {"--gpu", "0", "--ecc", "double"});
  auto xid = OK(set.wait(1000));
  EXPECT_EQ(xid.device, gpu0);
  EXPECT_EQ(xid.type, nvmlEventTypeXidCriticalError);
  EXPECT_EQ(xid.data, 79u);
  EXPECT_FALSE(xid.gpu_instance_id);
  auto ecc = OK(set.wait(1000));
  EXPECT_EQ(ecc.type, nvmlEventTypeDoubleBitEccError);
  EXPECT_FALSE(set.wait(20));
}

TEST(SimNode, GpmMetricsPerGpuAndPerMigInstance) {
  SimNode node("H100-80GB", 1, {"--mig"});
  auto s = node.open();
  auto gpu = OK(s.device(0));
  EXPECT_TRUE(OK(gpu.gpm_supported()));
  auto gi = OK(gpu.create_gpu_instance(9));  // 3g.40gb
  uint32_t gi_id = OK(gi.info()).id;
  node.drive("activity", {"--gpu", "0", "--sm-util", "62.5", "--sm-occupancy", "40", "--dram-bw", "71"});
  node.drive("activity", {"--gpu", "0", "--gpu-instance", std::to_string(gi_id), "--sm-util", "12", "--dram-bw", "8"});

  auto a = OK(s.create_gpm_sample()), b = OK(s.create_gpm_sample());
  EXPECT_NVML_OK(gpu.gpm_sample(a));
  EXPECT_NVML_OK(gpu.gpm_sample(b));
  auto whole = OK(s.gpm_metrics(a, b));
  EXPECT_EQ(whole.sm_util, 62.5);
  EXPECT_EQ(whole.sm_occupancy, 40.0);
  EXPECT_EQ(whole.dram_bw_util, 71.0);

  EXPECT_NVML_OK(gpu.gpm_mig_sample(gi_id, a));
  EXPECT_NVML_OK(gpu.gpm_mig_sample(gi_id, b));
  auto mig = OK(s.gpm_metrics(a, b));
  EXPECT_EQ(mig.sm_util, 12.0);
  EXPECT_EQ(mig.sm_occupancy, 0.0);
  EXPECT_EQ(mig.dram_bw_util, 8.0);

  auto missing = gpu.gpm_mig_sample(gi_id + 5, a);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, NVML_ERROR_NOT_FOUND);
}

TEST(SimNode, NoGpmBeforeHopper) {
  SimNode node("A100-80GB", 1);
  auto s = node.open();
  auto gpu = OK(s.device(0));
  EXPECT_FALSE(OK(gpu.gpm_supported()));
  auto sample = OK(s.create_gpm_sample());
  auto r = gpu.gpm_sample(sample);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, NVML_ERROR_NOT_SUPPORTED);
}

TEST(SimNode, UtilisationIsSetFromOutside) {
  SimNode node("H200", 1);
  auto s = node.open();
  auto gpu = OK(s.device(0));
  node.drive("activity", {"--gpu", "0", "--gpu-util", "87", "--memory-util", "33"});
  auto u = OK(gpu.utilization());
  EXPECT_EQ(u.gpu, 87u);
  EXPECT_EQ(u.memory, 33u);
}

TEST(SimNode, NvlinkAndTopology) {
  {
    SimNode linked("H100-80GB", 4, {"--nvlink", "all"});
    auto s = linked.open();
    auto gpu0 = OK(s.device(0)), gpu1 = OK(s.device(1)), gpu2 = OK(s.device(2));
    EXPECT_TRUE(OK(gpu0.nvlink_active(0)));
    EXPECT_TRUE(OK(gpu0.nvlink_active(17)));
    auto beyond = gpu0.nvlink_active(18);  // Hopper has 18 links
    ASSERT_FALSE(beyond);
    EXPECT_EQ(beyond.error().code, NVML_ERROR_INVALID_ARGUMENT);
    std::set<std::string> peers;
    for (uint32_t link = 0; link < 18; ++link) peers.insert(OK(gpu0.nvlink_remote_pci(link)).bus_id);
    EXPECT_EQ(peers, (std::set<std::string>{OK(gpu1.pci_info()).bus_id, OK(gpu2.pci_info()).bus_id,
                                            OK(OK(s.device(3)).pci_info()).bus_id}));
    EXPECT_EQ(OK(gpu0.common_ancestor(gpu0)), NVML_TOPOLOGY_INTERNAL);
    EXPECT_EQ(OK(gpu0.common_ancestor(gpu1)), NVML_TOPOLOGY_SINGLE);
    EXPECT_EQ(OK(gpu0.common_ancestor(gpu2)), NVML_TOPOLOGY_NODE);
  }
  // One node per process at a time, as one driver: the session above ended.
  SimNode alone("H100-80GB", 2);
  auto s2 = alone.open();
  EXPECT_FALSE(OK(OK(s2.device(0)).nvlink_active(0)));
}

TEST(SimNode, HandlesByUuid) {
  SimNode node("A100-80GB", 2, {"--mig"});
  auto s = node.open();
  auto gpu1 = OK(s.device(1));
  EXPECT_EQ(OK(s.device_by_uuid(OK(gpu1.uuid()))), gpu1);
  auto gi = OK(gpu1.create_gpu_instance(9));  // 3g.40gb on A100
  (void)OK(gi.create_compute_instance(2));    // its default compute instance
  auto mig = OK(s.device_by_uuid(OK(OK(gpu1.mig_devices()).at(0).uuid())));
  EXPECT_TRUE(OK(mig.is_mig_device()));
  EXPECT_FALSE(OK(gpu1.is_mig_device()));
  EXPECT_EQ(OK(mig.parent()), gpu1);
  EXPECT_EQ(OK(mig.name()), "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
  auto none = s.device_by_uuid("GPU-00000000-0000-0000-0000-000000000000");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(none.error().to_error().code, Errc::not_found);
}

}  // namespace
}  // namespace tessera
