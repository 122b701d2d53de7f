// A simulated `nvidia-smi`, only its `compute-policy` subcommand: the
// time-slice policy of a GPU, recorded in the simulated node (TESSERA_SIM),
// so tests and the real-cluster tier see what a driver set. It links the
// simulator's node store and nothing of the product.
//
// Facts about the real tool this follows (NVIDIA, "Improving GPU Utilization
// in Kubernetes", the `nvidia-smi compute-policy --help` text it quotes; the
// R455+ drivers):
//  - `nvidia-smi compute-policy [-i|--id IDS] [-l|--list] [--set-timeslice N]`;
//    IDS are comma-separated GPU indices or UUIDs; without -i the change
//    applies to every GPU;
//  - `--set-timeslice`: 0=DEFAULT, 1=SHORT, 2=MEDIUM, 3=LONG; written
//    `--set-timeslice=N` or `--set-timeslice N`;
//  - changing the policy needs root.
// The simulator's own choices: the wording of its messages and of the list.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "node_store.hpp"

using tessera::sim::Node;
using tessera::sim::NodeStore;

namespace {

constexpr const char* kLevels[] = {"DEFAULT", "SHORT", "MEDIUM", "LONG"};

int usage(const char* why) {
  std::fprintf(stderr, "%s\n\nUsage: nvidia-smi compute-policy [-i IDS] [-l] [--set-timeslice 0|1|2|3]\n", why);
  return 2;
}

std::vector<std::string> split_ids(const std::string& ids) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = ids.find(',', start);
    out.push_back(ids.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// The GPU an id names (its index or its UUID), or -1.
int find_gpu(const Node& node, const std::string& id) {
  for (size_t g = 0; g < node.gpus.size(); ++g)
    if (node.gpus[g].uuid == id || std::to_string(g) == id) return static_cast<int>(g);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] != "compute-policy")
    return usage("the simulated nvidia-smi knows only the compute-policy subcommand");
  std::string ids;
  bool list = false;
  int timeslice = -1;
  for (size_t i = 1; i < args.size(); ++i) {
    // "--flag=value" or "--flag value".
    std::string flag = args[i], value;
    const size_t eq = flag.find('=');
    if (flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if ((flag == "-i" || flag == "--id" || flag == "--set-timeslice") && i + 1 < args.size()) {
      value = args[++i];
    }
    if (flag == "-l" || flag == "--list") {
      list = true;
    } else if ((flag == "-i" || flag == "--id") && !value.empty()) {
      ids = value;
    } else if (flag == "--set-timeslice" && !value.empty()) {
      if (value.size() != 1 || value[0] < '0' || value[0] > '3')
        return usage(("invalid time-slice value \"" + value + "\" (0=DEFAULT, 1=SHORT, 2=MEDIUM, 3=LONG)").c_str());
      timeslice = value[0] - '0';
    } else {
      return usage(("unknown or incomplete option \"" + args[i] + "\"").c_str());
    }
  }
  if (!list && timeslice < 0) return usage("nothing to do: give -l or --set-timeslice");
  const char* dir = std::getenv("TESSERA_SIM");
  if (!dir || !*dir) {
    std::fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver (TESSERA_SIM is not set)\n");
    return 9;
  }
  auto store = NodeStore::open(dir);
  if (!store) {
    std::fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver (%s)\n",
                 store.error().message.c_str());
    return 9;
  }
  auto node = (*store)->read();
  if (!node) {
    std::fprintf(stderr, "%s\n", node.error().message.c_str());
    return 9;
  }
  std::vector<int> gpus;
  if (ids.empty()) {
    for (size_t g = 0; g < (*node)->gpus.size(); ++g) gpus.push_back(static_cast<int>(g));
  } else {
    for (const auto& id : split_ids(ids)) {
      const int g = find_gpu(**node, id);
      if (g < 0) {
        std::fprintf(stderr, "No GPU matches the identifier \"%s\"\n", id.c_str());
        return 6;
      }
      gpus.push_back(g);
    }
  }
  if (timeslice >= 0) {
    if (!(*node)->privileged) {
      std::fprintf(stderr, "Insufficient Permissions: changing the compute policy needs root\n");
      return 4;
    }
    auto written = (*store)->update([&](Node& n) {
      for (int g : gpus) n.gpus[static_cast<size_t>(g)].compute_timeslice = static_cast<uint32_t>(timeslice);
      return true;
    });
    if (!written) {
      std::fprintf(stderr, "%s\n", written.error().message.c_str());
      return 9;
    }
    for (int g : gpus)
      std::printf("Set timeslice to %s for GPU %s\n", kLevels[timeslice], (*node)->gpus[static_cast<size_t>(g)].uuid.c_str());
  }
  if (list) {
    auto now = (*store)->read();
    if (!now) return 9;
    for (int g : gpus) {
      const auto& gpu = (*now)->gpus[static_cast<size_t>(g)];
      const uint32_t level = gpu.compute_timeslice < 4 ? gpu.compute_timeslice : 0;
      std::printf("GPU %d %s: Timeslice %s\n", g, gpu.uuid.c_str(), kLevels[level]);
    }
  }
  return 0;
}
