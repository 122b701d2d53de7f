// The DRA model: its counters admit exactly the layouts the hardware's rules
// (core's check_layout) admit, on every MIG model in the catalog; devices
// carry NVIDIA's names, attributes and capacities; the order puts what fits
// now first and spares larger placements.
#include "sharing/dra.hpp"

#include <gtest/gtest.h>

#include <set>

#include "core/catalog.hpp"
#include "core/mig_layout.hpp"

namespace tessera::sharing::dra {
namespace {

const GpuModel& model(const char* name) {
  const auto* m = Catalog::builtin().find(name);
  if (!m) throw std::runtime_error(std::string("no model ") + name);
  return *m;
}

Gpu gpu(const GpuModel& m, uint32_t minor, bool mig = true) {
  Gpu g;
  g.index = minor;
  g.minor = minor;
  g.uuid = "GPU-" + std::to_string(minor);
  g.model = &m;
  g.product_name = m.nvml_name;
  g.driver_version = "550.90.07";
  g.cuda_driver_version = "12.4";
  g.pci_bus_id = "0000:0" + std::to_string(minor) + ":00.0";
  g.memory_bytes = m.memory_mib << 20;
  g.mig_enabled = mig;
  return g;
}

std::vector<Device> mig_devices(const Gpu& g, const Taken& taken = {}, Order order = Order::by_start) {
  auto all = devices({g}, {taken}, {.order = order});
  std::vector<Device> out;
  for (auto& d : all)
    if (d.mig) out.push_back(std::move(d));
  return out;
}

// A rule of NVIDIA's, written here apart from the catalog's engine counts:
// a GPU has one optical-flow engine, which a media-engine profile ("+me")
// holds whole, so no two media-engine instances run on one GPU (MIG User
// Guide, "Supported MIG Profiles": the A30's, A100's and H100's tables give
// every +me profile the GPU's only OFA; on an A30 also its only JPEG).
size_t media_instances(const GpuModel& m, const Taken& layout) {
  size_t n = 0;
  for (const auto& t : layout)
    if (m.profiles[t.profile].name.find("+me") != std::string::npos) ++n;
  return n;
}

// Walks every set of placements the counters admit, adding candidates in
// order; at every step the counters and check_layout must agree on whether
// the next candidate can join, and neither may admit two media-engine
// instances. Both are closed under subsets, so agreeing on every extension
// of every admitted set is agreeing on every set.
struct Walk {
  const Gpu& g;
  const std::vector<Device>& candidates;
  size_t admitted = 0;
  size_t refused = 0;

  void from(size_t first, Taken& taken) {
    for (size_t i = first; i < candidates.size(); ++i) {
      const auto& c = candidates[i];
      Taken next = taken;
      next.push_back(*c.mig);
      const bool hardware = check_layout(*g.model, next).has_value();
      const bool counters = fits(g, c, taken);
      ASSERT_EQ(hardware, counters) << g.model->name << ": " << describe_layout(*g.model, taken) << " + " << c.name;
      ASSERT_FALSE(hardware && media_instances(*g.model, next) > 1)
          << g.model->name << ": " << describe_layout(*g.model, next) << " holds two media-engine instances";
      if (!hardware) {
        ++refused;
        continue;
      }
      ++admitted;
      from(i + 1, next);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
};

TEST(DraCounters, AdmitExactlyTheHardwaresLayoutsOnEveryMigModel) {
  size_t models = 0;
  for (const auto& m : Catalog::builtin().models()) {
    if (m.profiles.empty()) continue;
    ++models;
    Gpu g = gpu(m, 0);
    auto candidates = mig_devices(g);
    ASSERT_FALSE(candidates.empty()) << m.name;
    Walk walk{g, candidates};
    Taken none;
    walk.from(0, none);
    if (HasFatalFailure()) return;
    EXPECT_GT(walk.admitted, candidates.size()) << m.name;  // layouts of more than one instance exist
    EXPECT_GT(walk.refused, 0u) << m.name;
  }
  EXPECT_GE(models, 4u);
}

TEST(DraCounters, ACounterSetPerGpuWithinTheApisLimits) {
  for (const auto& m : Catalog::builtin().models()) {
    if (m.profiles.empty()) continue;
    auto set = counter_set(gpu(m, 3));
    ASSERT_TRUE(set) << m.name;
    EXPECT_EQ(set->name, "gpu-3-counter-set");
    EXPECT_LE(set->counters.size(), 32u) << m.name;  // resource.k8s.io/v1: at most 32 counters per set
    std::set<std::string> names;
    for (const auto& c : set->counters) {
      EXPECT_TRUE(names.insert(c.name).second) << c.name;
      EXPECT_GT(c.value, 0) << c.name;
      EXPECT_LE(c.name.size(), 63u) << c.name;  // a DNS label
    }
  }
}

TEST(DraCounters, TheWholeGpuConsumesEverySliceSoNoMigDeviceFitsBesideIt) {
  const auto& m = model("A100-SXM4-80GB");
  Gpu g = gpu(m, 0, false);
  g.mig_mode_switchable = true;
  auto all = devices({g}, {{}}, {.order = Order::by_start});
  const Device* whole = nullptr;
  for (const auto& d : all)
    if (!d.mig) whole = &d;
  ASSERT_NE(whole, nullptr);
  EXPECT_TRUE(fits(g, *whole, {}));
  Taken whole_taken{{kWholeGpuProfile, 0}};
  for (const auto& d : all) {
    if (d.mig) {
      EXPECT_FALSE(fits(g, d, whole_taken)) << d.name;
    }
  }
  // And one MIG device keeps the whole GPU out.
  for (const auto& d : all) {
    if (!d.mig) continue;
    EXPECT_FALSE(fits(g, *whole, {*d.mig})) << d.name;
    break;
  }
}

TEST(DraDevices, NamesAttributesAndCapacitiesAsNvidiasDriverPublishes) {
  const auto& m = model("A100-SXM4-80GB");
  Gpu g = gpu(m, 2);
  auto all = devices({g}, {{}}, {.order = Order::by_start});
  const Device* one = nullptr;
  for (const auto& d : all)
    if (d.name == "gpu-2-mig-1g10gb-19-6") one = &d;
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(std::get<std::string>(one->attributes.at("type")), "mig");
  EXPECT_EQ(std::get<std::string>(one->attributes.at("profile")), "1g.10gb");
  EXPECT_EQ(std::get<std::string>(one->attributes.at("parentUUID")), "GPU-2");
  EXPECT_EQ(std::get<std::string>(one->attributes.at("productName")), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(std::get<std::string>(one->attributes.at("architecture")), "Ampere");
  EXPECT_EQ(std::get<Version>(one->attributes.at("cudaComputeCapability")).value, "8.0.0");
  EXPECT_EQ(std::get<Version>(one->attributes.at("driverVersion")).value, "550.90.7");
  EXPECT_EQ(std::get<Version>(one->attributes.at("cudaDriverVersion")).value, "12.4.0");
  EXPECT_EQ(std::get<int64_t>(one->attributes.at("minor")), 2);
  EXPECT_EQ(one->capacity.at("multiprocessors"), 14u);
  EXPECT_EQ(one->capacity.at("memory") >> 20, m.profile("1g.10gb")->memory_mib);
  EXPECT_EQ(one->counter_set, "gpu-2-counter-set");
  // With MIG on and no mode switch, the whole GPU is not offered.
  for (const auto& d : all) EXPECT_TRUE(d.mig.has_value()) << d.name;
  // Media variants keep their suffix in the token.
  EXPECT_EQ(profile_token("1g.10gb+me"), "1g10gb-me");
  EXPECT_EQ(profile_token("1g.10gb-me"), "1g10gb-me");
  EXPECT_EQ(profile_token("3g.40gb"), "3g40gb");
}

TEST(DraDevices, AGpuWithoutMigIsOfferedWholeAndAnUnknownModelWithoutCounters) {
  Gpu g = gpu(model("A100-SXM4-80GB"), 0, false);
  auto all = devices({g}, {{}}, {});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "gpu-0");
  EXPECT_EQ(std::get<std::string>(all[0].attributes.at("type")), "gpu");
  EXPECT_EQ(std::get<std::string>(all[0].attributes.at("uuid")), "GPU-0");
  EXPECT_EQ(all[0].capacity.at("memory"), 80ull * 1024 << 20);

  Gpu unknown = g;
  unknown.model = nullptr;
  unknown.product_name = "NVIDIA Future GPU";
  all = devices({unknown}, {{}}, {});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0].counter_set.empty());
  EXPECT_TRUE(all[0].consumes.empty());
  EXPECT_FALSE(counter_set(unknown));
}

// Attributes come from the driver (NVML) for any GPU; the catalog fills in
// only what NVML could not say. A GPU the catalog lacks is offered whole with
// MIG off and not at all with MIG on (it could not be prepared).
TEST(DraDevices, AttributesAreTheDriversAndAnUnknownModelInMigIsNotOffered) {
  Gpu l4 = gpu(model("A100-SXM4-80GB"), 0, false);
  l4.model = nullptr;
  l4.product_name = "NVIDIA L4";
  l4.architecture = "Ada Lovelace";
  l4.compute_capability = "8.9";
  l4.brand = "Nvidia";
  auto all = devices({l4}, {{}}, {});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(std::get<std::string>(all[0].attributes.at("architecture")), "Ada Lovelace");
  EXPECT_EQ(std::get<Version>(all[0].attributes.at("cudaComputeCapability")).value, "8.9.0");
  EXPECT_EQ(std::get<std::string>(all[0].attributes.at("brand")), "Nvidia");

  Gpu unsure = l4;  // NVML could say none of them
  unsure.architecture = unsure.compute_capability = unsure.brand = "";
  all = devices({unsure}, {{}}, {});
  ASSERT_EQ(all.size(), 1u);
  for (const char* a : {"architecture", "cudaComputeCapability", "brand"}) EXPECT_FALSE(all[0].attributes.contains(a)) << a;

  Gpu known = gpu(model("H100-SXM5-80GB"), 1, false);  // the catalog where NVML is silent, NVML where it speaks
  all = devices({known}, {{}}, {});
  EXPECT_EQ(std::get<std::string>(all[0].attributes.at("architecture")), "Hopper");
  EXPECT_EQ(std::get<Version>(all[0].attributes.at("cudaComputeCapability")).value, "9.0.0");
  known.brand = "Tesla";
  known.compute_capability = "9.1";
  all = devices({known}, {{}}, {});
  EXPECT_EQ(std::get<std::string>(all[0].attributes.at("brand")), "Tesla");
  EXPECT_EQ(std::get<Version>(all[0].attributes.at("cudaComputeCapability")).value, "9.1.0");

  Gpu in_mig = l4;
  in_mig.mig_enabled = true;
  EXPECT_TRUE(devices({in_mig}, {{}}, {}).empty());
}

TEST(DraDevices, DevicesCarryTheirGpusTaintsAndTheirInstancesAndComeLast) {
  const auto& m = model("A100-SXM4-80GB");
  Gpu sick = gpu(m, 0, false);
  sick.taints = {{"gpu.nvidia.com/xid", "48", "NoSchedule"}};
  Gpu fine = gpu(m, 1, false);
  auto all = devices({sick, fine}, {{}, {}}, {});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "gpu-1");  // the healthy GPU first
  EXPECT_TRUE(all[0].taints.empty());
  ASSERT_EQ(all[1].taints.size(), 1u);
  EXPECT_EQ(all[1].taints[0].value, "48");

  Gpu mig = gpu(m, 2);
  const uint32_t three = static_cast<uint32_t>(m.profile("3g.40gb") - m.profiles.data());
  mig.instance_taints[{three, 4}] = {{"gpu.nvidia.com/xid", "94", "NoSchedule"}};
  size_t tainted = 0;
  for (const auto& d : devices({mig}, {{}}, {})) {
    if (d.taints.empty()) continue;
    ++tainted;
    EXPECT_EQ(d.name, "gpu-2-mig-3g40gb-9-4");
  }
  EXPECT_EQ(tainted, 1u);
}

TEST(DraDevices, InstancesTesseraDidNotCutAreServedAsTheyAreAndBlockWhatOverlaps) {
  const auto& m = model("A100-SXM4-80GB");
  Gpu g = gpu(m, 0);
  const uint32_t three = static_cast<uint32_t>(m.profile("3g.40gb") - m.profiles.data());
  const Taken fixed{{three, 4}};
  auto all = devices({g}, {{}}, {}, {fixed});
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().name, "gpu-0-mig-3g40gb-9-4");  // nothing to cut: first
  EXPECT_TRUE(all.front().fixed);
  EXPECT_TRUE(all.front().consumes.empty());
  for (const auto& d : all) {
    if (d.fixed) continue;
    Taken with = fixed;
    with.push_back(*d.mig);
    EXPECT_TRUE(check_layout(m, with).has_value()) << d.name << " overlaps the fixed instance";
    EXPECT_TRUE(fits(g, d, fixed)) << d.name;
  }
  auto set = counter_set(g, fixed);
  ASSERT_TRUE(set);
  for (const auto& c : set->counters) {
    if (c.name == "memory-slice-4" || c.name == "memory-slice-7") {
      EXPECT_EQ(c.value, 0) << c.name;
    }
  }
}

TEST(DraOrder, WhatFitsNowComesFirstAndTakenPlacementsLast) {
  const auto& m = model("A100-SXM4-80GB");
  Gpu g = gpu(m, 0);
  const uint32_t three = static_cast<uint32_t>(m.profile("3g.40gb") - m.profiles.data());
  Taken taken{{three, 4}};
  auto order = mig_devices(g, taken, Order::tessera);
  bool seen_blocked = false;
  for (const auto& d : order) {
    const bool now = fits(g, d, taken);
    if (!now) seen_blocked = true;
    else EXPECT_FALSE(seen_blocked) << d.name << " fits now but comes after one that does not";
  }
  EXPECT_TRUE(seen_blocked);
}

TEST(DraOrder, SmallProfilesSpareTheLargerPlacements) {
  // On an empty A100 the first 1g.10gb the scheduler meets must not sit where
  // it breaks the 4g.40gb at 0 and the 3g.40gb at 4 both: NVIDIA's order
  // (start 0) breaks the 7g and the 4g; tessera's takes the end (start 6),
  // which leaves a 4g.40gb free.
  const auto& m = model("A100-SXM4-80GB");
  Gpu g = gpu(m, 0);
  auto first_of = [&](Order order, const std::string& profile) -> PlacedInstance {
    for (const auto& d : mig_devices(g, {}, order))
      if (std::get<std::string>(d.attributes.at("profile")) == profile) return *d.mig;
    throw std::runtime_error("no " + profile);
  };
  EXPECT_EQ(first_of(Order::by_start, "1g.10gb").start, 0u);
  const auto chosen = first_of(Order::tessera, "1g.10gb");
  EXPECT_EQ(chosen.start, 6u);
  const uint32_t four = static_cast<uint32_t>(m.profile("4g.40gb") - m.profiles.data());
  Taken with_small{chosen};
  EXPECT_TRUE(check_layout(m, std::vector<PlacedInstance>{chosen, {four, 0}}).has_value());
}

TEST(DraOrder, TheFullestGpuIsFilledFirst) {
  const auto& m = model("A100-SXM4-80GB");
  Gpu a = gpu(m, 0), b = gpu(m, 1);
  const uint32_t three = static_cast<uint32_t>(m.profile("3g.40gb") - m.profiles.data());
  auto all = devices({a, b}, {{}, {{three, 4}}}, {});
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().gpu, 1u) << all.front().name;
}

}  // namespace
}  // namespace tessera::sharing::dra
