// Small fleets as snapshots, for the fleet tests.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/mig_parted.hpp"
#include "fleet/fleet.hpp"

namespace tessera::fleet::testing {

using json = nlohmann::json;

inline const char* kMigConfigs = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
  h200-1g:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7
  a30-1g:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.6gb": 4
)";

inline config::MigPartedConfig configs() {
  config::Diagnostics d;
  auto c = config::parse_mig_parted(kMigConfigs, "test.yaml", d);
  EXPECT_TRUE(c && !d.has_errors());
  return *c;
}

inline json node(const std::string& name, const std::string& product, int count, const std::string& config,
                 const json& annotation = nullptr) {
  json n = {{"kind", "Node"},
            {"apiVersion", "v1"},
            {"metadata",
             {{"name", name},
              {"uid", "uid-" + name},
              {"labels", {{"nvidia.com/gpu.product", product}, {"nvidia.com/gpu.count", std::to_string(count)}}}}}};
  if (!config.empty()) n["metadata"]["labels"]["nvidia.com/mig.config"] = config;
  if (!annotation.is_null()) n["metadata"]["annotations"] = {{"tessera.dev/mig-layout", annotation.dump()}};
  return n;
}

inline json pod(const std::string& name, const std::string& resource, int count, const std::string& on = "",
                const std::string& phase = "") {
  std::string key = resource == "gpu" ? "nvidia.com/gpu" : "nvidia.com/mig-" + resource;
  json p = {{"kind", "Pod"},
            {"apiVersion", "v1"},
            // Owned, as a Deployment's or a Job's pods are (bare pods: bare_pod).
            {"metadata", {{"name", name}, {"namespace", "ml"},
                          {"ownerReferences", json::array({{{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"},
                                                             {"name", name + "-rs"}, {"uid", "rs-" + name},
                                                             {"controller", true}}})}}},
            {"spec", {{"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{key, std::to_string(count)}}}}}}})}}},
            {"status", {{"phase", phase.empty() ? (on.empty() ? "Pending" : "Running") : phase}}}};
  if (!on.empty()) p["spec"]["nodeName"] = on;
  return p;
}

// A pod nothing owns: nothing recreates it after an eviction.
inline json bare_pod(const std::string& name, const std::string& resource, int count, const std::string& on = "") {
  json p = pod(name, resource, count, on);
  p["metadata"].erase("ownerReferences");
  return p;
}

// A PodDisruptionBudget of namespace ml selecting app=<app>; `allowed`: its
// status.disruptionsAllowed (none: no status, as a hand-written one).
inline json budget(const std::string& name, const std::string& app, std::optional<int> allowed, const json& spec_extra = json::object()) {
  json b = {{"kind", "PodDisruptionBudget"},
            {"apiVersion", "policy/v1"},
            {"metadata", {{"name", name}, {"namespace", "ml"}}},
            {"spec", {{"selector", {{"matchLabels", {{"app", app}}}}}}}};
  b["spec"].update(spec_extra);
  if (allowed) b["status"] = {{"disruptionsAllowed", *allowed}};
  return b;
}
inline json labelled(json pod, const std::string& app) {
  pod["metadata"]["labels"]["app"] = app;
  return pod;
}

// A std::vector, not a json: nlohmann reads a braced list of one json as that json, not an array of it.
inline json list(std::vector<json> items) { return {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json(items)}}; }

struct Fleet {
  config::MigPartedConfig cfg = configs();
  Problem problem;
};

inline Fleet fleet_of(std::vector<json> items) {
  Fleet f;
  auto snap = parse_snapshot(list(items), "test");
  EXPECT_TRUE(snap) << (snap ? "" : snap.error().message);
  auto p = build_problem(*snap, f.cfg);
  EXPECT_TRUE(p) << (p ? "" : p.error().message);
  if (p) f.problem = std::move(*p);
  f.problem.configs = &f.cfg;
  return f;
}

}  // namespace tessera::fleet::testing
