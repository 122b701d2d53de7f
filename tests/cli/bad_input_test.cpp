// Bad input is a feature: each malformed, out-of-range or hostile input gets
// one precise message and a non-zero exit, through the real command.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>

#include "support/run.hpp"

namespace tessera {
namespace {

using testing::run;
const std::string kBin = TESSERA_BIN;

struct BadInput {
  const char* name;
  const char* command;  // "mig" or "config"
  std::string content;
  std::string expected;  // a line the command must print, "F" standing for the file path
  // "--strict" where NVIDIA's reader accepts the input and tessera warns: the warning is then the error.
  const char* flag = nullptr;
  friend void PrintTo(const BadInput& c, std::ostream* os) { *os << c.name; }
};

std::string deep(int levels) {
  std::string s = "version: v1\nmig-configs:\n  x:\n    - devices: ";
  for (int i = 0; i < levels; ++i) s += "[";
  for (int i = 0; i < levels; ++i) s += "]";
  return s + "\n";
}

std::string huge() { return "version: v1\n# " + std::string(10 * 1024 * 1024, 'x') + "\n"; }

std::string laughs() {
  std::string s = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    s += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) s += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
    s += "]\n";
  }
  return s;
}

const std::string kMigHead = "version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: true\n";

std::vector<BadInput> cases() {
  return {
      // --- mig-parted configs ---
      {"mig_empty_file", "mig", "", "F: error: the file is empty: no version and no mig-configs (a mig-parted config needs version: v1 and mig-configs)"},
      {"mig_blank_file", "mig", "# only a comment\n\n", "F: error: the file is empty: no version and no mig-configs (a mig-parted config needs version: v1 and mig-configs)"},
      {"mig_bad_yaml", "mig", "version: v1\nmig-configs: [\n", "F:3:1: error: invalid YAML: end of sequence flow not found"},
      // A tab inside a line (the parser's message does not say "tab"), and one in column 1.
      {"mig_tab_after_dash", "mig", "version: v1\nmig-configs:\n  c:\n  \t- devices: all\n      mig-enabled: false\n",
       "F:4:4: error: invalid YAML: illegal block entry (this line holds a tab at column 3: YAML indents with spaces "
       "only; replace the tab with spaces)"},
      {"mig_tab_in_column_1", "mig", "version: v1\n\tmig-configs: {}\n",
       "F:2:1: error: invalid YAML: illegal tab when looking for indentation (this line holds a tab at column 1: YAML "
       "indents with spaces only; replace the tab with spaces)"},
      {"mig_not_a_map", "mig", "- a\n- b\n", "F:1:1: error: expected a mig-parted config (a map with version and mig-configs), got a list"},
      {"mig_missing_version", "mig", "mig-configs:\n  c:\n    - devices: all\n      mig-enabled: false\n",
       "F:1:1: error: version: missing required field 'version' (allowed: v1)"},
      {"mig_unknown_version", "mig", "version: v2\nmig-configs: {}\n", "F:1:10: error: version: unknown version 'v2' (allowed: v1)"},
      {"mig_unknown_top_key", "mig", "version: v1\nmig-config:\n  c: []\n",
       "F:2:1: error: mig-config: unknown field 'mig-config' (allowed: version, mig-configs)"},
      {"mig_configs_not_map", "mig", "version: v1\nmig-configs: 7\n", "F:2:14: error: mig-configs: expected a map of named MIG configs, got '7'"},
      {"mig_duplicate_name", "mig", "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n  a:\n    - devices: all\n      mig-enabled: false\n",
       "F:6:3: error: mig-configs.a: duplicate config name 'a'; the last one is used", "--strict"},
      {"mig_entry_list_empty", "mig", "version: v1\nmig-configs:\n  a: []\n", "F:3:6: error: mig-configs.a: expected a non-empty list of entries, got a list"},
      {"mig_unknown_entry_key", "mig", kMigHead + "      mig-devices: {}\n      mig-device: {}\n",
       "F:7:7: error: mig-configs.c[0].mig-device: unknown field 'mig-device' (allowed: device-filter, devices, mig-enabled, mig-devices)"},
      {"mig_missing_devices", "mig", "version: v1\nmig-configs:\n  c:\n    - mig-enabled: false\n",
       "F:4:7: error: mig-configs.c[0]: missing required field 'devices' ('all' or a list of GPU indices)"},
      {"mig_enabled_not_bool", "mig", "version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: yes please\n",
       "F:5:20: error: mig-configs.c[0].mig-enabled: expected true or false, got 'yes please'"},
      {"mig_enabled_quoted", "mig", "version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: \"true\"\n",
       "F:5:20: error: mig-configs.c[0].mig-enabled: expected true or false, got 'true'"},
      {"mig_devices_word", "mig", "version: v1\nmig-configs:\n  c:\n    - devices: some\n      mig-enabled: false\n",
       "F:4:16: error: mig-configs.c[0].devices: expected 'all' or a list of GPU indices, got 'some'"},
      {"mig_negative_index", "mig", "version: v1\nmig-configs:\n  c:\n    - devices: [0, -1]\n      mig-enabled: false\n",
       "F:4:20: error: mig-configs.c[0].devices[1]: GPU index -1 selects no GPU", "--strict"},
      {"mig_duplicate_index", "mig", "version: v1\nmig-configs:\n  c:\n    - devices: [1, 1]\n      mig-enabled: false\n",
       "F:4:20: error: mig-configs.c[0].devices[1]: GPU index 1 is listed twice", "--strict"},
      {"mig_negative_count", "mig", kMigHead + "      mig-devices: {\"1g.10gb\": -3}\n",
       "F:6:32: error: mig-configs.c[0].mig-devices.1g.10gb: -3 is out of range (allowed: 0 or more)"},
      {"mig_huge_count", "mig", kMigHead + "      mig-devices: {\"1g.10gb\": 99999999999999999999}\n",
       "F:6:32: error: mig-configs.c[0].mig-devices.1g.10gb: expected an integer, got '99999999999999999999'"},
      {"mig_count_string", "mig", kMigHead + "      mig-devices: {\"1g.10gb\": \"7\"}\n",
       "F:6:32: error: mig-configs.c[0].mig-devices.1g.10gb: expected an integer, got the string \"7\""},
      {"mig_count_over_max", "mig", kMigHead + "      mig-devices: {\"1g.10gb\": 8}\n",
       "F:6:32: error: mig-configs.c[0].mig-devices.1g.10gb: count 8 is over the maximum of 7 for 1g.10gb on A100-SXM4-80GB", "--strict"},
      {"mig_bad_profile_syntax", "mig", kMigHead + "      mig-devices: {\"big-slice\": 1}\n",
       "F:6:21: error: mig-configs.c[0].mig-devices.big-slice: 'big-slice' is not a MIG profile name (expected <g>g.<mem>gb with optional +me, such as 1g.10gb or 3g.40gb)"},
      {"mig_duplicate_profile", "mig", kMigHead + "      mig-devices:\n        \"1g.10gb\": 1\n        \"1g.10gb\": 2\n",
       "F:8:9: error: mig-configs.c[0].mig-devices.1g.10gb: profile '1g.10gb' is listed twice; the last count is used", "--strict"},
      {"mig_unplaceable", "mig", kMigHead + "      device-filter: \"0x20B210DE\"\n      mig-devices: {\"4g.40gb\": 1, \"2g.20gb\": 2}\n",
       "F:7:20: error: mig-configs.c[0].mig-devices: 2x2g.20gb + 1x4g.40gb cannot be placed on one A100-SXM4-80GB: they need 8 compute slices, the GPU has 7", "--strict"},
      {"mig_disabled_with_devices", "mig", "version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: false\n      mig-devices: {\"1g.10gb\": 1}\n",
       "F:6:20: error: mig-configs.c[0].mig-devices: must be empty when mig-enabled is false"},
      {"mig_enabled_without_devices", "mig", kMigHead, "F:4:7: error: mig-configs.c[0]: missing field 'mig-devices', required when mig-enabled is true ({} for none)"},
      {"mig_bad_filter", "mig", kMigHead + "      device-filter: \"A100\"\n      mig-devices: {}\n",
       "F:6:22: error: mig-configs.c[0].device-filter: 'A100' is not a PCI device id (such as 0x20B210DE or 0x233010DE:0x16C010DE): it matches no GPU", "--strict"},
      {"mig_unquoted_filter", "mig", kMigHead + "      device-filter: 0x20B210DE\n      mig-devices: {}\n",
       "F:6:22: error: mig-configs.c[0].device-filter: expected a string, got the number 0x20B210DE (quote it: \"0x20B210DE\")"},
      {"mig_all_counts_zero", "mig", kMigHead + "      mig-devices: {\"1g.10gb\": 0}\n",
       "F:6:20: error: mig-configs.c[0].mig-devices: every count is 0 (mig-parted refuses this; write {} for no MIG devices)"},
      {"mig_deep_nesting", "mig", deep(200), "F:4:77: error: nesting is deeper than 64 levels"},
      {"mig_ten_megabytes", "mig", huge(), "F: error: file is too large (10485775 bytes; the limit is 1048576)"},
      {"mig_billion_laughs", "mig", laughs(), "error: the document expands to more than 200000 nodes (aliases?)"},
      {"mig_nul_byte", "mig", std::string("version: v1\0\n", 13), "F: error: file contains a NUL byte; expected YAML text"},
      // --- device-plugin configs ---
      // What is not a device-plugin config at all: never called valid.
      {"dp_empty", "config", "", "F: error: the file is empty: expected a device-plugin config (version: v1, flags: ..., sharing: ...); NVIDIA's plugin would run with every default"},
      {"dp_blank", "config", "# nothing\n\n", "F: error: the file is empty: expected a device-plugin config (version: v1, flags: ..., sharing: ...); NVIDIA's plugin would run with every default"},
      {"dp_deployment", "config", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
       "F:1:1: error: kind: this is a Kubernetes Deployment (apps/v1), not a device-plugin config or a ConfigMap holding one"},
      {"dp_prometheus_rules", "config", "groups:\n- name: gpu\n  rules: []\n",
       "F:1:1: error: none of a device-plugin config's fields (version, flags, sharing, resources) is here (it has groups): this is not a device-plugin config"},
      {"dp_two_documents", "config", "version: v1\n---\nversion: v1\nflags: {migStrategy: mixd}\n",
       "F: error: the file holds 2 YAML documents; a device-plugin config is one (NVIDIA's plugin reads only the first)"},
      {"dp_configmap_broken_inside", "config",
       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dp}\ndata:\n  default: |\n    version: v1\n  shared: |\n    version: v1\n    sharing:\n      timeSlicing:\n        resources: [{name: nvidia.com/gpu, replicas: 0}]\n",
       "F:data.shared:4:50: error: sharing.timeSlicing.resources[0].replicas: 0 is out of range (allowed: 2 to 1024)"},
      {"dp_configmap_empty", "config", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dp}\ndata: {}\n",
       "F:4:7: error: data: the ConfigMap holds no config under data (the GPU Operator's holds one key per config, e.g. data.default)"},
      {"dp_scalar", "config", "hello\n", "F:1:1: error: expected a device-plugin config (a map with version, flags, sharing), got 'hello'"},
      {"dp_unknown_version", "config", "version: v0\n", "F:1:10: error: version: unknown version 'v0' (allowed: v1)"},
      {"dp_bad_mig_strategy", "config", "version: v1\nflags:\n  migStrategy: half\n",
       "F:3:16: error: flags.migStrategy: got 'half' (allowed: none, single, mixed)"},
      {"dp_unknown_flag", "config", "version: v1\nflags:\n  migStrategyy: mixed\n",
       "F:3:3: error: flags.migStrategyy: unknown field 'migStrategyy' (allowed: migStrategy, failOnInitError, mpsRoot, nvidiaDriverRoot, nvidiaDevRoot, gdrcopyEnabled, gdsEnabled, mofedEnabled, useNodeFeatureAPI, deviceDiscoveryStrategy, plugin, gfd)", "--strict"},
      {"dp_bad_list_strategy", "config", "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [envvar, carrier-pigeon]\n",
       "F:4:34: error: flags.plugin.deviceListStrategy[1]: got 'carrier-pigeon' (allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)"},
      {"dp_replicas_one", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 1\n",
       "F:6:17: error: sharing.timeSlicing.resources[0].replicas: 1 is out of range (allowed: 2 to 1024)"},
      {"dp_replicas_huge", "config", "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 100\n",
       "F:6:17: error: sharing.mps.resources[0].replicas: 100 is out of range (allowed: 2 to 48)"},
      {"dp_missing_replicas", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n",
       "F:5:7: error: sharing.timeSlicing.resources[0]: missing required field 'replicas' (an integer >= 2)"},
      {"dp_bad_resource_name", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: \"nvidia.com/g p u\"\n      replicas: 2\n",
       "F:5:13: error: sharing.timeSlicing.resources[0].name: 'nvidia.com/g p u' is not a valid resource name (nvidia.com/<name>, name of lower-case letters, digits, '-' and '.')"},
      {"dp_unshareable_resource", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: example.com/fpga\n      replicas: 2\n",
       "F:5:13: error: sharing.timeSlicing.resources[0].name: 'example.com/fpga' is not an nvidia.com/ resource (NVIDIA's plugin reads it as 'nvidia.com/example.com/fpga', which is not a valid name)"},
      {"dp_unmatched_resource", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: fpga\n      replicas: 2\n",
       "F:5:7: error: sharing.timeSlicing.resources[0].name: 'nvidia.com/fpga' matches no GPU or MIG resource (nvidia.com/gpu or nvidia.com/mig-<profile>); nothing is shared by it", "--strict"},
      {"dp_time_slicing_no_resources", "config", "version: v1\nsharing:\n  timeSlicing: {}\n",
       "F:3:16: error: sharing.timeSlicing: no resources specified (expected resources: a non-empty list)"},
      {"dp_imex_channel", "config", "version: v1\nimex:\n  channelIDs: [1]\n",
       "F:3:15: error: imex.channelIDs: channelIDs must be [] or [0]; found [1]"},
      {"dp_duplicate_resource", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2}\n    - {name: gpu, replicas: 3}\n",
       "F:6:7: error: sharing.timeSlicing.resources[1].name: resource 'nvidia.com/gpu' is listed twice; the first entry that selects a device applies", "--strict"},
      {"dp_both_modes", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}]\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n",
       "F:1:1: error: sharing: timeSlicing and mps are both configured; mps is used and timeSlicing ignored (as NVIDIA's plugin does)", "--strict"},
      {"dp_bad_device_id", "config", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      devices: [\"GPU-zz\"]\n",
       "F:7:17: error: sharing.timeSlicing.resources[0].devices[0]: 'GPU-zz' is not a device id (GPU index, 'gpu:mig' index, GPU-<uuid> or MIG-<uuid>)"},
      {"dp_bool_wrong_type", "config", "version: v1\nflags:\n  failOnInitError: [true]\n",
       "F:3:20: error: flags.failOnInitError: expected true or false, got a list"},
      {"dp_ten_megabytes", "config", huge(), "F: error: file is too large (10485775 bytes; the limit is 1048576)"},
  };
}

class BadInputs : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputs, PreciseMessageAndNonZeroExit) {
  const auto& c = GetParam();
  testing::TempDir dir;
  auto file = dir.write(std::string(c.name) + ".yaml", c.content);
  std::vector<std::string> argv{kBin, c.command, "validate", "-f", file};
  if (c.flag) argv.push_back(c.flag);
  auto r = run(argv);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  if (c.flag) {  // accepted, with the same line as a warning that says what is ignored, without --strict
    auto lenient = run({kBin, c.command, "validate", "-f", file});
    EXPECT_EQ(lenient.exit_code, 0) << lenient.out << lenient.err;
    std::string warning = c.expected;
    warning.replace(warning.find(": error: "), 9, ": warning: ");
    if (warning.find("unknown field") != std::string::npos) warning += "; ignored";
    if (warning.rfind("F", 0) == 0) warning = file + warning.substr(1);
    EXPECT_NE(lenient.err.find(warning + "\n"), std::string::npos) << "expected: " << warning << "\ngot:\n" << lenient.err;
  }
  std::string expected = c.expected;
  if (expected.rfind("F", 0) == 0) expected = file + expected.substr(1);
  EXPECT_NE(r.err.find(expected + "\n"), std::string::npos) << "expected: " << expected << "\ngot:\n" << r.err;
}

INSTANTIATE_TEST_SUITE_P(Table, BadInputs, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(BadInputs, MissingFileAndDirectory) {
  testing::TempDir dir;
  auto missing = run({kBin, "mig", "validate", "-f", dir.path() + "/nope.yaml"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find(dir.path() + "/nope.yaml: error: cannot open file: No such file or directory\n"),
            std::string::npos)
      << missing.err;
  auto directory = run({kBin, "config", "validate", "-f", dir.path()});
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_NE(directory.err.find(dir.path() + ": error: cannot read file: Is a directory\n"), std::string::npos)
      << directory.err;
}

// Every command that reads a file says why it cannot: the operating system's reason.
TEST(BadInputs, EveryFileReadSaysWhy) {
  testing::TempDir dir;
  auto mig = dir.write("mig.yaml", "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n");
  auto sub = dir.path() + "/sub";
  std::filesystem::create_directory(sub);
  auto forbidden = dir.write("forbidden.yaml", "version: v1\n");
  std::filesystem::permissions(forbidden, std::filesystem::perms::none);
  // {argv with F for the file under test, the exit code}
  std::vector<std::vector<std::string>> commands = {
      {"mig", "validate", "-f", "F"},
      {"mig", "plan", "-f", "F", "-c", "a"},
      {"mig", "apply", "-f", "F", "-c", "a"},
      {"mig", "plan", "-f", mig, "--labels-file", "F"},
      {"mig", "apply", "-f", mig, "--labels-file", "F"},
      {"config", "validate", "-f", "F"},
      {"plan", "-f", "F"},
      {"plugin", "--config-file", "F"},
  };
  std::vector<std::pair<std::string, std::string>> files = {{dir.path() + "/nope.yaml", "No such file or directory"},
                                                            {sub, "Is a directory"}};
  if (geteuid() != 0) files.emplace_back(forbidden, "Permission denied");  // root reads anything
  for (const auto& [file, reason] : files) {
    for (auto argv : commands) {
      for (auto& a : argv)
        if (a == "F") a = file;
      argv.insert(argv.begin(), kBin);
      auto r = run(argv, "", {"TESSERA_SIM=" + dir.path() + "/no-node"});
      EXPECT_EQ(r.exit_code, 1) << argv[1] << " " << argv[2] << " " << file << "\n" << r.err;
      EXPECT_NE(r.err.find(file + ": "), std::string::npos) << argv[1] << " " << argv[2] << "\n" << r.err;
      EXPECT_NE(r.err.find(reason), std::string::npos) << argv[1] << " " << argv[2] << " " << file << "\n" << r.err;
    }
  }
}

// 3 KB of arbitrary bytes (ESC among them, no NUL): the error quotes a short excerpt,
// escaped, and --json still prints JSON.
TEST(BadInputs, BinaryFileIsQuotedBrieflyAndEscaped) {
  testing::TempDir dir;
  std::string bytes;
  uint32_t x = 12345;
  for (int i = 0; i < 3072; ++i) {
    x = x * 1103515245u + 12345u;
    char c = static_cast<char>((x >> 16) & 0xFF);
    bytes += c == '\0' ? '\x1b' : c;
  }
  bytes[0] = 'x';  // a scalar document, the shape that used to come back whole
  bytes[1] = '\x1b';
  auto file = dir.write("blob.bin", bytes);
  for (const char* command : {"mig", "config"}) {
    auto r = run({kBin, command, "validate", "-f", file});
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_LT(r.err.size(), 500u) << command << "\n" << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << command << "\n" << r.err;
    auto j = run({kBin, command, "validate", "-f", file, "--json"});
    EXPECT_EQ(j.exit_code, 1) << command << "\n" << j.err;
    EXPECT_TRUE(nlohmann::json::accept(j.out)) << command << "\n" << j.out << j.err;
  }
  auto plan = run({kBin, "plan", "-f", file});
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_LT(plan.err.size(), 500u) << plan.err;
  EXPECT_EQ(plan.err.find('\x1b'), std::string::npos) << plan.err;
}

// Escape sequences in a YAML string reach the terminal escaped; long values are cut.
TEST(BadInputs, ControlCharactersInValuesAreEscaped) {
  testing::TempDir dir;
  auto dp = dir.write("dp.yaml", "version: v1\nflags:\n  migStrategy: \"\\e[31mred\\e[0m\\tx\"\n");
  auto r = run({kBin, "config", "validate", "-f", dp});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dp + ":3:16: error: flags.migStrategy: got '\\x1b[31mred\\x1b[0m\\tx' (allowed: none, single, mixed)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  auto key = dir.write("key.yaml", "version: v1\n\"mig-\\e[2Jconfigs\": {}\n");
  auto k = run({kBin, "mig", "validate", "-f", key});
  EXPECT_NE(k.err.find("unknown field 'mig-\\x1b[2Jconfigs'"), std::string::npos) << k.err;
  EXPECT_EQ(k.err.find('\x1b'), std::string::npos) << k.err;
  auto mig = dir.write("mig.yaml", "version: v1\nmig-configs:\n  c:\n    - devices: " + std::string(3000, 'g') +
                                       "\n      mig-enabled: false\n");
  auto m = run({kBin, "mig", "validate", "-f", mig});
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_LT(m.err.size(), 500u) << m.err;
  EXPECT_NE(m.err.find("'" + std::string(60, 'g') + "…'"), std::string::npos) << m.err;
}

// --strict on the commands that act on a config: a warning stops them before anything is touched.
TEST(BadInputs, StrictRefusesWarningsBeforeActing) {
  testing::TempDir dir;
  auto mig = dir.write("mig.yaml", kMigHead + "      device-filter: \"A100\"\n      mig-devices: {}\n");
  auto dp = dir.write("dp.yaml", "version: v1\nsharing: {timeSlicing: {resources: [{name: fpga, replicas: 2}]}}\n");
  const std::string mig_line = mig + ":6:22: error: mig-configs.c[0].device-filter: 'A100' is not a PCI device id";
  const std::string dp_line = dp + ":2:37: error: sharing.timeSlicing.resources[0].name: 'nvidia.com/fpga' matches no GPU";
  for (const char* command : {"plan", "apply"}) {
    auto r = run({kBin, "mig", command, "-f", mig, "-c", "c", "--strict"}, "", {"TESSERA_SIM=" + dir.path() + "/no-node"});
    EXPECT_EQ(r.exit_code, 1) << command << "\n" << r.err;
    EXPECT_NE(r.err.find(mig_line), std::string::npos) << command << "\n" << r.err;
  }
  auto plugin = run({kBin, "plugin", "--config-file", dp, "--strict"}, "", {"TESSERA_SIM=" + dir.path() + "/no-node"});
  EXPECT_EQ(plugin.exit_code, 1) << plugin.err;
  EXPECT_NE(plugin.err.find(dp_line), std::string::npos) << plugin.err;
}

TEST(BadInputs, UnknownGpuIsAUsageError) {
  testing::TempDir dir;
  auto file = dir.write("ok.yaml", "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n");
  auto r = run({kBin, "mig", "validate", "-f", file, "--gpu", "Z100"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown GPU model 'Z100'"), std::string::npos);
}

}  // namespace
}  // namespace tessera
