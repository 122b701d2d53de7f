#include "sharing/health.hpp"

#include <gtest/gtest.h>

#include "sharing/fixtures.hpp"

namespace tessera::sharing {
namespace {

using namespace std::chrono_literals;

std::vector<Resource> mixed() {
  auto rs = build_resources(testing::two_gpu_node(), testing::parse("version: v1\nflags: {migStrategy: mixed}\n"));
  EXPECT_TRUE(rs);
  return *rs;
}

const Device& device(const std::vector<Resource>& rs, const std::string& id) {
  for (const auto& r : rs)
    if (const auto* d = r.find(id)) return *d;
  throw std::runtime_error("no device " + id);
}

TEST(Health, CriticalXidMakesTheGpuAndItsMigDevicesUnhealthyThenRecovers) {
  auto rs = mixed();
  HealthTracker t({.ignored_xids = {13, 31, 43, 45, 68, 109}, .recovery = 30s});
  Clock::time_point t0{};
  EXPECT_TRUE(t.record({HealthEvent::Kind::xid, 79, "GPU-1111", std::nullopt, std::nullopt, t0}));
  EXPECT_FALSE(t.healthy(device(rs, "MIG-a")));
  EXPECT_FALSE(t.healthy(device(rs, "MIG-c")));
  EXPECT_TRUE(t.healthy(device(rs, "GPU-0000")));
  auto answers = [](const std::string&) { return true; };
  EXPECT_FALSE(t.recover(t0 + 29s, answers));
  EXPECT_FALSE(t.healthy(device(rs, "MIG-a")));
  EXPECT_TRUE(t.recover(t0 + 30s, answers));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-a")));
}

// Devices a MIG change is about to destroy are taken out of service, whole
// GPUs by their UUID (every device on them) and MIG devices by theirs, and
// come back when the set no longer names them.
TEST(Health, WithdrawnDevicesAreUnhealthyUntilPutBack) {
  auto rs = mixed();
  HealthTracker t;
  EXPECT_TRUE(t.set_withdrawn({"MIG-a"}));
  EXPECT_FALSE(t.set_withdrawn({"MIG-a"})) << "unchanged";
  EXPECT_FALSE(t.healthy(device(rs, "MIG-a")));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-c")));
  EXPECT_TRUE(t.healthy(device(rs, "GPU-0000")));
  EXPECT_TRUE(t.set_withdrawn({"GPU-1111"}));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-a")) == false && !t.healthy(device(rs, "MIG-c")));
  EXPECT_TRUE(t.healthy(device(rs, "GPU-0000")));
  EXPECT_TRUE(t.set_withdrawn({}));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-a")));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-c")));
}

// XID 79 and then silence: the clock alone never brings the GPU back; it
// must answer the probe, which is asked at most once per probe interval.
TEST(Health, RecoveryIsEarnedByAGpuThatAnswers) {
  auto rs = mixed();
  HealthTracker t({.recovery = 5s, .probe_interval = 1s});
  Clock::time_point t0{};
  t.record({HealthEvent::Kind::xid, 79, "GPU-1111", std::nullopt, std::nullopt, t0});
  std::vector<std::string> asked;
  bool lost = true;
  auto probe = [&](const std::string& gpu) {
    asked.push_back(gpu);
    return !lost;
  };
  EXPECT_FALSE(t.recover(t0 + 4s, probe));
  EXPECT_TRUE(asked.empty());  // not quiet long enough: not even asked
  EXPECT_FALSE(t.recover(t0 + 5s, probe));
  EXPECT_FALSE(t.recover(t0 + 5500ms, probe));  // within the probe interval: not asked again
  EXPECT_FALSE(t.recover(t0 + 1h, probe));
  EXPECT_EQ(asked, (std::vector<std::string>{"GPU-1111", "GPU-1111"}));
  EXPECT_FALSE(t.healthy(device(rs, "MIG-a")));
  lost = false;
  EXPECT_FALSE(t.recover(t0 + 1h + 500ms, probe));  // still waiting for the next probe
  EXPECT_TRUE(t.recover(t0 + 1h + 1s, probe));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-a")));
  EXPECT_TRUE(t.healthy(device(rs, "GPU-0000")));  // never asked about the other GPU
  EXPECT_EQ(asked.size(), 3u);
}

// A failed event watch is critical for the GPU it names, and a later event
// restarts the quiet period.
TEST(Health, DriverErrorsAreCriticalAndExtendTheFailure) {
  auto rs = mixed();
  HealthTracker t({.recovery = 5s});
  Clock::time_point t0{};
  EXPECT_TRUE(t.record({HealthEvent::Kind::driver_error, 0, "GPU-0000", std::nullopt, std::nullopt, t0}));
  EXPECT_TRUE(t.record({HealthEvent::Kind::driver_error, 0, "GPU-0000", std::nullopt, std::nullopt, t0 + 3s}));
  auto answers = [](const std::string&) { return true; };
  EXPECT_FALSE(t.recover(t0 + 7s, answers));
  EXPECT_FALSE(t.healthy(device(rs, "GPU-0000")));
  EXPECT_TRUE(t.recover(t0 + 8s, answers));
  EXPECT_TRUE(t.healthy(device(rs, "GPU-0000")));
}

TEST(Health, ApplicationXidsAreIgnored) {
  auto rs = mixed();
  HealthTracker t;
  for (uint64_t xid : {13, 31, 43, 45, 68, 109})
    EXPECT_FALSE(t.record({HealthEvent::Kind::xid, xid, "GPU-0000", std::nullopt, std::nullopt, {}}));
  EXPECT_FALSE(t.record({HealthEvent::Kind::single_bit_ecc, 0, "GPU-0000", std::nullopt, std::nullopt, {}}));
  EXPECT_TRUE(t.healthy(device(rs, "GPU-0000")));
  EXPECT_TRUE(t.record({HealthEvent::Kind::double_bit_ecc, 0, "GPU-0000", std::nullopt, std::nullopt, {}}));
  EXPECT_FALSE(t.healthy(device(rs, "GPU-0000")));
}

TEST(Health, MigEventHitsOnlyItsInstanceButTheWholeGpuView) {
  auto rs = mixed();
  HealthTracker t;
  t.record({HealthEvent::Kind::xid, 94, "GPU-1111", 4u, 0u, {}});  // MIG-b: GI 4
  EXPECT_FALSE(t.healthy(device(rs, "MIG-b")));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-a")));
  EXPECT_TRUE(t.healthy(device(rs, "MIG-c")));
  Device whole{"GPU-1111", "GPU-1111", "1", 1, "GPU-1111", 0, 0, 1, false, 0, 0};
  EXPECT_FALSE(t.healthy(whole));
}

}  // namespace
}  // namespace tessera::sharing
