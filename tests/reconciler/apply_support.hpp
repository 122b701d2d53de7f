// Simulated nodes and NVIDIA's default configs for the `mig apply` tests.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>

#include "config/mig_parted.hpp"
#include "config/mig_parted_validate.hpp"
#include "support/data.hpp"
#include "support/run.hpp"

namespace tessera {

using nlohmann::json;
using testing::run;
using testing::TempDir;

inline const std::string kBin = TESSERA_BIN;
inline const std::string kDefaults = testing::kNvidiaMigDefaults;

struct NamedConfig {
  std::string name;
  bool enabled = false;
  ProfileCounts counts;
};

// NVIDIA's configs whose first entry for `model` applies to it.
inline std::vector<NamedConfig> configs_for(const GpuModel& model) {
  config::Diagnostics diags;
  auto cfg = config::load_mig_parted(kDefaults, diags);
  std::vector<NamedConfig> out;
  if (!cfg) {
    ADD_FAILURE() << "cannot read " << kDefaults;
    return out;
  }
  for (const auto& mc : cfg->configs)
    for (const auto& e : mc.entries) {
      auto targets = config::entry_targets(e, Catalog::builtin());
      if (std::find(targets.begin(), targets.end(), &model) == targets.end()) continue;
      out.push_back({mc.name, e.mig_enabled, config::entry_counts(e)});
      break;
    }
  return out;
}

class Node {
 public:
  Node(const std::string& model, int count = 1) {
    auto r = run({kBin, "sim", "create", node_, "--gpu", model, "--count", std::to_string(count)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  testing::RunResult apply(const std::string& config, std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv{kBin, "mig", "apply", "-f", kDefaults, "-c", config, "--sim", node_, "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
  }
  json inventory() const {
    auto r = run({kBin, "inventory", "--sim", node_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  }
  // GPU 0's layout: (profile name, start) pairs, and whether every GPU
  // instance has exactly one compute instance (no orphans).
  MigLayout layout(const GpuModel& m, bool* no_orphans = nullptr) const {
    auto inv = inventory();
    MigLayout out;
    bool ok = true;
    for (const auto& gi : inv["gpus"][0]["gpu_instances"]) {
      const auto* p = m.profile(gi["profile"].get<std::string>());
      EXPECT_NE(p, nullptr) << gi.dump();
      if (!p) continue;
      out.push_back({static_cast<uint32_t>(p - m.profiles.data()), gi["placement"]["start"].get<uint32_t>()});
      ok = ok && gi["compute_instances"].size() == 1;
    }
    if (no_orphans) *no_orphans = ok;
    std::sort(out.begin(), out.end());
    return out;
  }
  bool mig_enabled() const { return inventory()["gpus"][0]["mig"]["current"].get<bool>(); }
  const std::string& dir() const { return node_; }

 private:
  TempDir tmp_;
  std::string node_ = tmp_.path() + "/node";
};

inline std::map<std::string, uint32_t> counts_of(const GpuModel& m, const MigLayout& l) {
  std::map<std::string, uint32_t> c;
  for (const auto& i : l) ++c[m.profiles[i.profile].name];
  return c;
}

inline void expect_matches(const GpuModel& m, const Node& node, const NamedConfig& c) {
  bool no_orphans = false;
  auto l = node.layout(m, &no_orphans);
  EXPECT_TRUE(no_orphans) << c.name;
  EXPECT_EQ(node.mig_enabled(), c.enabled) << c.name;
  std::map<std::string, uint32_t> want(c.counts.begin(), c.counts.end());
  EXPECT_EQ(counts_of(m, l), want) << c.name;
}

}  // namespace tessera
