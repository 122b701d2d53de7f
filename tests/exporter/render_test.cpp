// The exporter's pure parts: replica ids, attribution from pod-resources
// answers, the text format's escaping and families.
#include <gtest/gtest.h>

#include "exporter/attribution.hpp"
#include "exporter/render.hpp"

namespace tessera::exporter {
namespace {

TEST(ExporterAttribution, ReplicaIdsNameTheirDevice) {
  EXPECT_EQ(replica_device("GPU-1234::0"), "GPU-1234");
  EXPECT_EQ(replica_device("MIG-ab-cd::12"), "MIG-ab-cd");
  EXPECT_EQ(replica_device("GPU-1234"), "");
  EXPECT_EQ(replica_device("GPU-1234::"), "");
  EXPECT_EQ(replica_device("GPU-1234::x"), "");
  EXPECT_EQ(replica_device("::3"), "");
}

TEST(ExporterAttribution, WholeDevicesAndReplicasPerContainer) {
  std::vector<plugin::PodDevices> pods = {
      {"ml", "llm-0", {{"server", {{"nvidia.com/gpu", {"GPU-a"}}}}, {"sidecar", {}}}},
      {"ml", "chat-0", {{"main", {{"nvidia.com/gpu", {"GPU-b::3", "GPU-b::1", "GPU-c::0"}}}}}},
      {"other", "x", {{"main", {{"example.com/fpga", {"F-1"}}}}}},
  };
  auto a = attribute(pods, "nvidia.com/");
  ASSERT_EQ(a.devices.size(), 1u);
  EXPECT_EQ(a.devices.at("GPU-a").pod, "llm-0");
  EXPECT_EQ(a.devices.at("GPU-a").container, "server");
  ASSERT_EQ(a.replicas.size(), 2u);
  EXPECT_EQ(a.replicas[0].device_uuid, "GPU-b");
  EXPECT_EQ(a.replicas[0].replica_ids, (std::vector<std::string>{"GPU-b::1", "GPU-b::3"}));
  EXPECT_EQ(a.replicas[0].resource_ids.size(), 3u);  // the ledger key takes every id of the resource
  EXPECT_EQ(a.replicas[1].device_uuid, "GPU-c");
}

TEST(ExporterRender, EscapesLabelValuesAndLeavesOutEmptyFamilies) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  Sample s;
  DeviceSample d;
  d.labels.gpu = 3;
  d.labels.uuid = d.labels.device_uuid = "GPU-x";
  d.labels.device = "nvidia3";
  d.labels.model_name = "NVIDIA \"odd\" name";
  d.fb_used_mib = 12;
  s.devices.push_back(d);
  s.duration_seconds = 0.25;
  auto text = render(s, "1.2.3");
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_FB_USED gauge\nDCGM_FI_DEV_FB_USED{gpu=\"3\",UUID=\"GPU-x\",pci_bus_id=\"\","
                      "device=\"nvidia3\",modelName=\"NVIDIA \\\"odd\\\" name\"} 12\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("DCGM_FI_DEV_GPU_TEMP"), std::string::npos);  // never read: never shown
  EXPECT_EQ(text.find("tessera_sampler_last_success_timestamp_seconds"), std::string::npos);
  EXPECT_NE(text.find("tessera_device_up{gpu=\"3\""), std::string::npos);
  EXPECT_NE(text.find("tessera_sampler_duration_seconds 0.25\n"), std::string::npos);
  EXPECT_NE(text.find("tessera_exporter_info{version=\"1.2.3\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace tessera::exporter
