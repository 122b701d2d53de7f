// `tessera plan` run as a user runs it; its mig-parted output checked by the
// real `tessera mig validate`, its device-plugin configs by `tessera config validate`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "support/data.hpp"
#include "support/run.hpp"

namespace tessera {
namespace {

using testing::run;
using testing::TempDir;
const std::string kBin = TESSERA_BIN;
const std::string kExample = std::string(TESSERA_EXAMPLES) + "/fleet.yaml";
using testing::kWorkload;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PlanCli, ExampleWritesEveryOutputAndTheyValidate) {
  TempDir dir;
  std::string svg = dir.path() + "/plan.svg";
  auto r = run({kBin, "plan", "-f", kExample, "--output-dir", dir.path() + "/out", "--json", "--svg", svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus_used"], 9);
  EXPECT_EQ(j["lower_bound"], 9);
  EXPECT_EQ(j["optimal"], true);
  EXPECT_EQ(j["baselines"]["whole-gpu"], 17);
  EXPECT_TRUE(j["baselines"].contains("all-1g"));
  EXPECT_TRUE(j["baselines"].contains("all-balanced"));

  // What it writes passes tessera's own validators with warnings as errors.
  auto v = run({kBin, "mig", "validate", "-f", dir.path() + "/out/mig-parted.yaml", "--strict"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find(": valid: 3 configs"), std::string::npos)
      << "9 GPUs on nodes of 8, GPUs that share through MPS on nodes of their own: three kinds of node\n"
      << v.out;
  // One device-plugin config per kind of node, named in nodes.yaml: GPU 6 holds time-sliced and
  // MPS slices, so its node shares both through MPS; GPU 8's MPS node shares another resource;
  // the rest share nothing.
  for (const char* f : {"device-plugin-mps.yaml", "device-plugin-mps-2.yaml", "device-plugin-dedicated.yaml"}) {
    auto c = run({kBin, "config", "validate", "-f", dir.path() + "/out/" + f, "--strict"});
    EXPECT_EQ(c.exit_code, 0) << f << "\n" << c.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/out/device-plugin-time-slicing.yaml"));
  const std::string mps = slurp(dir.path() + "/out/device-plugin-mps.yaml");
  EXPECT_NE(mps.find("    - name: nvidia.com/mig-1g.10gb\n"), std::string::npos) << "GPU 6's time-sliced 1g.10gb, through MPS\n" << mps;
  EXPECT_NE(mps.find("    - name: nvidia.com/mig-1g.20gb\n"), std::string::npos) << mps;
  EXPECT_NE(r.err.find("note: GPU 6 (node-000) holds time-sliced and MPS slices"), std::string::npos) << r.err;
  const std::string map_text = slurp(dir.path() + "/out/nodes.yaml");
  EXPECT_NE(map_text.find("    device-plugin-config: mps\n    gpus: [6]\n"), std::string::npos) << map_text;
  EXPECT_NE(map_text.find("    device-plugin-config: dedicated\n"), std::string::npos) << map_text;
  EXPECT_NE(map_text.find("    device-plugin-config: mps-2\n    gpus: [8]\n"), std::string::npos) << map_text;
  auto deployments = slurp(dir.path() + "/out/deployments.yaml");
  EXPECT_NE(deployments.find("nvidia.com/mig-3g.40gb.shared: 1"), std::string::npos) << deployments;
  EXPECT_NE(deployments.find("VLLM_GPU_MEMORY_UTILIZATION"), std::string::npos);
  EXPECT_NE(deployments.find("nvidia.com/gpu: 4"), std::string::npos);
  auto map = slurp(svg);
  EXPECT_EQ(map.rfind("<svg", 0), 0u);
  EXPECT_NE(map.find("llama3-70b-bf16"), std::string::npos);
}

// nodes.yaml as a platform team uses it: every node of at most --gpus-per-node GPUs, a
// tensor-parallel replica's GPUs on one node, and each node's config, applied by `mig apply` to
// a simulated node of that many GPUs, cuts every device as plan.yaml says that GPU is cut.
TEST(PlanCli, EachNodeTakesItsConfigAsWritten) {
  for (const char* per_node : {"8", "4", "3"}) {
    SCOPED_TRACE(std::string("--gpus-per-node ") + per_node);
    TempDir dir;
    const std::string out = dir.path() + "/out";
    auto r = run({kBin, "plan", "-f", kExample, "--output-dir", out, "--gpus-per-node", per_node});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(run({kBin, "mig", "validate", "-f", out + "/mig-parted.yaml", "--strict"}).exit_code, 0);
    const YAML::Node gpus = YAML::LoadFile(out + "/plan.yaml")["gpus"];
    const YAML::Node nodes = YAML::LoadFile(out + "/nodes.yaml")["nodes"];
    std::map<int, std::string> node_of;
    for (const auto& n : nodes) {
      const auto name = n["node"].as<std::string>(), config = n["mig-config"].as<std::string>();
      const auto list = n["gpus"].as<std::vector<int>>();
      // A replica of 4 GPUs needs a node of 4: with 3 it gets one of its own.
      EXPECT_LE(list.size(), std::max<size_t>(std::stoul(per_node), 4)) << name;
      const std::string sim = dir.path() + "/" + name;
      ASSERT_EQ(run({kBin, "sim", "create", sim, "--gpu", "A100-SXM4-80GB", "--count", std::to_string(list.size())}).exit_code, 0);
      auto applied = run({kBin, "mig", "apply", "-f", out + "/mig-parted.yaml", "-c", config, "--sim", sim});
      ASSERT_EQ(applied.exit_code, 0) << name << " " << config << "\n" << applied.out << applied.err;
      const auto inventory = nlohmann::json::parse(run({kBin, "inventory", "--sim", sim, "--json"}).out);
      for (size_t d = 0; d < list.size(); ++d) {
        EXPECT_TRUE(node_of.emplace(list[d], name).second) << "GPU " << list[d] << " on two nodes";
        const YAML::Node gpu = gpus[size_t(list[d])];
        EXPECT_EQ(gpu["node"].as<std::string>(), name);
        EXPECT_EQ(gpu["node-device"].as<size_t>(), d);
        EXPECT_EQ(gpu["mig-config"].as<std::string>(), config);
        std::multiset<std::string> planned, cut;
        for (const auto& inst : gpu["instances"])
          if (inst["profile"].as<std::string>() != "gpu") planned.insert(inst["profile"].as<std::string>());
        for (const auto& gi : inventory["gpus"][d]["gpu_instances"]) cut.insert(gi["profile"].get<std::string>());
        EXPECT_EQ(cut, planned) << name << " device " << d << " (plan GPU " << list[d] << ")";
        EXPECT_EQ(inventory["gpus"][d]["mig"]["current"].get<bool>(), !planned.empty()) << name << " device " << d;
      }
    }
    EXPECT_EQ(node_of.size(), gpus.size()) << "every GPU of the plan on a node";
    // The ranks of one replica ("svc/r#k") share a node.
    std::map<std::string, std::set<std::string>> replica_nodes;
    for (size_t g = 0; g < gpus.size(); ++g)
      for (const auto& inst : gpus[g]["instances"])
        for (const auto& rep : inst["replicas"]) {
          const auto text = rep.as<std::string>();
          if (auto hash = text.find('#'); hash != std::string::npos) replica_nodes[text.substr(0, hash)].insert(node_of[int(g)]);
        }
    EXPECT_FALSE(replica_nodes.empty());
    for (const auto& [replica, on] : replica_nodes) EXPECT_EQ(on.size(), 1u) << replica << " spans nodes";
  }
}

TEST(PlanCli, WorkloadCsvOnEveryModelValidates) {
  for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}) {
    TempDir dir;
    for (const char* mode : {"exact", "fast"}) {
      auto r = run({kBin, "plan", "-f", kWorkload, "--gpu", gpu, "--mode", mode, "--json", "--output-dir", dir.path()});
      ASSERT_EQ(r.exit_code, 0) << gpu << " " << mode << "\n" << r.err;
      auto j = nlohmann::json::parse(r.out);
      EXPECT_GE(j["gpus_used"].get<int>(), j["lower_bound"].get<int>());
      if (std::string(mode) == "exact") {
        EXPECT_EQ(j["optimal"], true) << gpu;
      }
      EXPECT_LT(j["gpus_used"].get<int>(), j["baselines"]["whole-gpu"].get<int>()) << gpu;
      auto v = run({kBin, "mig", "validate", "-f", dir.path() + "/mig-parted.yaml"});
      EXPECT_EQ(v.exit_code, 0) << gpu << "\n" << v.err;
    }
  }
}

TEST(PlanCli, TooSmallFleet) {
  TempDir dir;
  auto spec = dir.write("fleet.yaml",
                        "fleet:\n  - gpu: H100-SXM5-80GB\n    count: 2\nservices:\n"
                        "  - {name: chat, memory: 70GiB, replicas: 5}\n");
  auto r = run({kBin, "plan", "-f", spec});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, spec + ":2:5: error: fleet[0].count: the fleet is too small: 3 more H100-SXM5-80GB (5 in all) would "
                   "make it feasible\n");
}

TEST(PlanCli, BadInputNamesFileLineAndField) {
  TempDir dir;
  auto spec = dir.write("fleet.yaml",
                        "fleet:\n  - gpu: H100-SXM5-80GB\nservices:\n"
                        "  - {name: chat, memory: 70GiB, replicas: -1}\n"
                        "  - {name: huge, memory: 300GiB}\n");
  auto r = run({kBin, "plan", "-f", spec});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, spec + ":4:43: error: services[0].replicas: -1 is out of range (allowed: 1 to 1000000)\n");
  auto huge = dir.write("huge.yaml", "fleet:\n  - gpu: H100-SXM5-80GB\nservices:\n  - {name: huge, memory: 300GiB}\n");
  auto h = run({kBin, "plan", "-f", huge});
  EXPECT_EQ(h.exit_code, 1);
  EXPECT_EQ(h.err, huge + ":4:5: error: services[0]: service 'huge' fits nowhere: needs 300 GiB per replica, more than "
                          "a whole H100-SXM5-80GB (79.6 GiB); set gpus: 4 or more for tensor parallelism\n");
  auto u = run({kBin, "plan", "-f", kWorkload, "--gpu", "H300"});
  EXPECT_EQ(u.exit_code, 2);
}

// Out of time is not out of GPUs: with a limit too short to prove anything, `plan` either prints
// the best plan found with its gap to the bound, or says no plan was found in time, with the
// limit as given, and never that the (unlimited) fleet cannot hold the services. Which of the two
// depends on the machine's speed (CBC's heuristics can find a plan within a millisecond); the
// choice between them is tested without a clock in Planner.InfeasibleOnlyByTheClockIsNoPlanInTime.
TEST(PlanCli, TimeLimitWithoutAPlanSaysSo) {
  for (const char* mode : {"exact", "fast"}) {
    auto r = run({kBin, "plan", "-f", kWorkload, "--mode", mode, "--time-limit", "0.001", "--no-baselines"});
    EXPECT_EQ(r.err.find("cannot hold"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("too small"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("more than the fleet has"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(" 0 s"), std::string::npos) << r.err;
    if (r.exit_code == 0) {
      EXPECT_NE(r.out.find("GPUs used: "), std::string::npos) << r.out;
      EXPECT_NE(r.out.find(std::string(mode) + " mode"), std::string::npos) << r.out;
    } else {
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_NE(r.err.find("no plan found within the time limit (0.001 s)"), std::string::npos) << r.err;
      // Exact mode names the mode that finds a plan in time on large inputs.
      EXPECT_EQ(r.err.find("or use --mode fast") != std::string::npos, std::string(mode) == "exact") << r.err;
    }
  }
  // A limit that lets it finish: the plan, as before.
  auto ok = run({kBin, "plan", "-f", kWorkload, "--time-limit", "30", "--json", "--no-baselines"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// The output directory holds this plan only: a file of an earlier plan's
// sharing mode that this plan does not use is removed (and said), nothing
// else there is touched; --svg may name a file inside --output-dir, which is
// made first.
TEST(PlanCli, TheOutputDirectoryHoldsThisPlanOnly) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  auto r = run({kBin, "plan", "-f", kExample, "--output-dir", out, "--svg", out + "/plan.svg", "--no-baselines"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(out + "/plan.svg").rfind("<svg", 0), 0u);
  ASSERT_TRUE(std::filesystem::exists(out + "/device-plugin-mps.yaml"));
  ASSERT_TRUE(std::filesystem::exists(out + "/device-plugin-mps-2.yaml"));
  std::ofstream(out + "/mine.txt") << "the user's";
  // A plan whose services all take whole GPUs or MIG instances of their own: no sharing.
  const std::string spec = dir.path() + "/alone.yaml";
  std::ofstream(spec) << "fleet:\n  - gpu: A100-SXM4-80GB\nservices:\n  - {name: a, memory: 30GiB, replicas: 2, isolation: dedicated}\n";
  r = run({kBin, "plan", "-f", spec, "--output-dir", out, "--no-baselines"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/device-plugin-mps.yaml"));
  EXPECT_FALSE(std::filesystem::exists(out + "/device-plugin-mps-2.yaml"));
  EXPECT_TRUE(std::filesystem::exists(out + "/device-plugin-dedicated.yaml"));
  EXPECT_NE(r.err.find("removed " + out + "/device-plugin-mps.yaml, an earlier plan's"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(out + "/mine.txt"), "the user's");
  EXPECT_NE(slurp(out + "/plan.yaml").find("a"), std::string::npos);
}

}  // namespace
}  // namespace tessera
