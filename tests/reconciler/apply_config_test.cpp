// The apply transaction as a library (reconciler::apply_config), in process,
// over a simulated node opened through the real NVML loader: outcomes, what
// is written to the state directory, and that a journal which cannot be
// written stops the change before any GPU is touched.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "config/mig_parted.hpp"
#include "nvml/session.hpp"
#include "reconciler/mig_apply.hpp"
#include "reconciler/node_state.hpp"
#include "support/run.hpp"
#include "support/sim_nvml.hpp"

namespace tessera {
namespace {

using testing::run;
using testing::TempDir;

const char* kConfigs = R"(version: v1
mig-configs:
  seven:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  two-3g:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
)";

struct SimNode {
  TempDir dir;
  std::string node = dir.path() + "/node";
  std::string state = dir.path() + "/state";
  config::MigPartedConfig configs;
  std::optional<nvml::Session> session;

  SimNode() {
    auto made = run({TESSERA_BIN, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", "2"});
    EXPECT_EQ(made.exit_code, 0) << made.err;
    config::Diagnostics diags;
    auto parsed = config::parse_mig_parted(kConfigs, "configs.yaml", diags);
    EXPECT_TRUE(parsed) << "the test's configs parse";
    if (parsed) configs = *parsed;
    auto s = testing::open_simulated_nvml(TESSERA_SIM_LIBRARY, node);
    EXPECT_TRUE(s) << s.error().message;
    if (s) session.emplace(std::move(*s));
  }
  reconciler::ApplyRequest request(const std::string& name, bool dry_run = false) const {
    return {"configs.yaml", name, configs.find(name), false, dry_run, {}, {}};
  }
  // MIG device count on the node, as NVML reports it.
  size_t mig_devices() const {
    auto state = reconciler::read_node_state(*session);
    size_t n = 0;
    if (state)
      for (const auto& g : *state) n += g.state.instances.size();
    return n;
  }
  std::string read_state() const {
    std::ifstream in(state + "/mig.config.state");
    std::string v;
    std::getline(in, v);
    return v;
  }
};

TEST(ApplyConfig, AppliesAndRecordsSuccess) {
  SimNode n;
  ASSERT_TRUE(n.session);
  reconciler::JournalFile journal(n.state);
  auto report = reconciler::apply_config(*n.session, n.request("seven"), journal);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->outcome, reconciler::Outcome::success) << report->message;
  EXPECT_EQ(n.mig_devices(), 14u);
  EXPECT_EQ(n.read_state(), "success");
  EXPECT_EQ(report->journal.outcome, "success");
  EXPECT_EQ(report->journal.done(), report->journal.steps.size());
  // A dry run of another config plans, writes nothing, changes nothing.
  auto dry = reconciler::apply_config(*n.session, n.request("two-3g", true), journal);
  ASSERT_TRUE(dry);
  EXPECT_EQ(dry->outcome, reconciler::Outcome::planned);
  EXPECT_GT(dry->plan.operations(), 0u);
  EXPECT_EQ(n.mig_devices(), 14u);
  EXPECT_EQ(n.read_state(), "success");
}

// The journal cannot be written (a directory stands where it goes): the
// change stops before any GPU is touched, and the state says failed.
TEST(ApplyConfig, AJournalThatCannotBeWrittenStopsTheChange) {
  SimNode n;
  ASSERT_TRUE(n.session);
  std::filesystem::create_directories(n.state + "/mig-journal.json/in-the-way");
  reconciler::JournalFile journal(n.state);
  auto report = reconciler::apply_config(*n.session, n.request("seven"), journal);
  ASSERT_FALSE(report) << "the journal could not be written, yet the apply went on";
  EXPECT_NE(report.error().message.find("mig-journal.json"), std::string::npos) << report.error().message;
  EXPECT_EQ(n.mig_devices(), 0u) << "nothing changed on the GPUs";
  EXPECT_NE(n.read_state(), "pending") << "a stopped change never leaves the label pending";
}

// A journal that is not one (hand-edited, wrong types, a directory) is a
// message naming it, never an exception, and nothing changes.
TEST(ApplyConfig, AForeignJournalIsRefusedWithItsPath) {
  SimNode n;
  ASSERT_TRUE(n.session);
  std::filesystem::create_directories(n.state);
  for (const char* text : {"not json", "[1, 2]", R"({"outcome": 7, "steps": [{"gpu": "x"}, 3]})"}) {
    std::ofstream(n.state + "/mig-journal.json") << text;
    reconciler::JournalFile journal(n.state);
    auto loaded = journal.load();
    if (std::string(text).starts_with("{")) {
      ASSERT_TRUE(loaded) << "wrong types read as empty fields";
      ASSERT_TRUE(*loaded);
      EXPECT_EQ((*loaded)->outcome, "");
      EXPECT_EQ((*loaded)->steps.size(), 1u);
      continue;
    }
    ASSERT_FALSE(loaded) << text;
    EXPECT_EQ(loaded.error().message,
              n.state + "/mig-journal.json is not a tessera MIG journal (move it away to start afresh)");
    auto report = reconciler::apply_config(*n.session, n.request("seven"), journal);
    EXPECT_FALSE(report);
    EXPECT_EQ(n.mig_devices(), 0u);
  }
}

// A state directory that cannot hold the state: nothing changes.
TEST(ApplyConfig, AStateThatCannotBeWrittenChangesNothing) {
  SimNode n;
  ASSERT_TRUE(n.session);
  std::filesystem::create_directories(n.dir.path());
  std::ofstream(n.state) << "a file where the state directory goes";
  reconciler::JournalFile journal(n.state);
  auto report = reconciler::apply_config(*n.session, n.request("seven"), journal);
  ASSERT_FALSE(report);
  EXPECT_EQ(n.mig_devices(), 0u);
}

}  // namespace
}  // namespace tessera
