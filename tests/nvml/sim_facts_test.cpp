// The simulator's hardware table (sim/nvml/hardware.cpp) against tessera's
// catalog (src/core, generated from data/mig-profiles.json), entry by entry.
// The two are written apart from each other on purpose: the simulator checks
// the product, so a catalog fact that is wrong must show up here rather than
// pass every simulator test. Each difference fails naming the model, the
// profile and the field; where they differ, NVIDIA's documentation decides
// which side is corrected (the sources are named in hardware.cpp).
//
// Compared: the models (names, aliases, PCI device id, the boards grouped with
// it), per model the NVML name, architecture, compute capability, memory,
// SMs, memory and compute slices and instance limit; per GPU-instance profile
// (matched by NVML profile index) the profile id, name, compute and memory
// slices, memory, SMs, engines, P2P, maximum count and every placement; per
// compute-instance profile the id, slices, SMs, maximum count and every
// placement. Engine counts are compared where the simulator has them from a
// published table or output for every engine (not for the B200's 3g/4g/7g
// rows, whose NVDEC/JPEG column in the MIG User Guide disagrees with the
// driver's output, nor for the GB200 and GH200 144GB, which have no table). The catalog's evidence and
// confidence notes are not compared.
//
// Tolerance: a memory or SM figure is compared exactly, except where the
// catalog marks it estimated (memory_estimated / sm_estimated) and NVIDIA
// publishes no exact figure either (the simulator marks its own derived value
// inexact). Such a pair must agree within kMemoryTolerance / kSmTolerance.
// A catalog estimate of 0 means the catalog has no figure at all (its
// generator writes 0 when the source table gives none: the GB200's SM count):
// nothing to compare. An NVML name the simulator has from no real device is
// not compared either.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/catalog.hpp"
#include "hardware.hpp"
#include "nvml/abi.hpp"

namespace tessera {
namespace {

namespace hw = sim::hw;
using namespace nvml::abi;

constexpr double kMemoryTolerance = 0.05;  // derived memory figures: within 5%
constexpr double kSmTolerance = 0.25;      // derived SM counts: within 25% (Hopper's are not linear in slices)

std::string placements_text(const std::vector<uint32_t>& starts, const std::vector<uint32_t>& sizes) {
  std::ostringstream out;
  out << "{";
  for (size_t i = 0; i < starts.size(); ++i) out << (i ? "," : "") << starts[i] << ":" << sizes[i];
  out << "}";
  return out.str();
}

template <class P>
std::string text_of(const std::vector<P>& ps) {
  std::vector<uint32_t> starts, sizes;
  for (const auto& p : ps) {
    starts.push_back(p.start);
    sizes.push_back(p.size);
  }
  return placements_text(starts, sizes);
}

std::string hex(uint32_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << std::uppercase << v;
  return out.str();
}

// Collects differences; each names where it is.
class Differences {
 public:
  template <class A, class B>
  void same(const std::string& where, const std::string& field, const A& catalog, const B& simulator) {
    if (catalog == simulator) return;
    std::ostringstream out;
    out << where << ": " << field << ": catalog " << catalog << ", simulator " << simulator;
    list_.push_back(out.str());
  }
  void near(const std::string& where, const std::string& field, double catalog, double simulator, double tolerance) {
    if (std::abs(catalog - simulator) <= tolerance * std::max(catalog, simulator)) return;
    std::ostringstream out;
    out << where << ": " << field << " (estimated on both sides): catalog " << catalog << ", simulator " << simulator
        << ", more than " << tolerance * 100 << "% apart";
    list_.push_back(out.str());
  }
  void note(const std::string& text) { list_.push_back(text); }
  void report() const {
    for (const auto& d : list_) ADD_FAILURE() << d;
  }
  bool empty() const { return list_.empty(); }

 private:
  std::vector<std::string> list_;
};

nvmlDeviceArchitecture_t nvml_architecture(const std::string& name) {
  if (name == "Ampere") return NVML_DEVICE_ARCH_AMPERE;
  if (name == "Hopper") return NVML_DEVICE_ARCH_HOPPER;
  if (name == "Blackwell") return NVML_DEVICE_ARCH_BLACKWELL;
  return NVML_DEVICE_ARCH_UNKNOWN;
}

std::string sorted_text(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return "[" + out + "]";
}

std::string sorted_hex(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  std::string out;
  for (auto x : v) out += (out.empty() ? "" : ", ") + hex(x);
  return "[" + out + "]";
}

void compare_memory(Differences& d, const std::string& where, uint64_t catalog, bool catalog_estimated,
                    uint64_t simulator, bool simulator_exact) {
  if (catalog_estimated && !simulator_exact)
    d.near(where, "memory MiB", static_cast<double>(catalog), static_cast<double>(simulator), kMemoryTolerance);
  else
    d.same(where, "memory MiB", catalog, simulator);
}

void compare_sm(Differences& d, const std::string& where, uint32_t catalog, bool catalog_estimated,
                uint32_t simulator, bool simulator_exact) {
  if (catalog_estimated && catalog == 0 && !simulator_exact) return;  // no figure in the catalog
  if (catalog_estimated && !simulator_exact)
    d.near(where, "SM count", catalog, simulator, kSmTolerance);
  else
    d.same(where, "SM count", catalog, simulator);
}

void compare_compute_profiles(Differences& d, const std::string& where, const GpuInstanceProfile& c,
                              const hw::GiProfile& s) {
  std::set<uint32_t> catalog_indices, sim_indices;
  for (const auto& cp : c.compute_profiles) catalog_indices.insert(cp.nvml_index);
  for (const auto& sp : s.compute_profiles) sim_indices.insert(sp.nvml_index);
  for (uint32_t i : catalog_indices)
    if (!sim_indices.count(i)) d.note(where + ": compute profile index " + std::to_string(i) + " only in the catalog");
  for (uint32_t i : sim_indices)
    if (!catalog_indices.count(i))
      d.note(where + ": compute profile index " + std::to_string(i) + " only in the simulator");
  for (const auto& cp : c.compute_profiles) {
    const auto* sp = s.compute_by_index(cp.nvml_index);
    if (!sp) continue;
    std::string at = where + " compute profile " + cp.name + " (index " + std::to_string(cp.nvml_index) + ")";
    d.same(at, "profile id", cp.profile_id, sp->profile_id);
    d.same(at, "compute slices", cp.slices, sp->slices);
    d.same(at, "max count", cp.max_count, sp->max_count);
    d.same(at, "placements", text_of(cp.placements), text_of(sp->placements));
    // 0 is "unknown" on both sides: compared only where both give a figure.
    if (cp.sm_count && sp->sm_count) d.same(at, "SM count", cp.sm_count, sp->sm_count);
  }
}

void compare_model(Differences& d, const GpuModel& c, const hw::Gpu& s) {
  const std::string where = "model " + c.name;
  d.same(where, "aliases", sorted_text(c.aliases), sorted_text(s.aliases));
  d.same(where, "PCI device id", hex(c.pci_device_id), hex(s.pci_device_id));
  d.same(where, "boards with the same geometry", sorted_hex(c.alias_pci_ids), sorted_hex(s.sibling_pci_ids));
  // An NVML name taken from a real device on either side is compared.
  if (s.nvml_name_exact) d.same(where, "NVML name", c.nvml_name, s.nvml_name);
  d.same(where, "architecture", c.architecture + "=" + std::to_string(nvml_architecture(c.architecture)),
         c.architecture + "=" + std::to_string(s.architecture));
  d.same(where, "compute capability", c.compute_capability,
         std::to_string(s.cc_major) + "." + std::to_string(s.cc_minor));
  compare_memory(d, where, c.memory_mib, c.memory_estimated, s.memory_mib, s.memory_exact);
  compare_sm(d, where, c.sm_count, c.sm_estimated, s.sm_count, s.sm_exact);
  d.same(where, "memory slices", c.memory_slices, s.memory_slices);
  d.same(where, "compute slices", c.compute_slices, s.compute_slices);
  d.same(where, "max instances", c.max_instances, s.max_instances);

  d.same(where, "GPU-instance profile count", c.profiles.size(), s.profiles.size());
  for (const auto& sp : s.profiles)
    if (!c.profile_by_nvml_index(sp.nvml_index))
      d.note(where + ": profile " + sp.name + " (index " + std::to_string(sp.nvml_index) + ") only in the simulator");
  for (const auto& cp : c.profiles) {
    const std::string at = where + " profile " + cp.name + " (index " + std::to_string(cp.nvml_index) + ")";
    const auto* sp = s.profile_by_index(cp.nvml_index);
    if (!sp) {
      d.note(at + ": only in the catalog");
      continue;
    }
    d.same(at, "profile id", cp.profile_id, sp->profile_id);
    d.same(at, "name", cp.name, sp->name);
    d.same(at, "compute slices", cp.slices, sp->slices);
    d.same(at, "memory slices", cp.memory_slices, sp->memory_slices);
    compare_memory(d, at, cp.memory_mib, cp.memory_estimated, sp->memory_mib, sp->memory_exact);
    compare_sm(d, at, cp.sm_count, cp.sm_estimated, sp->sm_count, sp->sm_exact);
    if (sp->engines_exact) {
      d.same(at, "copy engines", cp.engines.copy, sp->engines.copy);
      d.same(at, "NVDECs", cp.engines.decoders, sp->engines.decoders);
      d.same(at, "NVENCs", cp.engines.encoders, sp->engines.encoders);
      d.same(at, "JPEG engines", cp.engines.jpegs, sp->engines.jpegs);
      d.same(at, "OFAs", cp.engines.ofas, sp->engines.ofas);
    }
    d.same(at, "P2P", cp.p2p, sp->p2p);
    d.same(at, "max count", cp.max_count, sp->max_count);
    d.same(at, "placements", text_of(cp.placements), text_of(sp->placements));
    compare_compute_profiles(d, at, cp, *sp);
  }
}

TEST(SimFacts, TheSameModels) {
  std::set<std::string> catalog, simulator;
  for (const auto& m : Catalog::builtin().models()) catalog.insert(m.name);
  for (const auto& g : hw::gpus()) simulator.insert(g.name);
  for (const auto& n : catalog) EXPECT_TRUE(simulator.count(n)) << "model " << n << " is only in the catalog";
  for (const auto& n : simulator) EXPECT_TRUE(catalog.count(n)) << "model " << n << " is only in the simulator";
  EXPECT_EQ(catalog.size(), 11u);
}

// Every name the catalog accepts for a model (`tessera sim create --gpu`
// checks it first) finds the same model in the simulator, and the other way.
TEST(SimFacts, EveryNameFindsTheSameModel) {
  for (const auto& m : Catalog::builtin().models()) {
    std::vector<std::string> names = m.aliases;
    names.push_back(m.name);
    names.push_back(m.nvml_name);
    for (const auto& n : names) {
      const auto* g = hw::find_gpu(n);
      ASSERT_NE(g, nullptr) << "model " << m.name << ": the simulator does not know the name '" << n << "'";
      EXPECT_EQ(g->name, m.name) << "the name '" << n << "'";
    }
  }
  for (const auto& g : hw::gpus()) {
    std::vector<std::string> names = g.aliases;
    names.push_back(g.name);
    names.push_back(g.nvml_name);
    for (const auto& n : names) {
      const auto* m = Catalog::builtin().find(n);
      ASSERT_NE(m, nullptr) << "model " << g.name << ": the catalog does not know the name '" << n << "'";
      EXPECT_EQ(m->name, g.name) << "the name '" << n << "'";
    }
  }
  EXPECT_EQ(hw::find_gpu("a100-sxm4-80gb")->name, "A100-SXM4-80GB");  // case-insensitive, as the catalog
  EXPECT_EQ(hw::find_gpu("Z9000"), nullptr);
}

TEST(SimFacts, EveryModelProfileAndPlacementAgrees) {
  Differences d;
  for (const auto& m : Catalog::builtin().models()) {
    const auto* g = hw::find_gpu(m.name);
    if (!g || g->name != m.name) continue;  // reported by TheSameModels
    compare_model(d, m, *g);
  }
  d.report();
}

// The simulator's table on its own: what the hardware rules need to hold.
TEST(SimFacts, TheSimulatorsTableIsConsistent) {
  for (const auto& g : hw::gpus()) {
    SCOPED_TRACE(g.name);
    EXPECT_EQ(g.pci_device_id & 0xFFFF, 0x10DEu);  // NVIDIA's vendor id
    std::set<uint32_t> ids, indices;
    for (const auto& p : g.profiles) {
      SCOPED_TRACE(p.name);
      EXPECT_TRUE(ids.insert(p.profile_id).second);
      EXPECT_TRUE(indices.insert(p.nvml_index).second);
      EXPECT_LT(p.nvml_index, NVML_GPU_INSTANCE_PROFILE_COUNT);
      EXPECT_LE(p.slices, g.compute_slices);
      EXPECT_GE(p.max_count, 1u);
      EXPECT_LE(p.max_count, p.placements.size());
      for (const auto& pl : p.placements) {
        EXPECT_EQ(pl.size, p.memory_slices);
        EXPECT_LE(pl.start + pl.size, g.memory_slices);
      }
      EXPECT_EQ(p.memory_mib % 64, 0u);
      EXPECT_LE(p.memory_mib, g.memory_mib);
      ASSERT_NE(p.compute_by_id(p.compute_profiles.back().profile_id), nullptr);
      EXPECT_EQ(p.compute_profiles.back().slices, p.slices);  // the whole GPU instance comes last
      for (const auto& c : p.compute_profiles) {
        EXPECT_LT(c.nvml_index, NVML_COMPUTE_INSTANCE_PROFILE_COUNT);
        for (const auto& pl : c.placements) EXPECT_LE(pl.start + pl.size, p.slices);
      }
    }
  }
}

}  // namespace
}  // namespace tessera
