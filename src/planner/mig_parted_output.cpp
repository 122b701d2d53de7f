// mig-parted config and node map for a plan.
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "planner/outputs.hpp"

namespace tessera::planner {
namespace {

std::string model_key(const Problem& p, int gpu_type) {
  std::string model = p.gpu_types[size_t(gpu_type)].model->name;
  for (auto& c : model) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return model;
}

// Whether every device of the node is cut the same way (then it takes that layout's config).
bool cut_one_way(const std::vector<int>& layouts) {
  return std::all_of(layouts.begin(), layouts.end(), [&](int x) { return x == layouts.front(); });
}

// The GPUs that must share a node: a tensor-parallel replica's ranks.
std::vector<std::vector<uint32_t>> colocated(const Plan& plan) {
  std::vector<uint32_t> parent(plan.gpus.size());
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t g) {
    while (parent[g] != g) g = parent[g] = parent[parent[g]];
    return g;
  };
  for (const auto& replicas : plan.sites)
    for (const auto& site : replicas)
      for (size_t i = 1; i < site.size(); ++i) parent[find(site[i].first)] = find(site[0].first);
  std::map<uint32_t, std::vector<uint32_t>> groups;
  for (uint32_t g = 0; g < plan.gpus.size(); ++g) groups[find(g)].push_back(g);
  std::vector<std::vector<uint32_t>> out;
  for (auto& [root, gpus] : groups) out.push_back(std::move(gpus));
  return out;
}

// How a GPU's slices are shared: 1 some time-sliced, 2 some through MPS (3 both), 0 neither.
int sharing_kind(const Plan& plan, uint32_t g) {
  int kind = 0;
  for (const auto& inst : plan.gpus[g].instances)
    if (!inst.replicas.empty()) kind |= inst.sharing == Isolation::best_effort ? 1 : inst.sharing == Isolation::shared ? 2 : 0;
  return kind;
}

}  // namespace

int gpu_sharing_kind(const Plan& plan, uint32_t gpu) { return sharing_kind(plan, gpu); }

std::string config_name(const Problem& p, int layout) {
  const auto& l = p.layouts[size_t(layout)];
  return "tessera-" + model_key(p, l.gpu_type) + "-" + l.name;
}

// Nodes of one GPU model and at most gpus_per_node GPUs (a tensor-parallel replica's GPUs
// together, so one bigger than a node gets a node of its own). GPUs cut alike are taken
// together, so most nodes hold one layout and take its config; a node whose GPUs differ gets a
// config of its own that cuts each device its way (mig-parted's per-device entries), shared by
// every node cut the same way.
std::vector<Node> assign_nodes(const Problem& p, const Plan& plan, uint32_t gpus_per_node) {
  auto groups = colocated(plan);
  auto layout_of = [&](const std::vector<uint32_t>& g) { return plan.gpus[g.front()].layout; };
  // A node's device plugin shares one way (one config per node): GPUs whose slices are
  // time-sliced, shared through MPS, or neither go to nodes of their own kind.
  auto kind_of = [&](const std::vector<uint32_t>& group) {
    int kind = 0;
    for (uint32_t g : group) kind |= sharing_kind(plan, g);
    return kind;
  };
  std::stable_sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
    const int ta = plan.gpus[a.front()].gpu_type, tb = plan.gpus[b.front()].gpu_type;
    return ta != tb ? ta < tb : layout_of(a) < layout_of(b);
  });
  std::vector<Node> nodes;
  std::vector<std::pair<int, int>> node_type;  // GPU type and sharing kind of each node
  for (const auto& group : groups) {
    const std::pair<int, int> type{plan.gpus[group.front()].gpu_type, kind_of(group)};
    Node* into = nullptr;
    for (size_t n = 0; n < nodes.size() && !into; ++n)
      if (node_type[n] == type && nodes[n].gpus.size() + group.size() <= gpus_per_node) into = &nodes[n];
    if (!into) {
      char name[32];
      std::snprintf(name, sizeof name, "node-%03zu", nodes.size());
      nodes.push_back({name, p.gpu_types[size_t(type.first)].model->name, "", {}, {}, "", {}});
      node_type.push_back(type);
      into = &nodes.back();
    }
    for (uint32_t g : group) {
      into->gpus.push_back(g);
      into->layouts.push_back(plan.gpus[g].layout);
      if (sharing_kind(plan, g) == 3) into->mixed_sharing.push_back(g);
    }
  }
  // Each node's config: its layout's when it has one, else one per distinct per-device cut.
  std::map<std::pair<int, std::vector<int>>, std::string> mixed;
  for (size_t n = 0; n < nodes.size(); ++n) {
    auto& node = nodes[n];
    const auto& l = node.layouts;
    if (cut_one_way(l)) {
      node.config = config_name(p, l.front());
      continue;
    }
    auto [it, added] = mixed.try_emplace({node_type[n].first, l}, "");
    if (added) {
      size_t same_model = 0;
      for (const auto& [key, name] : mixed) same_model += key.first == node_type[n].first;
      it->second = "tessera-" + model_key(p, node_type[n].first) + "-node-" + std::to_string(same_model);
    }
    node.config = it->second;
  }
  return nodes;
}

std::string render_mig_parted(const Problem& p, const std::vector<Node>& nodes) {
  std::ostringstream out;
  out << "# Generated by tessera plan: one config per kind of node; nodes.yaml says which node takes which.\n"
      << "version: v1\nmig-configs:\n";
  auto entry = [&](int layout_index, const std::string& devices) {
    const auto& layout = p.layouts[size_t(layout_index)];
    const GpuModel& model = *p.gpu_types[size_t(layout.gpu_type)].model;
    out << "    - device-filter: [\"" << format_pci_id(model.pci_device_id) << "\"]\n"
        << "      devices: " << devices << "\n";
    if (!layout.mig_enabled) {
      out << "      mig-enabled: false\n      mig-devices: {}\n";
      return;
    }
    out << "      mig-enabled: true\n      mig-devices:\n";
    for (const auto& [unit, n] : layout.units) out << "        \"" << p.units[size_t(unit)].name << "\": " << n << "\n";
  };
  // Configs in name order, each once.
  std::map<std::string, const Node*> configs;
  for (const auto& n : nodes) configs.try_emplace(n.config, &n);
  for (const auto& [name, node] : configs) {
    out << "  " << name << ":\n";
    const auto& l = node->layouts;
    if (cut_one_way(l)) {
      entry(l.front(), "all");
      continue;
    }
    // One entry per layout, naming the devices cut that way.
    std::map<int, std::vector<size_t>> devices;
    for (size_t d = 0; d < l.size(); ++d) devices[l[d]].push_back(d);
    for (const auto& [layout, list] : devices) {
      std::string text = "[";
      for (size_t i = 0; i < list.size(); ++i) text += (i ? ", " : "") + std::to_string(list[i]);
      entry(layout, text + "]");
    }
  }
  return out.str();
}

std::string render_node_map(const Problem&, const std::vector<Node>& nodes) {
  std::ostringstream out;
  out << "# Node -> configs: label each node nvidia.com/mig.config=<mig-config> and\n"
      << "# nvidia.com/device-plugin.config=<device-plugin-config>, the key under which\n"
      << "# device-plugin-<device-plugin-config>.yaml is in the ConfigMap of device-plugin configs\n"
      << "# (the chart's devicePluginConfigs.name).\n"
      << "# gpus: the plan's GPU numbers that the node's devices 0, 1, ... take.\nnodes:\n";
  for (const auto& n : nodes) {
    out << "  - node: " << n.name << "\n    gpu: " << n.model << "\n    mig-config: " << n.config
        << "\n    device-plugin-config: " << n.device_plugin_config << "\n    gpus: [";
    for (size_t i = 0; i < n.gpus.size(); ++i) out << (i ? ", " : "") << n.gpus[i];
    out << "]\n";
    for (uint32_t g : n.mixed_sharing)
      out << "    # GPU " << g << " holds time-sliced and MPS slices: a node's plugin shares one way, so\n"
          << "    # its config shares them all through MPS\n";
  }
  return out.str();
}

}  // namespace tessera::planner
