// The files a plan becomes, in the formats the ecosystem already reads:
// mig-parted's config (one named config per kind of node) with the nodes
// that take each; NVIDIA's device-plugin config for the shared slices; one
// Deployment per service and resource; an SVG map of the GPUs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/plan.hpp"
#include "planner/problem.hpp"

namespace tessera::planner {

// A node holds up to --gpus-per-node GPUs of one model (a tensor-parallel
// replica's GPUs on one node); one mig-parted config (node label
// nvidia.com/mig.config) cuts each of its devices as the plan says.
struct Node {
  std::string name;      // "node-000"
  std::string model;     // GPU model
  std::string config;    // mig-parted config name
  std::vector<uint32_t> gpus;  // plan GPU indices, in device order
  std::vector<int> layouts;    // each device's layout (Problem::layouts)
  // The device-plugin config it takes (its nvidia.com/device-plugin.config label, the key of
  // device-plugin-<config>.yaml): set by device_plugin_configs.
  std::string device_plugin_config;
  // GPUs that hold both time-sliced and MPS slices: a node's plugin shares one way, so its
  // config shares them all through MPS.
  std::vector<uint32_t> mixed_sharing;
};

std::vector<Node> assign_nodes(const Problem& problem, const Plan& plan, uint32_t gpus_per_node = 8);

// "tessera-a100-sxm4-80gb-3g.40gbx2": the config of a node whose GPUs are all cut
// that way; a node whose GPUs differ takes "tessera-<model>-node-<n>".
std::string config_name(const Problem& problem, int layout);

// mig-parted config v1 holding the nodes' configs: `devices: all` for a node cut
// one way, one entry per layout with its device indices otherwise.
std::string render_mig_parted(const Problem& problem, const std::vector<Node>& nodes);

// nodes -> mig-parted config, with the plan GPUs on each.
std::string render_node_map(const Problem& problem, const std::vector<Node>& nodes);

// NVIDIA device-plugin configs (version v1), one per kind of node (name -> text), each node's
// set in its device_plugin_config: "dedicated" where no slice is shared, "mps" where some are
// shared through MPS (a node's time-sliced slices then too, since its plugin shares one way),
// "time-slicing" where some are time-sliced; "mps-2" and so on where nodes share other
// resources the same way.
std::map<std::string, std::string> device_plugin_configs(const Problem& problem, const Plan& plan, std::vector<Node>& nodes);

// Kubernetes Deployments, one per (service, resource), separated by "---".
std::string render_deployments(const Problem& problem, const Plan& plan);

// The resource a replica of `service` requests on `instance`: "nvidia.com/mig-3g.40gb",
// "nvidia.com/gpu", "nvidia.com/gpu.shared".
std::string resource_name(const Problem& problem, const PlannedInstance& instance);

// The plan as YAML: per GPU its node, mig-parted config and instances with their
// replicas ("service/replica", "#rank" for tensor-parallel ranks).
std::string render_plan(const Problem& problem, const Plan& plan, const std::vector<Node>& nodes);

std::string render_svg(const Problem& problem, const Plan& plan);

}  // namespace tessera::planner
