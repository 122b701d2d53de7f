// The fleet spec reader: what it accepts, and the exact message for each bad input.
#include <gtest/gtest.h>

#include "config/fleet_spec.hpp"

namespace tessera::config {
namespace {

std::string first_error(const std::string& yaml) {
  Diagnostics diags;
  auto spec = parse_fleet_spec(yaml, "fleet.yaml", Catalog::builtin(), diags);
  EXPECT_FALSE(spec.has_value());
  return diags.items().empty() ? "" : format(diags.items()[0]);
}

TEST(FleetSpec, ReadsEveryField) {
  Diagnostics diags;
  auto spec = parse_fleet_spec(
      "fleet:\n  - gpu: a100-sxm4-80gb\n    count: 4\n  - gpu: H200-SXM-141GB\n"
      "services:\n  - name: chat\n    memory: 32.5GiB\n    demand: 1352\n    capacity: {3g.40gb: 900, 7g.80gb: 1870}\n"
      "  - name: small\n    memory: 5GiB\n    replicas: 3\n    isolation: shared\n    compute: 0.25\n"
      "  - name: big\n    memory: 200GiB\n    gpus: 4\n",
      "fleet.yaml", Catalog::builtin(), diags);
  ASSERT_TRUE(spec) << (diags.items().empty() ? "" : format(diags.items()[0]));
  ASSERT_EQ(spec->fleet.size(), 2u);
  EXPECT_EQ(spec->fleet[0].model->name, "A100-SXM4-80GB");
  EXPECT_EQ(spec->fleet[0].count, 4u);
  EXPECT_FALSE(spec->fleet[1].count);
  ASSERT_EQ(spec->services.size(), 3u);
  EXPECT_EQ(spec->services[0].memory_bytes, uint64_t(32.5 * 1024) * 1024 * 1024);
  EXPECT_EQ(spec->services[0].demand, 1352.0);
  EXPECT_EQ(spec->services[0].capacity.size(), 2u);
  EXPECT_EQ(spec->services[1].isolation, Isolation::shared);
  EXPECT_EQ(spec->services[1].compute, 0.25);
  EXPECT_EQ(spec->services[2].replicas, 1u);
  EXPECT_EQ(spec->services[2].gpus, 4u);
}

struct BadCase {
  const char* description;
  std::string yaml;
  std::string error;
};

const std::string kFleet = "fleet:\n  - gpu: A100-SXM4-80GB\nservices:\n";

const BadCase kBad[] = {
    {"unknown GPU", "fleet:\n  - gpu: A100-SXM4-80G\nservices:\n  - {name: a, memory: 1GiB}\n",
     "fleet.yaml:2:10: error: fleet[0].gpu: unknown GPU model 'A100-SXM4-80G' (nearest: A100-SXM4-80GB, "
     "A100-SXM4-40GB, H100-SXM5-80GB)"},
    {"unknown profile", kFleet + "  - name: a\n    memory: 1GiB\n    demand: 3\n    capacity: {3g.41gb: 5}\n",
     "fleet.yaml:7:25: error: services[0].capacity.3g.41gb: unknown MIG profile '3g.41gb' for the fleet's GPUs "
     "(nearest: 3g.40gb, 4g.40gb, 1g.10gb; or 'gpu')"},
    {"negative memory", kFleet + "  - {name: a, memory: -2GiB}\n",
     "fleet.yaml:4:23: error: services[0].memory: '-2GiB' is not a byte size: it is negative (examples: 14GiB, "
     "32.5GiB, 512MiB, 80GB)"},
    {"a bare number", kFleet + "  - {name: a, memory: 40}\n",
     "fleet.yaml:4:23: error: services[0].memory: '40' has no unit: write 40GiB, 40MiB or 40B (a bare number would be "
     "40 bytes)"},
    {"zero memory", kFleet + "  - {name: a, memory: 0}\n",
     "fleet.yaml:4:23: error: services[0].memory: '0' is out of range (allowed: above 0 to 64 TiB)"},
    {"absurd memory", kFleet + "  - {name: a, memory: 100TiB}\n",
     "fleet.yaml:4:23: error: services[0].memory: '100TiB' is out of range (allowed: above 0 to 64 TiB)"},
    {"zero replicas", kFleet + "  - {name: a, memory: 1GiB, replicas: 0}\n",
     "fleet.yaml:4:39: error: services[0].replicas: 0 is out of range (allowed: 1 to 1000000)"},
    {"negative count", "fleet:\n  - gpu: A100-SXM4-80GB\n    count: -4\nservices:\n  - {name: a, memory: 1GiB}\n",
     "fleet.yaml:3:12: error: fleet[0].count: -4 is out of range (allowed: 0 to 1000000)"},
    {"negative demand", kFleet + "  - {name: a, memory: 1GiB, demand: -5, capacity: {gpu: 3}}\n",
     "fleet.yaml:4:37: error: services[0].demand: -5 is out of range (allowed: above 0 to 1e+12)"},
    {"demand without capacity", kFleet + "  - {name: a, memory: 1GiB, demand: 5}\n",
     "fleet.yaml:4:37: error: services[0].capacity: missing field 'capacity', required with demand (rate per profile)"},
    {"both replicas and demand", kFleet + "  - {name: a, memory: 1GiB, replicas: 2, demand: 5, capacity: {gpu: 3}}\n",
     "fleet.yaml:4:50: error: services[0].demand: give either replicas or demand, not both"},
    {"unknown isolation", kFleet + "  - {name: a, memory: 1GiB, isolation: mps}\n",
     "fleet.yaml:4:40: error: services[0].isolation: unknown isolation 'mps' (allowed: dedicated, shared, best-effort)"},
    {"compute above 1", kFleet + "  - {name: a, memory: 1GiB, isolation: shared, compute: 1.5}\n",
     "fleet.yaml:4:57: error: services[0].compute: 1.5 is out of range (allowed: above 0 to 1)"},
    {"tensor parallel shared", kFleet + "  - {name: a, memory: 1GiB, isolation: shared, gpus: 2}\n",
     "fleet.yaml:4:5: error: services[0].gpus: tensor parallelism (gpus > 1) needs isolation: dedicated"},
    {"duplicate name", kFleet + "  - {name: a, memory: 1GiB}\n  - {name: a, memory: 2GiB}\n",
     "fleet.yaml:5:5: error: services[1].name: duplicate service name 'a'"},
    {"unknown field", kFleet + "  - {name: a, memory: 1GiB, replica: 2}\n",
     "fleet.yaml:4:29: error: services[0].replica: unknown field 'replica' (allowed: name, memory, replicas, demand, "
     "capacity, isolation, gpus, compute)"},
    {"missing memory", kFleet + "  - {name: a}\n",
     "fleet.yaml:4:5: error: services[0]: missing required field 'memory' (need per replica, such as 32.5GiB)"},
    {"current layout that does not fit",
     "fleet:\n  - gpu: A100-SXM4-80GB\n    current:\n      - {3g.40gb: 3}\nservices:\n  - {name: a, memory: 1GiB}\n",
     "fleet.yaml:4:9: error: fleet[0].current[0]: 3 x 3g.40gb is over the maximum of 2 on A100-SXM4-80GB"},
    {"more current layouts than GPUs",
     "fleet:\n  - gpu: A100-SXM4-80GB\n    count: 1\n    current: [{}, {}]\nservices:\n  - {name: a, memory: 1GiB}\n",
     "fleet.yaml:4:14: error: fleet[0].current: 2 current layouts for a count of 1 GPUs"},
    {"no services", "fleet:\n  - gpu: A100-SXM4-80GB\n",
     "fleet.yaml:1:1: error: services: missing required field 'services'"},
};

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, SaysWhereAndWhat) { EXPECT_EQ(first_error(GetParam().yaml), GetParam().error) << GetParam().description; }

INSTANTIATE_TEST_SUITE_P(FleetSpec, BadInput, ::testing::ValuesIn(kBad));

TEST(FleetSpec, ReadsTheWorkloadCsv) {
  Diagnostics diags;
  auto spec = parse_service_csv(
      "service,model,mem_need_GiB,demand,full_A100_capacity,smallest_A100_profile\n"
      "chat,Llama-3-8B,32.5,1352 out-tok/s,1870 out-tok/s,3g.40gb\n"
      "big,Llama-3-70B,212.9,507 out-tok/s,226 out-tok/s,multi-GPU (TP>=2)\n"
      "asr,Whisper,5.0,cold tenant,,1g.10gb\n",
      "w.csv", diags);
  ASSERT_TRUE(spec);
  ASSERT_EQ(spec->services.size(), 3u);
  EXPECT_EQ(spec->services[0].demand, 1352.0);
  ASSERT_EQ(spec->services[0].capacity.size(), 1u);
  EXPECT_EQ(spec->services[0].capacity[0].profile, "gpu");
  EXPECT_EQ(spec->services[0].capacity[0].rate, 1870.0);
  EXPECT_TRUE(spec->services[1].gpus_auto);
  EXPECT_EQ(spec->services[2].replicas, 1u);
  EXPECT_FALSE(spec->services[2].demand);
}

TEST(FleetSpec, CsvErrorsNameTheLine) {
  Diagnostics diags;
  EXPECT_FALSE(parse_service_csv("service,mem_need_GiB\na,12\nb,-3\n", "w.csv", diags));
  ASSERT_EQ(diags.items().size(), 1u);
  EXPECT_EQ(format(diags.items()[0]), "w.csv:3:1: error: mem_need_GiB: '-3' is not a memory size in GiB (above 0 to 64 TiB)");
}

}  // namespace
}  // namespace tessera::config
