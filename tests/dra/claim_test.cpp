// Reading a ResourceClaim's allocation and NVIDIA's opaque device configs:
// what is taken, what applies to which request, and every malformed or
// hostile config refused with the field and the reason.
#include "dra/claim.hpp"

#include <gtest/gtest.h>

namespace tessera::dra {
namespace {

using nlohmann::json;

json opaque(const json& parameters, const json& requests = json::array(), const std::string& source = "FromClaim",
            const std::string& driver = "gpu.nvidia.com") {
  return {{"source", source}, {"requests", requests}, {"opaque", {{"driver", driver}, {"parameters", parameters}}}};
}

json mig_config(const json& sharing) {
  return {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "MigDeviceConfig"}, {"sharing", sharing}};
}

json claim(const json& results, const json& configs = json::array(), const std::string& uid = "u1") {
  return {{"metadata", {{"namespace", "ns"}, {"name", "c"}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", results}, {"config", configs}}}}}}}};
}

json result(const std::string& request, const std::string& device, const std::string& pool = "node-a",
            const std::string& driver = "gpu.nvidia.com") {
  return {{"request", request}, {"driver", driver}, {"pool", pool}, {"device", device}};
}

TEST(DraClaim, ReadsThisNodesDevicesAndTheConfigThatAppliesToEach) {
  json results = json::array({result("small", "gpu-0-mig-1g10gb-19-6"), result("big", "gpu-1-mig-3g40gb-9-4"),
                              result("other", "gpu-0", "node-b"), result("net", "eth0", "node-a", "nic.example.com")});
  results[0]["consumedCapacity"] = {{"memory", "5Gi"}};
  results[0]["shareID"] = "abc";
  json configs = json::array({
      opaque(mig_config({{"strategy", "TimeSlicing"}}), json::array(), "FromClass"),
      opaque(mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", 50}}}}), json::array({"small"})),
      opaque({{"anything", true}}, json::array(), "FromClaim", "nic.example.com"),  // another driver's: not read
  });
  auto a = read_allocation(claim(results, configs), "gpu.nvidia.com", "node-a", "u1");
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->devices.size(), 2u);
  EXPECT_EQ(a->devices[0].device, "gpu-0-mig-1g10gb-19-6");
  EXPECT_EQ(a->devices[0].memory_bytes, 5ull << 30);
  EXPECT_EQ(a->devices[0].share_id, "abc");
  ASSERT_TRUE(a->devices[0].config);
  EXPECT_EQ(a->devices[0].config->sharing.strategy, SharingConfig::Strategy::mps);  // the claim's own wins
  EXPECT_EQ(a->devices[0].config->sharing.active_thread_percentage, 50u);
  ASSERT_TRUE(a->devices[1].config);
  EXPECT_EQ(a->devices[1].config->sharing.strategy, SharingConfig::Strategy::time_slicing);  // the class's
}

// A prioritized list (firstAvailable): the result names the subrequest,
// "gpu/small"; a config for the request "gpu" applies to whichever
// subrequest was chosen, one for "gpu/small" to that one only, the later
// config winning as for plain requests.
TEST(DraClaim, ASubrequestTakesItsParentsConfigAndItsOwn) {
  json results = json::array({result("gpu/small", "gpu-0-mig-1g10gb-19-6"), result("other/big", "gpu-1-mig-3g40gb-9-4")});
  json configs = json::array({
      opaque(mig_config({{"strategy", "TimeSlicing"}}), json::array({"gpu"})),
      opaque(mig_config({{"strategy", "MPS"}}), json::array({"other/big"})),
      opaque(mig_config({{"strategy", "TimeSlicing"}}), json::array({"other/small"})),
  });
  auto a = read_allocation(claim(results, configs), "gpu.nvidia.com", "node-a", "u1");
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->devices.size(), 2u);
  EXPECT_EQ(a->devices[0].request, "gpu/small");
  ASSERT_TRUE(a->devices[0].config);
  EXPECT_EQ(a->devices[0].config->sharing.strategy, SharingConfig::Strategy::time_slicing);
  ASSERT_TRUE(a->devices[1].config);
  EXPECT_EQ(a->devices[1].config->sharing.strategy, SharingConfig::Strategy::mps) << "its own subrequest's, not a sibling's";
}

TEST(DraClaim, AnUnallocatedOrReplacedClaimIsRefused) {
  auto a = read_allocation({{"metadata", {{"namespace", "ns"}, {"name", "c"}, {"uid", "u1"}}}}, "gpu.nvidia.com", "n", "u1");
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("not allocated"), std::string::npos) << a.error().message;
  a = read_allocation(claim(json::array()), "gpu.nvidia.com", "n", "u2");
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("created again"), std::string::npos) << a.error().message;
  a = read_allocation(json::array({1, 2}), "gpu.nvidia.com", "n", "u1");
  EXPECT_FALSE(a);
}

TEST(DraClaim, EveryMalformedConfigNamesItsFieldAndChangesNothing) {
  const json api = "resource.nvidia.com/v1beta1";
  struct Case {
    json parameters;
    std::string expect;
  };
  const std::vector<Case> cases{
      {json::array({1}), "parameters must be an object"},
      {{{"apiVersion", "resource.nvidia.com/v2"}, {"kind", "GpuConfig"}}, "apiVersion"},
      {{{"apiVersion", api}, {"kind", "VfioDeviceConfig"}}, "neither GpuConfig nor MigDeviceConfig"},
      {{{"apiVersion", api}, {"kind", "GpuConfig"}, {"shraing", {}}}, "unknown field \"shraing\""},
      {{{"apiVersion", api}, {"kind", "GpuConfig"}, {"sharing", "MPS"}}, "must be an object"},
      {{{"apiVersion", api}, {"kind", "GpuConfig"}, {"sharing", json::object()}}, "strategy: is required"},
      {{{"apiVersion", api}, {"kind", "GpuConfig"}, {"sharing", {{"strategy", "mps"}}}}, "neither TimeSlicing nor MPS"},
      {{{"apiVersion", api}, {"kind", "GpuConfig"}, {"sharing", {{"strategy", "TimeSlicing"}, {"mpsConfig", json::object()}}}},
       "for the MPS strategy only"},
      {{{"apiVersion", api}, {"kind", "GpuConfig"},
        {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", 3}}}}}},
       "must be Default, Short, Medium or Long"},
      {{{"apiVersion", api}, {"kind", "GpuConfig"},
        {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "long"}}}}}},
       "\"long\" is not one of Default, Short, Medium, Long"},
      {{{"apiVersion", api}, {"kind", "GpuConfig"},
        {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Forever"}}}}}},
       "not one of Default"},
      {mig_config({{"strategy", "TimeSlicing"}, {"timeSlicingConfig", json::object()}}), "a MigDeviceConfig has no"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", 0}}}}), "from 1 to 100"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", 101}}}}), "from 1 to 100"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", "50"}}}}), "from 1 to 100"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultPinnedDeviceMemoryLimit", "-1Gi"}}}}), "negative"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultPinnedDeviceMemoryLimit", "0"}}}}), "more than 0"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultPinnedDeviceMemoryLimit", 0}}}}), "more than 0"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultPinnedDeviceMemoryLimit", "10 parsecs"}}}}), "unknown unit"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"defaultPerDevicePinnedMemoryLimit", "all"}}}}), "must map a device"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"multiUser", "yes"}}}}), "true or false"},
      {mig_config({{"strategy", "MPS"}, {"mpsConfig", {{"threads", 4}}}}), "unknown field \"threads\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.parameters.dump());
    auto parsed = parse_device_config(c.parameters);
    ASSERT_FALSE(parsed);
    EXPECT_NE(parsed.error().message.find(c.expect), std::string::npos) << parsed.error().message;
    // In a claim, the whole claim is refused and says which config.
    auto a = read_allocation(claim(json::array({result("r", "gpu-0")}), json::array({opaque(c.parameters)})),
                             "gpu.nvidia.com", "node-a", "u1");
    ASSERT_FALSE(a);
    EXPECT_NE(a.error().message.find("config 0 (FromClaim)"), std::string::npos) << a.error().message;
  }
}

TEST(DraClaim, NvidiasOwnExamplesParse) {
  // dra-driver-nvidia-gpu demo/specs: MPS with limits, time-slicing by default.
  auto mps = parse_device_config(json::parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
      "defaultPinnedDeviceMemoryLimit": "10Gi", "defaultPerDevicePinnedMemoryLimit": {"0": "5Gi"}}}})"));
  ASSERT_TRUE(mps) << mps.error().message;
  EXPECT_EQ(mps->sharing.pinned_memory_limit, 10ull << 30);
  EXPECT_EQ(mps->sharing.per_device_pinned_memory_limit.at("0"), 5ull << 30);
  auto ts = parse_device_config(json::parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}})"));
  ASSERT_TRUE(ts) << ts.error().message;
  EXPECT_EQ(ts->sharing.strategy, SharingConfig::Strategy::time_slicing);
  EXPECT_EQ(ts->sharing.timeslice, 0u);
  // The quickstart's gpu-test claim (interval: Long), and every other interval, as the levels
  // `nvidia-smi compute-policy --set-timeslice` takes.
  const std::pair<const char*, uint32_t> intervals[] = {{"Short", 1}, {"Medium", 2}, {"Long", 3}};
  for (const auto& [name, level] : intervals) {
    auto t = parse_device_config(json::parse(std::string(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": ")") + name + R"("}}})"));
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->sharing.timeslice, level) << name;
  }
  auto none = parse_device_config(json::parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing"}})"));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->sharing.timeslice);
}

}  // namespace
}  // namespace tessera::dra
