// The `tessera` program, run as a user runs it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/data.hpp"
#include "support/run.hpp"

namespace tessera {
namespace {

using testing::run;
using testing::TempDir;
const std::string kBin = TESSERA_BIN;
using testing::kGpuOperatorConfigMap;
using testing::kNvidiaMigDefaults;

TEST(Cli, HelpExplainsTheCommands) {
  auto r = run({kBin, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"catalog", "mig", "config", "--log-level"}) { EXPECT_NE(r.out.find(word), std::string::npos) << word; }
  auto v = run({kBin, "mig", "validate", "--help"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("device-filter"), std::string::npos);
}

// `tessera sim SUB DIR`: the typed DIR is the node, whatever TESSERA_SIM
// says; TESSERA_SIM is only the default when no DIR is typed.
// A --json command that fails before writing its JSON still writes one JSON
// object on stdout, in one shape: {"error": {command, exit_code, message}},
// the message what it said on stderr; one that wrote its JSON adds nothing.
TEST(Cli, AFailedJsonCommandWritesOneErrorObject) {
  struct Case {
    std::vector<std::string> args;
    std::string command;
    int code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{kBin, "inventory", "--json", "--sim", "/nonexistent"}, "tessera inventory", 1, "is not a simulated node"},
      {{kBin, "catalog", "--gpu", "Z9", "--json"}, "tessera catalog", 2, "unknown GPU model 'Z9'"},
      {{kBin, "plan", "--json", "-f", "/nonexistent"}, "tessera plan", 1, "cannot open file"},
  };
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.command << "\n" << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << c.command << ": stdout is not one JSON object: " << r.out;
    ASSERT_TRUE(j.contains("error")) << r.out;
    EXPECT_EQ(j["error"]["command"], c.command);
    EXPECT_EQ(j["error"]["exit_code"], c.code);
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.says), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << "stderr still says it";
  }
  // A command whose own JSON says what failed gets nothing more.
  auto own = run({kBin, "mig", "validate", "-f", "/nonexistent", "--json"});
  EXPECT_EQ(own.exit_code, 1);
  const auto j = nlohmann::json::parse(own.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << own.out;
  EXPECT_FALSE(j.contains("error")) << own.out;
  EXPECT_EQ(j["valid"], false);
}

// A bad --metrics-listen stops `tessera dra` before it reads a GPU or the API server.
TEST(Cli, DraRefusesABadMetricsAddressWithItsReason) {
  auto r = run({kBin, "dra", "--node-name", "n", "--metrics-listen", "bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tessera dra: --metrics-listen 'bogus': expected HOST:PORT, e.g. 127.0.0.1:9400\n");
  r = run({kBin, "dra", "--node-name", "n", "--metrics-listen", "1.2.3.4:99999"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tessera dra: --metrics-listen '1.2.3.4:99999': the port must be a number from 0 to 65535\n");
}

TEST(Cli, SimTakesTheTypedDirOverTessera_Sim) {
  testing::TempDir dir;
  const std::string a = dir.path() + "/a", b = dir.path() + "/b";
  ASSERT_EQ(run({kBin, "sim", "create", a, "--gpu", "A100-80GB"}).exit_code, 0);
  ASSERT_EQ(run({kBin, "sim", "create", b, "--gpu", "A100-80GB"}).exit_code, 0);
  auto r = run({kBin, "sim", "process", a, "--pid", "4242", "--memory", "1GiB", "--gpu", "0"}, "", {"TESSERA_SIM=" + b});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto holds = [&](const std::string& node) {  // the simulator's own state file
    std::ifstream in(node + "/node.json");
    return std::string(std::istreambuf_iterator<char>(in), {}).find("4242") != std::string::npos;
  };
  EXPECT_TRUE(holds(a));
  EXPECT_FALSE(holds(b));
  r = run({kBin, "sim", "process", "--pid", "4343", "--memory", "1GiB", "--gpu", "0"}, "", {"TESSERA_SIM=" + b});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run({kBin, "sim", "process", "--pid", "1"}, "", {"TESSERA_SIM="});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("dir (or TESSERA_SIM) is required"), std::string::npos) << r.err;
}

// `sim process --memory 10` is refused: it would hold 10 bytes.
TEST(Cli, SimProcessMemoryNeedsAUnit) {
  testing::TempDir dir;
  const std::string node = dir.path() + "/node";
  ASSERT_EQ(run({kBin, "sim", "create", node, "--gpu", "A100-80GB"}).exit_code, 0);
  auto r = run({kBin, "sim", "process", node, "--pid", "4242", "--memory", "10", "--gpu", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--memory: '10' has no unit: write 10GiB, 10MiB or 10B"), std::string::npos) << r.err;
  EXPECT_EQ(run({kBin, "sim", "process", node, "--pid", "4242", "--memory", "10GiB", "--gpu", "0"}).exit_code, 0);
}

// Numbers said in words: a negative Xid is not taken as 2^64 - 4, a count
// of 0 names its range (not 1.8e308 in full), and a fault on a function the
// simulator does not have is refused rather than never firing.
TEST(Cli, SimNumbersAndFaultsAreCheckedBeforeAnythingIsStored) {
  testing::TempDir dir;
  const std::string node = dir.path() + "/node";
  ASSERT_EQ(run({kBin, "sim", "create", node, "--gpu", "A100-80GB"}).exit_code, 0);
  std::ifstream before_in(node + "/node.json");
  const std::string before(std::istreambuf_iterator<char>(before_in), {});
  auto r = run({kBin, "sim", "event", node, "--gpu", "0", "--xid", "-4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--xid: '-4' is not a whole number from 0 to 4294967295"), std::string::npos) << r.err;
  r = run({kBin, "sim", "fault", node, "--function", "nvmlDeviceGetCount_v2", "--nth", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nth: '0' is not a whole number from 1 to 4294967295"), std::string::npos) << r.err;
  r = run({kBin, "sim", "fault", node, "--function", "nvmlNoSuchFunc"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'nvmlNoSuchFunc' is not an NVML function this simulator implements"), std::string::npos)
      << r.err;
  r = run({kBin, "sim", "fault", node, "--function", "nvmlDeviceGetCount_v2", "--crash"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--crash needs a call that changes the node"), std::string::npos) << r.err;
  r = run({kBin, "sim", "fault", node, "--function", "nvmlGpuInstanceDestroy", "--crash", "--error", "NVML_ERROR_UNKNOWN"});
  EXPECT_EQ(r.exit_code, 2) << "--crash and --error exclude each other";
  std::ifstream after_in(node + "/node.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(after_in), {}), before) << "nothing was stored";
  r = run({kBin, "fleet", "run", "--poll", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--poll: '0' is not a number greater than 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("179769313486231570814527"), std::string::npos) << r.err;
  EXPECT_EQ(run({kBin, "sim", "fault", node, "--function", "nvmlDeviceGetCount_v2"}).exit_code, 0);
}

// A file plan cannot write names the system's reason.
TEST(Cli, PlanSaysWhyItCannotWriteAFile) {
  auto r = run({kBin, "plan", "-f", testing::kSourceDir + "/examples/fleet.yaml", "--svg", "/nonexistent/dir/x.svg"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tessera plan: cannot write /nonexistent/dir/x.svg: No such file or directory"), std::string::npos)
      << r.err;
}

TEST(Cli, VersionNeedsNoCommand) {
  auto r = run({kBin, "--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(r.out, std::regex(R"(tessera \d+\.\d+\.\d+\n)"))) << r.out;
}

TEST(Cli, NoCommandIsAUsageError) {
  auto r = run({kBin});
  EXPECT_EQ(r.exit_code, 2);
  auto bad = run({kBin, "frobnicate"});
  EXPECT_EQ(bad.exit_code, 2);
  // A mistyped command is named, with the nearest ones.
  auto typo = run({kBin, "catlog"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown command 'catlog' (nearest: catalog"), std::string::npos) << typo.err;
  typo = run({kBin, "--log-level", "info", "invnetory", "--json"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown command 'invnetory' (nearest: inventory"), std::string::npos) << typo.err;
}

// `tessera help [COMMAND]`, `tessera version` and -V, as users try them.
TEST(Cli, HelpAndVersionAsWords) {
  auto help = run({kBin, "help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("Run `tessera COMMAND --help`"), std::string::npos) << help.out;
  auto mig = run({kBin, "help", "mig"});
  EXPECT_EQ(mig.exit_code, 0) << mig.err;
  EXPECT_NE(mig.out.find("validate"), std::string::npos) << mig.out;
  EXPECT_EQ(mig.out, run({kBin, "mig", "--help"}).out);
  for (const char* v : {"version", "-V"}) {
    auto r = run({kBin, v});
    EXPECT_EQ(r.exit_code, 0) << v << ": " << r.err;
    EXPECT_TRUE(std::regex_match(r.out, std::regex(R"(tessera \d+\.\d+\.\d+\n)"))) << v << ": " << r.out;
  }
  // Bad arguments are usage errors, named.
  auto nosuch = run({kBin, "help", "migg"});
  EXPECT_EQ(nosuch.exit_code, 2) << nosuch.out;
  EXPECT_NE(nosuch.err.find("unknown command 'migg' (nearest: mig"), std::string::npos) << nosuch.err;
  EXPECT_EQ(nosuch.out, "");
  auto bogus = run({kBin, "version", "--bogus"});
  EXPECT_EQ(bogus.exit_code, 2) << bogus.out;
  EXPECT_NE(bogus.err.find("takes no arguments (got '--bogus')"), std::string::npos) << bogus.err;
}

// A mistyped command or option at any level is named with the nearest
// ones, and a command that needs a subcommand and gets none lists them: a
// usage error (2) each, nothing on stdout.
TEST(Cli, TyposAtEveryLevelAreNamedWithTheNearest) {
  struct Typo {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& t : std::vector<Typo>{
           {{"mig", "valdate"}, "tessera mig: unknown command 'valdate' (nearest: validate"},
           {{"fleet", "pln"}, "tessera fleet: unknown command 'pln' (nearest: plan"},
           {{"plan", "--gpus", "3"}, "tessera plan: unknown option '--gpus' (nearest: --gpus-per-node, --gpu"},
           {{"mig", "validate", "--fle", "x.yaml"}, "tessera mig validate: unknown option '--fle' (nearest: --file"},
           {{"config", "validate", "x.yaml"},
            "tessera config validate: unexpected argument 'x.yaml' (a file is given with --file: `tessera config validate --file x.yaml`)"},
           {{"catalog", "--layouts", "extra"}, "tessera catalog: unexpected argument 'extra'; run `tessera catalog --help`"},
           {{"--log-level", "debug", "mig", "valdate"}, "tessera mig: unknown command 'valdate' (nearest: validate"},
           {{"mig"}, "tessera mig: a command is needed: validate, plan, apply"},
           {{}, "tessera: a command is needed: catalog, mig, config"}}) {
    std::vector<std::string> argv{kBin};
    argv.insert(argv.end(), t.args.begin(), t.args.end());
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 2) << t.says << "\n" << r.err;
    EXPECT_NE(r.err.find(t.says), std::string::npos) << "expected: " << t.says << "\ngot:\n" << r.err;
    EXPECT_EQ(r.out, "") << t.says;
  }
}

// Log levels as people write them, in any case, by flag or environment; a
// level that is none is refused, named.
TEST(Cli, LogLevelsInAnyCase) {
  for (const char* level : {"DEBUG", "Info", "warn"}) {
    auto r = run({kBin, "catalog"}, "", {std::string("TESSERA_LOG_LEVEL=") + level});
    EXPECT_EQ(r.exit_code, 0) << level << ": " << r.err;
    r = run({kBin, "--log-level", level, "catalog"});
    EXPECT_EQ(r.exit_code, 0) << level << ": " << r.err;
  }
  auto bad = run({kBin, "catalog"}, "", {"TESSERA_LOG_LEVEL=loud"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("loud"), std::string::npos) << bad.err;
}

TEST(Cli, CatalogListsEveryModel) {
  auto r = run({kBin, "catalog"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* m : {"A100-SXM4-40GB", "A100-SXM4-80GB", "A30-24GB", "H100-SXM5-80GB", "H100-PCIe-80GB",
                        "H100-NVL-94GB", "H200-SXM-141GB", "GH200-96GB", "GH200-144GB", "B200-180GB", "GB200"})
    EXPECT_NE(r.out.find(m), std::string::npos) << m;
}

TEST(Cli, CatalogJsonForOneModel) {
  auto r = run({kBin, "catalog", "--gpu", "H200", "--json", "--layouts"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["name"], "H200-SXM-141GB");
  EXPECT_EQ(j["pci_device_id"], "0x233510DE");
  EXPECT_EQ(j["profiles"].size(), 7u);
  EXPECT_EQ(j["maximal_layouts"].size(), 239u);
}

TEST(Cli, CatalogUnknownModel) {
  auto r = run({kBin, "catalog", "--gpu", "A100-SXM4-80G"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error (docs/errors.md), as in every command taking --gpu
  EXPECT_EQ(r.err, "tessera catalog: unknown GPU model 'A100-SXM4-80G' (nearest: A100-SXM4-80GB, A100-SXM4-40GB, "
                   "H100-SXM5-80GB; `tessera catalog` lists all)\n");
}

TEST(Cli, NvidiaDefaultFilesAreValid) {
  for (const auto& f : {kNvidiaMigDefaults, kGpuOperatorConfigMap}) {
    auto r = run({kBin, "mig", "validate", "-f", f});
    EXPECT_EQ(r.exit_code, 0) << f << "\n" << r.err;
    EXPECT_NE(r.out.find(": valid: 81 configs"), std::string::npos) << r.out;
  }
}

// NVIDIA's default file names profiles and PCI ids of GPUs the catalog lacks
// (B300, GB300, RTX PRO parts): not checked, said as warnings, so --strict refuses
// it, and for that reason only (docs/cli.md says so).
TEST(Cli, NvidiaDefaultFileUnderStrictFailsOnlyForProfilesTheCatalogLacks) {
  auto r = run({kBin, "mig", "validate", "-f", kNvidiaMigDefaults, "--strict"});
  EXPECT_EQ(r.exit_code, 1);
  size_t errors = 0;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(": error: ") == std::string::npos) continue;
    ++errors;
    const bool uncatalogued = line.find("is not known for any GPU in the catalog; not checked") != std::string::npos ||
                              line.find("is not in the GPU catalog; not checked for it") != std::string::npos;
    EXPECT_TRUE(uncatalogued) << line;
  }
  EXPECT_EQ(errors, 30u) << r.err;
}

// A config whose profiles are each some catalogued GPU's, but no one GPU's
// all, applies on none: said, never a bare "valid".
TEST(Cli, ValidateWarnsForAConfigNoGpuServes) {
  TempDir dir;
  auto f = dir.write("mix.yaml", "version: v1\nmig-configs:\n  mixed-up:\n    - devices: all\n      mig-enabled: true\n"
                                 "      mig-devices: {\"1g.10gb\": 2, \"1g.12gb\": 1}\n");
  auto r = run({kBin, "mig", "validate", "-f", f});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("mix.yaml:6:20: warning: mig-configs.mixed-up[0].mig-devices: no GPU in the catalog has all of these "
                       "profiles (1g.10gb: A100-SXM4-40GB, A100-SXM4-80GB"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1g.12gb: H100-NVL-94GB, GH200-96GB): it applies on none"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("1 warning"), std::string::npos) << r.out;
  EXPECT_EQ(run({kBin, "mig", "validate", "-f", f, "--strict"}).exit_code, 1);
}

TEST(Cli, ValidateOneConfigOnOneGpuPrintsTheLayout) {
  auto r = run({kBin, "mig", "validate", "-f", kNvidiaMigDefaults, "-c", "all-balanced",
                "--gpu", "A100-80GB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("all-balanced  8      A100-SXM4-80GB  ok      2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4"),
            std::string::npos)
      << r.out;
}

TEST(Cli, ValidateJson) {
  auto r = run({kBin, "mig", "validate", "-f", kNvidiaMigDefaults, "--json"});
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_EQ(j["errors"].size(), 0u);
  EXPECT_GT(j["warnings"].size(), 0u);  // B300 / RTX PRO profiles the catalog lacks
  EXPECT_GT(j["checks"].size(), 100u);
}

// A config written for another GPU, checked on this one: a warning (an
// error under --strict), never a silent "valid: 0 entry checks".
TEST(Cli, ValidateSaysWhenTheConfigIsForOtherGpus) {
  testing::TempDir dir;
  auto file = dir.write("a100.yaml",
                        "version: v1\nmig-configs:\n  mixed-inference-a100:\n    - devices: all\n"
                        "      device-filter: [\"0x20B210DE\"]\n      mig-enabled: true\n      mig-devices: {\"3g.40gb\": 2}\n");
  auto r = run({kBin, "mig", "validate", "-f", file, "-c", "mixed-inference-a100", "--gpu", "H100-SXM5-80GB"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no entry of config 'mixed-inference-a100' applies to H100-SXM5-80GB"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("0 entry checks on 0 GPU models, 1 warning\n"), std::string::npos) << r.out;
  auto strict = run({kBin, "mig", "validate", "-f", file, "-c", "mixed-inference-a100", "--gpu", "H100-SXM5-80GB", "--strict"});
  EXPECT_EQ(strict.exit_code, 1) << strict.out;
  EXPECT_NE(strict.err.find("invalid: 1 error, 0 warnings"), std::string::npos) << strict.err;
  // On its own GPU: checked, no warning.
  auto a100 = run({kBin, "mig", "validate", "-f", file, "-c", "mixed-inference-a100", "--gpu", "A100-SXM4-80GB"});
  EXPECT_EQ(a100.exit_code, 0) << a100.err;
  EXPECT_NE(a100.out.find("1 config, 1 entry check on 1 GPU model, 0 warnings"), std::string::npos) << a100.out;
}

TEST(Cli, SeedMixedInferenceFailsOnA100WithNearestNames) {
  testing::TempDir dir;
  auto file = dir.write("seed.yaml", R"(version: v1
mig-configs:
  all-1g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.20gb": 4
  mixed-inference:
    - devices: all
      mig-enabled: true
      mig-devices:
        "2g.40gb": 1
        "1g.20gb": 2
)");
  auto ok = run({kBin, "mig", "validate", "-f", file});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.err.find("warning: mig-configs.mixed-inference[0].mig-devices.2g.40gb: profile '2g.40gb' is not known"),
            std::string::npos);
  auto strict = run({kBin, "mig", "validate", "-f", file, "--gpu", "A100-SXM4-80GB"});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.err.find(file + ":12:20: error: mig-configs.mixed-inference[0].mig-devices.2g.40gb: A100-SXM4-80GB "
                                   "has no MIG profile '2g.40gb' (nearest: 2g.20gb, 3g.40gb, 4g.40gb"),
            std::string::npos)
      << strict.err;
  auto just_first = run({kBin, "mig", "validate", "-f", file, "--gpu", "A100-SXM4-80GB", "-c", "all-1g.20gb"});
  EXPECT_EQ(just_first.exit_code, 0) << just_first.err;
}

TEST(Cli, ReadsStandardInput) {
  auto r = run({kBin, "config", "validate", "-f", "-"}, "version: v1\nflags:\n  migStrategy: single\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("migStrategy: single"), std::string::npos);
}

TEST(Cli, DevicePluginConfigSummary) {
  testing::TempDir dir;
  auto file = dir.write("ts.yaml", R"(version: v1
flags: {migStrategy: none}
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
)");
  auto r = run({kBin, "config", "validate", "-f", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nvidia.com/gpu x4 -> nvidia.com/gpu.shared (devices: all)"), std::string::npos) << r.out;
}

// A mig-parted file is not a device-plugin config, and says so; every file tessera plan writes for
// the device plugin passes --strict (MPS on MIG devices, which NVIDIA's plugin refuses, is a note).
TEST(Cli, ConfigValidateKnowsItsFiles) {
  auto mig = run({kBin, "config", "validate", "-f", std::string(TESSERA_SOURCE_DIR) + "/examples/fleet/mig-config.yaml"});
  EXPECT_EQ(mig.exit_code, 1);
  EXPECT_NE(mig.err.find("error: mig-configs: this is a mig-parted config (MIG layouts), not a device-plugin config: check it "
                         "with `tessera mig validate -f "),
            std::string::npos)
      << mig.err;
  testing::TempDir dir;
  auto plan = run({kBin, "plan", "-f", std::string(TESSERA_SOURCE_DIR) + "/examples/fleet.yaml", "--output-dir", dir.path()});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (!e.path().filename().string().starts_with("device-plugin-")) continue;
    ++files;
    auto v = run({kBin, "config", "validate", "-f", e.path().string(), "--strict"});
    EXPECT_EQ(v.exit_code, 0) << e.path() << "\n" << v.err;
  }
  EXPECT_GE(files, 2);
  auto mps = run({kBin, "config", "validate", "-f", dir.path() + "/device-plugin-mps.yaml", "--strict"});
  EXPECT_NE(mps.err.find("note: flags.migStrategy: NVIDIA's plugin refuses migStrategy mixed with MPS"), std::string::npos) << mps.err;
}

// docs/errors.md: an unknown GPU model on the command line is a usage error, with one message
// shape, in every command that takes --gpu MODEL; the command line is checked before any file.
TEST(Cli, UnknownGpuIsAUsageErrorInEveryCommand) {
  testing::TempDir dir;
  auto mig = dir.write("ok.yaml", "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n");
  const std::string missing = dir.path() + "/missing.csv";
  const std::string nearest = "(nearest: A100-SXM4-80GB, A100-SXM4-40GB, H100-SXM5-80GB; `tessera catalog` lists all)\n";
  struct Case {
    std::string command;  // as the message names it
    std::vector<std::string> argv;
  };
  std::vector<Case> cases = {
      {"tessera catalog", {kBin, "catalog", "--gpu", "A100-SXM4-80G"}},
      {"tessera mig validate", {kBin, "mig", "validate", "-f", mig, "--gpu", "A100-SXM4-80G"}},
      {"tessera mig validate", {kBin, "mig", "validate", "-f", missing, "--gpu", "A100-SXM4-80G"}},
      {"tessera plan", {kBin, "plan", "-f", testing::kWorkload, "--gpu", "A100-SXM4-80G"}},
      {"tessera plan", {kBin, "plan", "-f", missing, "--gpu", "A100-SXM4-80G"}},
      {"tessera sim create", {kBin, "sim", "create", dir.path() + "/node", "--gpu", "A100-SXM4-80G"}},
  };
  for (const auto& c : cases) {
    auto r = run(c.argv);
    EXPECT_EQ(r.exit_code, 2) << c.command << "\n" << r.err;
    EXPECT_EQ(r.err, c.command + ": unknown GPU model 'A100-SXM4-80G' " + nearest) << c.command;
  }
}

// -c is the config's name and -f the file in all three mig commands (mig-parted's -c
// --selected-config and -f --config-file are accepted too); `--config-name` still works.
TEST(Cli, MigCommandsSpellConfigTheSameWay) {
  testing::TempDir dir;
  const std::string node = dir.path() + "/node";
  auto created = run({kBin, "sim", "create", node, "--gpu", "A100-80GB", "--count", "2"}, "", {"TESSERA_SIM="});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  for (const std::string name_flag : {"-c", "--config", "--selected-config"}) {
    for (const std::string file_flag : {"-f", "--file", "--config-file"}) {
      auto v = run({kBin, "mig", "validate", file_flag, kNvidiaMigDefaults, name_flag, "all-1g.10gb"});
      EXPECT_EQ(v.exit_code, 0) << name_flag << " " << file_flag << "\n" << v.err;
      EXPECT_NE(v.out.find("all-1g.10gb"), std::string::npos) << v.out;
      for (const char* sub : {"plan", "apply"}) {
        std::vector<std::string> argv{kBin, "mig", sub, file_flag, kNvidiaMigDefaults, name_flag, "all-1g.10gb",
                                      "--sim", node};
        if (std::string(sub) == "apply") argv.push_back("--dry-run");
        auto r = run(argv);
        EXPECT_EQ(r.exit_code, 0) << sub << " " << name_flag << " " << file_flag << "\n" << r.err;
        EXPECT_NE(r.out.find("operations"), std::string::npos) << r.out;
      }
    }
  }
  auto old = run({kBin, "mig", "plan", "-f", kNvidiaMigDefaults, "--config-name", "all-1g.10gb", "--sim", node});
  EXPECT_EQ(old.exit_code, 0) << old.err;
}

// One vocabulary (docs/cli.md): the new names in --help, the old spellings still accepted, each
// warned once with its new name, and hidden from --help.
// The bash script completes commands, subcommands and the flags of the command typed, from the
// command tree itself: run in bash as a shell runs it.
TEST(Cli, CompletionScriptsCompleteCommandsAndFlags) {
  testing::TempDir dir;
  const std::string script = dir.path() + "/tessera.bash";
  auto b = run({kBin, "completion", "bash"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::ofstream(script) << b.out;
  auto complete = [&](const std::string& words, int cword) {
    auto r = run({"/bin/bash", "-c", "source " + script + "; COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
                                    "; _tessera; echo \"${COMPREPLY[*]}\""});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  };
  EXPECT_EQ(complete("tessera fle", 1), "fleet");
  EXPECT_EQ(complete("tessera fleet p", 2), "plan");
  EXPECT_EQ(complete("tessera --log-level info fleet plan --ya", 5), "--yaml");
  EXPECT_EQ(complete("tessera plugin --config-f", 2), "--config-file");
  EXPECT_EQ(complete("tessera mig validate --stri", 3), "--strict");
  EXPECT_EQ(complete("tessera dra --ignored", 2), "") << "old spellings are not offered";
  auto z = run({kBin, "completion", "zsh"});
  EXPECT_EQ(z.exit_code, 0);
  EXPECT_NE(z.out.find("bashcompinit"), std::string::npos);
  auto f = run({kBin, "completion", "fish"});
  EXPECT_EQ(f.exit_code, 0);
  EXPECT_NE(f.out.find("complete -c tessera -n '__fish_seen_subcommand_from fleet; and __fish_seen_subcommand_from plan' -l yaml"),
            std::string::npos) << f.out.substr(0, 2000);
  auto bad = run({kBin, "completion", "tcsh"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "tessera completion: unknown shell 'tcsh' (bash, zsh or fish): `source <(tessera completion bash)`\n");
}

// Long work shows a progress line on a terminal (TESSERA_PROGRESS=always stands in for one here),
// erased when done; piped, standard error carries none of it.
TEST(Cli, ProgressOnATerminalOnly) {
  const std::string spec = std::string(TESSERA_SOURCE_DIR) + "/examples/fleet.yaml";
  auto piped = run({kBin, "plan", "-f", spec, "--json"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find('\r'), std::string::npos) << piped.err;
  auto shown = run({kBin, "plan", "-f", spec, "--json"}, "", {"TESSERA_PROGRESS=always"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  auto report = [](const std::string& out) {
    auto j = nlohmann::json::parse(out);
    j.erase("solve_seconds");
    return j;
  };
  EXPECT_EQ(report(shown.out), report(piped.out)) << "the result does not change";
  EXPECT_NE(shown.err.find("\rtessera plan: solving "), std::string::npos) << shown.err;
  EXPECT_EQ(shown.err.back(), '\r') << "the line is erased at the end";
  testing::TempDir dir;
  const std::string node = dir.path() + "/node";
  ASSERT_EQ(run({kBin, "sim", "create", node, "--gpu", "A100-80GB"}).exit_code, 0);
  auto apply = run({kBin, "mig", "apply", "-f", kNvidiaMigDefaults, "-c", "all-1g.10gb", "--sim", node, "--state-dir",
                    dir.path() + "/state"}, "", {"TESSERA_PROGRESS=always"});
  ASSERT_EQ(apply.exit_code, 0) << apply.err;
  EXPECT_NE(apply.err.find("tessera mig apply: all-1g.10gb "), std::string::npos) << apply.err;
  EXPECT_NE(apply.err.find(": step 1 of "), std::string::npos) << apply.err;
}

TEST(Cli, RenamedFlagsKeepTheirOldSpellingsWithAWarning) {
  struct Case {
    std::string command, old_name, new_name, value;
  };
  const std::vector<Case> cases = {
      {"dra", "--ignored-xids", "--ignore-xids", "13"},    {"dra", "--preload", "--quota-preload", "env"},
      {"dra", "--ledger-root", "--quota-ledger-root", "/x"}, {"dra", "--recovery", "--health-recovery", "5"},
      {"exporter", "--ledger-root", "--quota-ledger-root", "/x"}, {"plugin", "--config", "--config-file", "/x"},
      {"node", "-c", "--config-file", "/x"},                {"plan", "-o", "--output-dir", "/x"},
  };
  for (const auto& c : cases) {
    auto h = run({kBin, c.command, "--help"});
    ASSERT_EQ(h.exit_code, 0) << c.command;
    EXPECT_NE(h.out.find(c.new_name + " "), std::string::npos) << c.command << " --help lacks " << c.new_name;
    EXPECT_FALSE(std::regex_search(h.out, std::regex("(^|[ ,])" + c.old_name + "[ ,\n]")))
        << c.command << " --help still lists " << c.old_name;
    auto r = run({kBin, c.command, c.old_name, c.value, "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("tessera " + c.command + ": " + c.old_name + " is now " + c.new_name), std::string::npos) << r.err;
  }
  auto twice = run({kBin, "dra", "--ignored-xids", "13", "--ignored-xids=31", "--help"});
  const std::string warning = "--ignored-xids is now --ignore-xids";
  ASSERT_NE(twice.err.find(warning), std::string::npos) << twice.err;
  EXPECT_EQ(twice.err.find(warning), twice.err.rfind(warning)) << "warned more than once: " << twice.err;
  // The old spelling does what the new one does.
  testing::TempDir dir;
  auto p = run({kBin, "plan", "-f", std::string(TESSERA_SOURCE_DIR) + "/examples/fleet.yaml", "-o", dir.path() + "/out"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(std::ifstream(dir.path() + "/out/mig-parted.yaml").good());
  auto f = run({kBin, "fleet", "plan", "--snapshot", std::string(TESSERA_SOURCE_DIR) + "/examples/fleet/snapshot.json",
                "--mig-config", std::string(TESSERA_SOURCE_DIR) + "/examples/fleet/mig-config.yaml", "--output", "json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.err.find("tessera fleet plan: --output json is now --json"), std::string::npos) << f.err;
  EXPECT_TRUE(nlohmann::json::accept(f.out));
}

}  // namespace
}  // namespace tessera
