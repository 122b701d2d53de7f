// tessera's readers accept what NVIDIA's readers accept and reject what they
// reject. The rows are NVIDIA's own unit tests, re-expressed as whole files:
//   mig-parted   api/spec/v1/spec_test.go, helpers_test.go, pkg/types/device_test.go
//   go-nvlib     pkg/nvlib/device/mig_profile_test.go
//   k8s-device-plugin api/config/v1 replicas_test.go, imex_test.go, flags_test.go, config_test.go
// then the differences the compatibility issue lists. Where NVIDIA accepts a
// file that will do nothing (a filter matching no GPU, a name matching no
// resource, an unknown field) tessera accepts it with a warning, and a row
// names the warning.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/device_plugin.hpp"
#include "config/mig_parted.hpp"
#include "config/mig_parted_validate.hpp"
#include "core/catalog.hpp"

namespace tessera::config {
namespace {

struct Row {
  const char* name;
  std::string yaml;
  bool accepted;
  // Rejected: part of tessera's error. Accepted: part of a warning it must give ("" for none).
  std::string message;
  friend void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }
};

std::string all_of(const Diagnostics& d) {
  std::string out;
  for (const auto& i : d.items()) out += format(i) + "\n";
  return out;
}

bool has(const Diagnostics& d, Severity s, const std::string& part) {
  for (const auto& i : d.items())
    if (i.severity == s && i.message.find(part) != std::string::npos) return true;
  return false;
}

void check(const Row& row, bool parsed, const Diagnostics& diags) {
  bool accepted = parsed && !diags.has_errors();
  EXPECT_EQ(accepted, row.accepted) << row.yaml << "\n" << all_of(diags);
  if (row.message.empty()) {
    if (row.accepted) {
      EXPECT_EQ(diags.items().size(), 0u) << all_of(diags);
    }
    return;
  }
  auto severity = row.accepted ? Severity::warning : Severity::error;
  EXPECT_TRUE(has(diags, severity, row.message)) << "wanted: " << row.message << "\n" << all_of(diags);
}

// ---------------------------------------------------------------- mig-parted

std::string mig_entry(const std::string& entry) { return "version: v1\nmig-configs:\n  c:\n  - " + entry + "\n"; }
const std::string kAllDisabled = R"("mig-configs":{"all-disabled":[{"devices":"all","mig-enabled":false}]})";

class MigPartedRows : public ::testing::TestWithParam<Row> {};

TEST_P(MigPartedRows, AgreeWithMigParted) {
  Diagnostics diags;
  auto cfg = parse_mig_parted(GetParam().yaml, "m.yaml", diags);
  check(GetParam(), cfg.has_value(), diags);
}

// spec_test.go TestSpec: whole documents.
INSTANTIATE_TEST_SUITE_P(
    SpecTest, MigPartedRows,
    ::testing::Values(
        Row{"Empty", "", false, "empty: no version and no mig-configs"},
        Row{"WellFormed", "{\"version\":\"v1\"," + kAllDisabled + "}", true, ""},
        Row{"OnlyVersionField", R"({"version":"v1"})", true, "no field 'mig-configs'"},
        Row{"WrongVersion", "{\"version\":\"v2\"," + kAllDisabled + "}", false, "unknown version 'v2'"},
        Row{"WrongVersionOnly", R"({"version":"v2"})", false, "unknown version 'v2'"},
        Row{"MissingVersion", "{" + kAllDisabled + "}", false, "missing required field 'version'"},
        Row{"ExtraField", "{\"bogus\":\"field\",\"version\":\"v1\"," + kAllDisabled + "}", false, "unknown field 'bogus'"},
        Row{"EmptyMigConfigs", R"({"version":"v1","mig-configs":{}})", false, "expected a map of named MIG configs"}),
    [](const auto& info) { return std::string(info.param.name); });

// spec_test.go TestMigConfigSpec: one entry each, in a document.
INSTANTIATE_TEST_SUITE_P(
    MigConfigSpecTest, MigPartedRows,
    ::testing::Values(
        // An empty entry is accepted by MigConfigSpec alone; as a list item of a document it is not (missing devices).
        Row{"NullItem", "version: v1\nmig-configs:\n  c:\n  -\n", false, "expected a map with devices"},
        Row{"WellFormed", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 2}})"), true, ""},
        Row{"DeviceFilterModel",
            mig_entry(R"({device-filter: "MODEL", devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 2}})"), true,
            "'MODEL' is not a PCI device id"},
        Row{"DeviceFilterModels",
            mig_entry(R"({device-filter: ["MODEL1", "MODEL2"], devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 2}})"),
            true, "'MODEL2' is not a PCI device id"},
        Row{"MissingDevices", mig_entry(R"({mig-enabled: true, mig-devices: {"1g.5gb": 2}})"), false,
            "missing required field 'devices'"},
        Row{"MissingMigEnabled", mig_entry(R"({devices: all, mig-devices: {"1g.5gb": 2}})"), false,
            "missing required field 'mig-enabled'"},
        Row{"DisabledWithoutMigDevices", mig_entry("{devices: all, mig-enabled: false}"), true, ""},
        Row{"EnabledWithoutMigDevices", mig_entry("{devices: all, mig-enabled: true}"), false,
            "missing field 'mig-devices', required when mig-enabled is true"},
        Row{"BogusProfile", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"bogus": 2}})"), false,
            "'bogus' is not a MIG profile name"},
        Row{"ExtraField", mig_entry("{bogus: field, devices: all, mig-enabled: false}"), false, "unknown field 'bogus'"},
        Row{"DevicesQuotedAll", mig_entry(R"({devices: "all", mig-enabled: false})"), true, ""},
        Row{"DevicesBogus", mig_entry(R"({devices: "bogus", mig-enabled: false})"), false,
            "expected 'all' or a list of GPU indices, got 'bogus'"},
        Row{"DevicesList", mig_entry("{devices: [0, 1, 2, 3], mig-enabled: false}"), true, ""},
        Row{"DevicesMap", mig_entry("{devices: {}, mig-enabled: false}"), false, "expected 'all' or a list of GPU indices"}),
    [](const auto& info) { return std::string(info.param.name); });

// What mig-parted's reader does beyond its unit tests, checked against its code; and the issue's rows.
INSTANTIATE_TEST_SUITE_P(
    Reader, MigPartedRows,
    ::testing::Values(
        // The issue: an entry whose counts are all 0.
        Row{"AllCountsZero", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 0}})"), false,
            "every count is 0"},
        Row{"AllCountsZeroDisabled", mig_entry(R"({devices: all, mig-enabled: false, mig-devices: {"1g.10gb": 0}})"),
            false, "every count is 0"},
        Row{"SomeCountsZero", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 0, "2g.10gb": 1}})"),
            true, ""},
        Row{"EnabledEmptyMap", mig_entry("{devices: all, mig-enabled: true, mig-devices: {}}"), true, ""},
        Row{"EnabledNullMigDevices", mig_entry("{devices: all, mig-enabled: true, mig-devices: }"), false,
            "missing field 'mig-devices'"},
        // The issue: profile names with several attributes follow go-nvlib's grammar.
        Row{"SeveralAttributes", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb+me,gfx": 1}})"), true, ""},
        Row{"NegativeAttributes", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb-me,gfx": 1}})"), true, ""},
        Row{"RepeatedAttribute", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb+me,me": 1}})"), false,
            "is not a MIG profile name"},
        // The issue: a device-filter that is not a PCI id matches no GPU; the subsystem form is an id.
        Row{"FilterSubsystem", mig_entry(R"({device-filter: "0x233010DE:0x16C010DE", devices: all, mig-enabled: false})"), true, ""},
        Row{"FilterEmptyString", mig_entry(R"({device-filter: "", devices: all, mig-enabled: false})"), true, ""},
        Row{"FilterEmptyList", mig_entry("{device-filter: [], devices: all, mig-enabled: false}"), true, ""},
        Row{"FilterNull", mig_entry("{device-filter: , devices: all, mig-enabled: false}"), true, ""},
        Row{"FilterUnquotedHex", mig_entry("{device-filter: 0x20B210DE, devices: all, mig-enabled: false}"), false,
            "expected a string, got the number 0x20B210DE"},
        Row{"FilterUnquotedHexInList", mig_entry("{device-filter: [0x20B210DE], devices: all, mig-enabled: false}"), false,
            "expected a string"},
        // No maximum count at read time (the catalog judges it).
        Row{"CountHundred", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"0g.0gb": 100}})"), true, ""},
        Row{"CountNegative", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb": -1}})"), false,
            "out of range"},
        Row{"CountFloat", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 2.5}})"), false,
            "expected an integer"},
        Row{"CountQuoted", mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.5gb": "2"}})"), false,
            "expected an integer, got the string"},
        // The devices list: any ints.
        Row{"DevicesEmpty", mig_entry("{devices: [], mig-enabled: false}"), true, "selects no GPU"},
        Row{"DevicesDuplicate", mig_entry("{devices: [0, 0], mig-enabled: false}"), true, "listed twice"},
        Row{"DevicesNegative", mig_entry("{devices: [-1], mig-enabled: false}"), true, "selects no GPU"},
        Row{"DevicesQuotedInts", mig_entry(R"({devices: ["0"], mig-enabled: false})"), false, "expected an integer"},
        Row{"DevicesUpperAll", mig_entry("{devices: ALL, mig-enabled: false}"), false, "expected 'all'"},
        Row{"DevicesNull", mig_entry("{devices: , mig-enabled: false}"), false, "expected 'all'"},
        // YAML 1.1, as yaml.v2 reads it.
        Row{"EnabledYes", mig_entry(R"({devices: all, mig-enabled: yes, mig-devices: {"1g.5gb": 1}})"), true, ""},
        Row{"EnabledQuoted", mig_entry(R"({devices: all, mig-enabled: "true", mig-devices: {"1g.5gb": 1}})"), false,
            "expected true or false"},
        Row{"EnabledNull", mig_entry("{devices: all, mig-enabled: }"), true, ""},
        Row{"DuplicateConfigName",
            "version: v1\nmig-configs:\n  a:\n  - {devices: all, mig-enabled: false}\n  a:\n  - {devices: all, mig-enabled: false}\n",
            true, "duplicate config name 'a'"},
        Row{"MergeKey",
            "version: v1\nmig-configs:\n  a:\n  - &e {devices: all, mig-enabled: false}\n  b:\n  - <<: *e\n    devices: [0]\n",
            true, ""},
        Row{"EmptyMap", "{}\n", false, "missing required field 'version'"},
        Row{"VersionNumber", "version: 1\n", false, "expected a string"},
        Row{"NullConfig", "version: v1\nmig-configs:\n  a:\n", false, "expected a non-empty list"}),
    [](const auto& info) { return std::string(info.param.name); });

// spec_test.go TestMarshallUnmarshall: every config must be accepted.
TEST(MigPartedNvidiaRoundTrip, EveryConfigIsAccepted) {
  Diagnostics diags;
  auto cfg = parse_mig_parted(R"(version: v1
mig-configs:
  valid-format-non-existent-devices:
  - devices: all
    mig-enabled: true
    mig-devices: {"0g.0gb": 100}
  all-disabled:
  - {device-filter: "A100-SXM4-40GB", devices: all, mig-enabled: false}
  all-1-slice:
  - {device-filter: "A100-SXM4-40GB", devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 7}}
  all-2-slice:
  - {device-filter: "A100-SXM4-40GB", devices: all, mig-enabled: true, mig-devices: {"2g.10gb": 3}}
  all-3-slice:
  - {device-filter: "A100-SXM4-40GB", devices: all, mig-enabled: true, mig-devices: {"3g.20gb": 2}}
  all-balanced-slices:
  - {device-filter: "A100-SXM4-40GB", devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}
  half-disabled-half-balanced-slices:
  - {device-filter: "A100-SXM4-40GB", devices: [0, 1, 2, 3], mig-enabled: false}
  - {device-filter: "A100-SXM4-40GB", devices: [4, 5, 6, 7], mig-enabled: true, mig-devices: {1g.5gb: 2, 2g.10gb: 1, 3g.20gb: 1}}
  multi-device-filter:
  - {device-filter: ["A100-SXM4-40GB", "A100-PCIE-40GB"], devices: [0, 1, 2, 3], mig-enabled: false}
  - {device-filter: ["A100-SXM4-40GB", "A100-PCIE-40GB"], devices: [4, 5, 6, 7], mig-enabled: true, mig-devices: {1g.5gb: 2, 2g.10gb: 1, 3g.20gb: 1}}
)", "rt.yaml", diags);
  ASSERT_TRUE(cfg) << all_of(diags);
  EXPECT_EQ(diags.error_count(), 0u) << all_of(diags);
  EXPECT_EQ(cfg->configs.size(), 8u);
  // A model name is no PCI id: the entry is kept, and selects no GPU.
  const auto& e = cfg->find("all-1-slice")->entries[0];
  EXPECT_TRUE(e.has_device_filter);
  EXPECT_TRUE(e.device_filter.empty());
  EXPECT_FALSE(filter_selects(e, 0x20B010DE, 0));
  EXPECT_EQ(cfg->find("valid-format-non-existent-devices")->entries[0].mig_devices[0].count, 100u);
  // validate: the catalog doubts are warnings without --gpu.
  validate_mig_parted(*cfg, Catalog::builtin(), {}, diags);
  EXPECT_EQ(diags.error_count(), 0u) << all_of(diags);
}

// helpers_test.go TestMigConfigSpecMatchesDeviceFilter: H100 0x2330/0x10DE, subsystem 0x16C0/0x10DE.
TEST(MigPartedNvidiaDeviceFilter, MatchesDeviceFilter) {
  struct Case {
    std::string filter;  // a device-filter value, as YAML
    bool matches;
  };
  for (const auto& c : std::vector<Case>{{R"("")", true},
                                         {R"("0x233010DE")", true},
                                         {R"("0x233010DE:0x16C010DE")", true},
                                         {R"("0x233010DE:0x16C110DE")", false},
                                         {R"(["0x233010DE:0x16C110DE", "0x233010DE:0x16C010DE"])", true},
                                         {R"("0x233010DE:0x16C010DE:extra")", false}}) {
    Diagnostics diags;
    auto cfg = parse_mig_parted(mig_entry("{device-filter: " + c.filter + ", devices: all, mig-enabled: false}"), "f.yaml", diags);
    ASSERT_TRUE(cfg) << c.filter << "\n" << all_of(diags);
    EXPECT_EQ(filter_selects(cfg->configs[0].entries[0], 0x233010DE, 0x16C010DE), c.matches) << c.filter;
  }
}

// pkg/types/device_test.go TestNewDeviceIDFromString and TestDeviceIDMatches.
TEST(MigPartedNvidiaDeviceFilter, DeviceIdFromString) {
  auto plain = parse_device_filter("0x25B610DE");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->device_id, 0x25B610DEu);
  EXPECT_FALSE(plain->subsystem_id);
  auto sub = parse_device_filter("0x25B610DE:0x14A910DE");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->subsystem_id, 0x14A910DEu);
  EXPECT_FALSE(parse_device_filter("not-a-device-id"));
  EXPECT_FALSE(parse_device_filter("0x25B610DE:not-a-subsystem"));
  EXPECT_FALSE(parse_device_filter("0x25B610DE:0x14A910DE:extra"));
  // strconv.ParseUint(s, 0, 32): decimal and octal too; nothing over 32 bits.
  EXPECT_EQ(parse_device_filter("548540638")->device_id, 0x20B210DEu);
  EXPECT_FALSE(parse_device_filter("0x120B210DE"));
  // A primary-only filter matches any subsystem; a subsystem filter needs it exactly.
  EXPECT_TRUE(plain->matches(0x25B610DE, 0x14A910DE));
  EXPECT_TRUE(plain->matches(0x25B610DE, 0));
  EXPECT_TRUE(sub->matches(0x25B610DE, 0x14A910DE));
  EXPECT_FALSE(sub->matches(0x25B610DE, 0));
  EXPECT_FALSE(sub->matches(0x25B610DE, 0x14AA10DE));
  EXPECT_TRUE(parse_device_filter("0x25B610DE:0x0")->matches(0x25B610DE, 0));
  EXPECT_FALSE(plain->matches(0x25B710DE, 0x14A910DE));
}

// ---------------------------------------------------------------- go-nvlib profile names

struct ProfileRow {
  const char* text;
  bool valid;  // AssertValidMigProfileFormat
};

// mig_profile_test.go TestParseMigProfile: the format column.
const ProfileRow kProfileRows[] = {
    {"", false}, {"1g.5gb", true}, {"1c.1g.5gb", true}, {"1g.5gb+me", true}, {"1c.1g.5gb+me", true},
    {"1c.1g.5gb-me", true}, {"1g.5gb+me.all", true}, {"1c.1g.5gb+me.all", true}, {"1g.5gb+gfx", true},
    {"1c.1g.5gb+gfx", true}, {"0g.0gb", true}, {"0c.0g.0gb", true}, {"10000g.500000gb", true},
    {"10000c.10000g.500000gb", true}, {" 1c.1g.5gb", false}, {"1 c.1g.5gb", false}, {"1c .1g.5gb", false},
    {"1c. 1g.5gb", false}, {"1c.1 g.5gb", false}, {"1c.1g .5gb", false}, {"1c.1g. 5gb", false},
    {"1c.1g.5 gb", false}, {"1c.1g.5g b", false}, {"1c.1g.5gb ", false}, {"1c . 1g . 5gb", false},
    {"1c.f1g.5gb", false}, {"1r.1g.5gb", false}, {"1g.5gbk", false}, {"1g.5", false}, {"g.5gb", false},
    {"1g.gb", false}, {"1g.5gb+me,me", false}, {"1g.5gb+me,you,them", true}, {"1c.1g.5gb+me,you,them", true},
    {"1g.5gb+", false}, {"1g.5gb +", false}, {"1g.5gb+ ", false}, {"1g.5gb+ ,", false}, {"1g.5gb+,,", false},
    {"1g.5gb+me,", false}, {"1g.5gb+me,,", false}, {"1g.5gb+me, ", false}, {"1g.5gb+2me", false},
    {"1g.5gb*me", false}, {"1c.1g.5gb*me", false}, {"1g.5gb*me,you,them", false}, {"1c.1g.5gb*me,you,them", false},
    {"bogus", false}, {"1c.1g.5gb+.all", false}, {"1c.1g.5gb+all.", false}, {"1c.1g.5gb+me-me", false},
    {"1c.1g.5gb-me+me", false},
    // Beyond the unit test, checked against go-nvlib's code.
    {"1g.5gb+me,gfx", true}, {"1g.5gb+gfx,me", true}, {"1c.1g.5gb+gfx,me.all", true}, {"1g.5gb-gfx", true},
    {"1g.5gb-me,gfx", true}, {"1g.5gb+ME", true}, {"1g.5gb+Me.All", true}, {"1g.5gb+me2", true},
    {"1g.5gb+me.2", true}, {"1g.5gb+me..all", true}, {"1g.5gb+foo", true}, {"01g.05gb", true}, {"2c.1g.5gb", true},
    {"99999999999999999999g.5gb", false}, {"1g.5gb+me+gfx", false}, {"1g.5gb--me", false}, {"1g.5gb-me-gfx", false},
    {"1g.5gb+m_e", false}, {"1g.5gb+\xC3\xA9", false}, {"1g.5gb+me.", false}, {"+1g.5gb", false}, {"-1g.5gb", false},
    {"1g.-5gb", false}, {"1g.+5gb", false}, {"1c.1g.5gb.1", false}, {"1g.5gb.", false}, {"1c.1g.5.5gb", false},
    {"1g.5GB", false}, {"1G.5gb", false}, {"1gb.5gb", false}, {"1c1g.5gb", false},
};

TEST(GoNvlibMigProfile, FormatAgreesWithGoNvlib) {
  for (const auto& row : kProfileRows) {
    std::string why;
    auto p = parse_mig_profile_name(row.text, &why);
    EXPECT_EQ(p.has_value(), row.valid) << "'" << row.text << "': " << why;
    if (!row.valid) {
      EXPECT_FALSE(why.empty()) << row.text;
    }
  }
}

// TestParseMigProfileEquals and String(): the normal form tessera matches the catalog by.
TEST(GoNvlibMigProfile, NormalForm) {
  auto canonical = [](const char* text) { return parse_mig_profile_name(text)->canonical(); };
  EXPECT_EQ(canonical("1c.1g.5gb"), "1g.5gb");
  EXPECT_EQ(canonical("01g.05gb"), "1g.5gb");
  EXPECT_EQ(canonical("1c.1g.5gb-me"), "1g.5gb-me");
  EXPECT_EQ(canonical("1c.1g.5gb+me"), "1g.5gb+me");
  EXPECT_EQ(canonical("1c.2g.10gb"), "1c.2g.10gb");
  EXPECT_NE(canonical("1c.2g.10gb"), canonical("2c.2g.10gb"));
  EXPECT_NE(canonical("1g.5gb"), canonical("1g.5gb+me"));
  EXPECT_NE(canonical("1g.5gb+me"), canonical("1g.5gb-me"));
  EXPECT_EQ(canonical("1g.5gb+me,gfx"), "1g.5gb+me,gfx");
}

// The issue: a profile with several attributes is accepted, and validate warns that no GPU has it;
// 1c.1g.10gb is 1g.10gb to the catalog, as to mig-parted.
TEST(GoNvlibMigProfile, ValidateMatchesTheNormalForm) {
  Diagnostics diags;
  auto cfg = parse_mig_parted(mig_entry(R"({devices: all, mig-enabled: true, mig-devices: {"1g.10gb+me,gfx": 1}})") +
                                  "  d:\n  - {device-filter: \"0x20B210DE\", devices: all, mig-enabled: true, "
                                  "mig-devices: {\"1c.1g.10gb\": 2, \"01g.10gb\": 1}}\n",
                              "p.yaml", diags);
  ASSERT_TRUE(cfg) << all_of(diags);
  validate_mig_parted(*cfg, Catalog::builtin(), {}, diags);
  EXPECT_EQ(diags.error_count(), 0u) << all_of(diags);
  EXPECT_TRUE(has(diags, Severity::warning, "profile '1g.10gb+me,gfx' is not known for any GPU")) << all_of(diags);
  EXPECT_FALSE(has(diags, Severity::warning, "'1c.1g.10gb'")) << all_of(diags);
  EXPECT_EQ(entry_counts(cfg->find("d")->entries[0]), (ProfileCounts{{"1g.10gb", 3}}));
}

// ---------------------------------------------------------------- k8s-device-plugin

class DevicePluginRows : public ::testing::TestWithParam<Row> {};

TEST_P(DevicePluginRows, AgreeWithTheDevicePlugin) {
  Diagnostics diags;
  auto c = parse_device_plugin_config(GetParam().yaml, "d.yaml", diags);
  check(GetParam(), c.has_value(), diags);
}

std::string with_devices(const std::string& v) {
  return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      devices: " + v + "\n";
}
std::string with_resource(const std::string& entry) {
  return "version: v1\nflags: {migStrategy: mixed}\nsharing:\n  timeSlicing:\n    resources:\n    - " + entry + "\n";
}
std::string with_time_slicing(const std::string& v) { return "version: v1\nsharing:\n  timeSlicing: " + v + "\n"; }
const std::string kGpuUuid = "4cf8db2d-06c0-7d70-1a51-e59b25b2c16c";

// replicas_test.go TestUnmarshalReplicatedDevices.
INSTANTIATE_TEST_SUITE_P(
    ReplicatedDevicesTest, DevicePluginRows,
    ::testing::Values(
        Row{"Empty", with_devices(""), false, "expected 'all', a device count"},
        Row{"NotAll", with_devices(R"("not-all")"), false, "got 'not-all'"},
        Row{"NegativeCount", with_devices("-2"), false, "a count of devices must be > 0"},
        // Raw JSON 2.0 is refused by the unit test; from a file it reaches Go as 2 (sigs.k8s.io/yaml).
        Row{"FloatCount", with_devices("2.0"), true, ""},
        Row{"NegativeIndex", with_devices("[-1]"), false, "'-1' is not a device id"},
        Row{"NegativeIndexString", with_devices(R"(["-1"])"), false, "'-1' is not a device id"},
        Row{"InvalidUuid", with_devices(R"(["invalid-UUID"])"), false, "is not a device id"},
        Row{"GpuUuidWord", with_devices(R"(["GPU-UUID"])"), false, "is not a device id"},
        Row{"MigUuidWord", with_devices(R"(["MIG-UUID"])"), false, "is not a device id"},
        Row{"MigGpuWithoutIds", with_devices("[\"MIG-GPU-" + kGpuUuid + "\"]"), false, "is not a device id"},
        Row{"QuotedAll", with_devices(R"("all")"), true, ""},
        Row{"Count", with_devices("2"), true, ""},
        Row{"IndexNumber", with_devices("[0]"), true, ""},
        Row{"IndexString", with_devices(R"(["0"])"), true, ""},
        Row{"MigIndex", with_devices(R"(["0:0"])"), true, ""},
        Row{"GpuUuid", with_devices("[\"GPU-" + kGpuUuid + "\"]"), true, ""},
        Row{"MigUuid", with_devices("[\"MIG-" + kGpuUuid + "\"]"), true, ""},
        Row{"MigGpuUuid", with_devices("[\"MIG-GPU-" + kGpuUuid + "/0/0\"]"), true, ""},
        Row{"Mixed", with_devices("[0, \"0:0\", \"GPU-" + kGpuUuid + "\"]"), true, ""},
        Row{"MixedStrings", with_devices("[\"0\", \"0:0\", \"GPU-" + kGpuUuid + "\"]"), true, ""},
        // Beyond the unit test: google/uuid forms, an empty list and duplicates.
        Row{"UuidBraces", with_devices("[\"GPU-{" + kGpuUuid + "}\"]"), true, ""},
        Row{"UuidShort", with_devices(R"(["GPU-abc"])"), false, "is not a device id"},
        Row{"EmptyList", with_devices("[]"), true, "covers no device"},
        Row{"DuplicateIds", with_devices("[0, 0]"), true, "listed twice"},
        Row{"LargeCount", with_devices("5000"), true, ""}),
    [](const auto& info) { return std::string(info.param.name); });

// replicas_test.go TestUnmarshalReplicatedResource (trailing commas of the test's raw JSON dropped).
INSTANTIATE_TEST_SUITE_P(
    ReplicatedResourceTest, DevicePluginRows,
    ::testing::Values(
        Row{"Null", with_resource(""), false, "expected a map with name and replicas"},
        Row{"EmptyMap", with_resource("{}"), false, "missing required field 'name'"},
        Row{"NameOnly", with_resource(R"({"name":"valid"})"), false, "missing required field 'replicas'"},
        Row{"NameDevices", with_resource(R"({"name":"valid","devices":"all"})"), false, "missing required field 'replicas'"},
        Row{"NameDevicesRename", with_resource(R"({"name":"valid","devices":"all","rename":"valid-shared"})"), false,
            "missing required field 'replicas'"},
        Row{"Valid", with_resource(R"({"name":"valid","devices":"all","replicas":2})"), true,
            "'nvidia.com/valid' matches no GPU or MIG resource"},
        Row{"ValidRename", with_resource(R"({"name":"valid","devices":"all","replicas":2,"rename":"valid-shared"})"), true,
            "matches no GPU or MIG resource"},
        Row{"ReplicasNegative", with_resource(R"({"name":"valid","replicas":-1})"), false, "out of range"},
        Row{"ReplicasZero", with_resource(R"({"name":"valid","replicas":0})"), false, "out of range"},
        Row{"DevicesDefault", with_resource(R"({"name":"valid","replicas":2})"), true, "matches no GPU or MIG resource"},
        Row{"DevicesDefaultRename", with_resource(R"({"name":"valid","replicas":2,"rename":"valid-shared"})"), true,
            "matches no GPU or MIG resource"},
        Row{"InvalidName", with_resource(R"({"name":"$invalid$","replicas":2,"rename":"valid-shared"})"), false,
            "'$invalid$' is not a valid resource name"},
        Row{"InvalidRename", with_resource(R"({"name":"valid","replicas":2,"rename":"$invalid$"})"), false,
            "'$invalid$' is not a valid resource name"},
        // Beyond the unit test: NewResourceName's rules.
        Row{"OtherDomain", with_resource("{name: example.com/gpu, replicas: 2}"), false, "is not an nvidia.com/ resource"},
        Row{"UpperCase", with_resource("{name: nvidia.com/mig-1G.10gb, replicas: 2}"), false, "is not a valid resource name"},
        Row{"Underscore", with_resource("{name: gpu, rename: Shared_GPU, replicas: 2}"), false, "is not a valid resource name"},
        Row{"DoubleDot", with_resource("{name: mig-1g..10gb, replicas: 2}"), false, "is not a valid resource name"},
        Row{"TooLong", with_resource("{name: mig-" + std::string(49, 'a') + ", replicas: 2}"), false,
            "longer than 63 characters"},
        Row{"MeSuffix", with_resource("{name: nvidia.com/mig-1g.10gb.me, replicas: 2}"), true, ""},
        Row{"RenameEmpty", with_resource(R"({name: gpu, rename: "", replicas: 2})"), false, "is not a valid resource name"},
        Row{"NameNumber", with_resource("{name: 5, replicas: 2}"), false, "expected a string"},
        Row{"ReplicasOctal", with_resource("{name: gpu, replicas: 010}"), true, ""},
        Row{"ReplicasQuoted", with_resource(R"({name: gpu, replicas: "4"})"), false, "expected an integer, got the string"},
        Row{"RenameSameAsName", with_resource("{name: gpu, rename: gpu, replicas: 2}"), true, "changes nothing"}),
    [](const auto& info) { return std::string(info.param.name); });

// replicas_test.go TestUnmarshalReplicatedResources: the timeSlicing value.
INSTANTIATE_TEST_SUITE_P(
    ReplicatedResourcesTest, DevicePluginRows,
    ::testing::Values(
        Row{"Null", with_time_slicing(""), false, "no resources specified"},
        Row{"EmptyMap", with_time_slicing("{}"), false, "no resources specified"},
        Row{"EmptyResources", with_time_slicing(R"({"resources": []})"), false, "no resources specified"},
        Row{"OneResource", with_time_slicing(R"({"resources":[{"name":"valid","replicas":2}]})"), true, "matches no GPU"},
        Row{"TwoResources", with_time_slicing(R"({"resources":[{"name":"valid1","replicas":2},{"name":"valid2","replicas":2}]})"),
            true, "'nvidia.com/valid2' matches no GPU"},
        Row{"InvalidName", with_time_slicing(R"({"resources":[{"name":"$invalid$","replicas":2}]})"), false,
            "is not a valid resource name"},
        // The issue: mps likewise; only `mps:` with nothing means no MPS.
        Row{"NullResources", with_time_slicing("{resources: }"), false, "no resources specified"},
        Row{"MpsEmptyMap", "version: v1\nsharing:\n  mps: {}\n", false, "no resources specified"},
        Row{"MpsEmptyResources", "version: v1\nsharing:\n  mps: {resources: []}\n", false, "no resources specified"},
        Row{"MpsNull", "version: v1\nsharing:\n  mps:\n", true, ""},
        Row{"SharingNull", "version: v1\nsharing:\n", true, ""},
        Row{"ResourcesKeyIsExact", with_time_slicing("{Resources: [{name: gpu, replicas: 2}]}"), false,
            "no resources specified"}),
    [](const auto& info) { return std::string(info.param.name); });

// imex_test.go TestImexUnmarshal, with the check validateFlags makes at start.
INSTANTIATE_TEST_SUITE_P(
    ImexTest, DevicePluginRows,
    ::testing::Values(Row{"EmptyMap", "version: v1\nimex: {}\n", true, ""},
                      Row{"NullIds", "version: v1\nimex: {\"channelIDs\": null}\n", true, ""},
                      Row{"NoIds", "version: v1\nimex: {\"channelIDs\": []}\n", true, ""},
                      Row{"Zero", "version: v1\nimex: {\"channelIDs\": [0]}\n", true, ""},
                      Row{"Two", "version: v1\nimex: {\"channelIDs\": [2]}\n", false, "channelIDs must be [] or [0]; found [2]"},
                      Row{"One", "version: v1\nimex: {channelIDs: [1]}\n", false, "channelIDs must be [] or [0]; found [1]"},
                      Row{"ZeroTwice", "version: v1\nimex: {channelIDs: [0, 0]}\n", false, "found [0 0]"},
                      Row{"NotAList", "version: v1\nimex: {channelIDs: \"0\"}\n", false, "expected a list of channel ids"},
                      Row{"ImexList", "version: v1\nimex: []\n", false, "expected a map"}),
    [](const auto& info) { return std::string(info.param.name); });

// flags_test.go TestUnmarshalFlags (the flags value), and the checks validateFlags makes.
INSTANTIATE_TEST_SUITE_P(
    FlagsTest, DevicePluginRows,
    ::testing::Values(
        Row{"Null", "version: v1\nflags:\n", true, ""},
        Row{"EmptyMap", "version: v1\nflags: {}\n", true, ""},
        Row{"GfdEmpty", "version: v1\nflags: {\"gfd\": {}}\n", true, ""},
        Row{"SleepZero", "version: v1\nflags: {\"gfd\": {\"sleepInterval\": 0}}\n", true, ""},
        Row{"SleepZeroSeconds", "version: v1\nflags: {\"gfd\": {\"sleepInterval\": \"0s\"}}\n", true, ""},
        Row{"SleepFive", "version: v1\nflags: {\"gfd\": {\"sleepInterval\": 5}}\n", true, ""},
        Row{"SleepFiveSeconds", "version: v1\nflags: {\"gfd\": {\"sleepInterval\": \"5s\"}}\n", true, ""},
        Row{"SleepInfinite", "version: v1\nflags: {\"gfd\": {\"sleepInterval\": \"infinite\"}}\n", true, ""},
        Row{"SleepBad", "version: v1\nflags: {gfd: {sleepInterval: abc}}\n", false, "expected a duration"},
        Row{"ListStrategyString", "version: v1\nflags: {\"plugin\": {\"deviceListStrategy\": \"envvar\"}}\n", true, ""},
        Row{"ListStrategyList",
            "version: v1\nflags: {\"plugin\": {\"deviceListStrategy\": [\"envvar\", \"cdi-annotations\"]}}\n", true, ""},
        Row{"ListStrategyEmpty", "version: v1\nflags: {plugin: {deviceListStrategy: []}}\n", true, "the list is empty"},
        Row{"ListStrategyTwice", "version: v1\nflags: {plugin: {deviceListStrategy: [envvar, envvar]}}\n", true,
            "listed twice"},
        Row{"PluginNull", "version: v1\nflags: {plugin: }\n", true, ""},
        Row{"MigStrategyNull", "version: v1\nflags: {migStrategy: }\n", true, ""},
        Row{"BoolYes", "version: v1\nflags: {failOnInitError: no, plugin: {passDeviceSpecs: on}}\n", true, ""},
        Row{"BoolQuoted", "version: v1\nflags: {failOnInitError: \"true\"}\n", false, "expected true or false"},
        Row{"StringFlagNumber", "version: v1\nflags: {mpsRoot: 123}\n", false, "expected a string, got the number 123"},
        Row{"DiscoveryEmpty", "version: v1\nflags: {deviceDiscoveryStrategy: \"\"}\n", false, "allowed: auto, nvml, tegra"},
        Row{"DiscoveryTegra", "version: v1\nflags: {deviceDiscoveryStrategy: tegra}\n", true, "not supported by tessera"},
        Row{"MpsWithoutRoot", "version: v1\nflags: {mpsRoot: \"\"}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n",
            false, "MPS needs mpsRoot"},
        Row{"ResourcesMissingName", "version: v1\nresources: {gpus: [{pattern: \"*\"}]}\n", false,
            "missing required field 'name'"},
        Row{"ResourcesValid", "version: v1\nresources: {gpus: [{pattern: \"*\", name: gpu}]}\n", true, ""}),
    [](const auto& info) { return std::string(info.param.name); });

// The issue's rows for the device plugin, and the reader's YAML.
INSTANTIATE_TEST_SUITE_P(
    Reader, DevicePluginRows,
    ::testing::Values(
        Row{"DevicesQuotedAll", "version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: \"all\"}]}}\n",
            true, ""},
        Row{"UnmatchedName", "version: v1\nsharing: {timeSlicing: {resources: [{name: foo, replicas: 2}]}}\n", true,
            "'nvidia.com/foo' matches no GPU or MIG resource"},
        Row{"MigNameWithoutMixed", "version: v1\nsharing: {mps: {resources: [{name: nvidia.com/mig-1g.10gb, replicas: 2}]}}\n",
            true, "matches no resource unless migStrategy is mixed"},
        Row{"BothModes",
            "version: v1\nsharing:\n  timeSlicing: {resources: [{name: gpu, replicas: 4}]}\n  mps: {resources: [{name: gpu, replicas: 2}]}\n",
            true, "mps is used and timeSlicing ignored"},
        Row{"EmptyFile", "", true, "file is empty"},
        Row{"NoVersion", "sharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n", true, ""},
        Row{"EmptyVersion", "version: \"\"\n", true, ""},
        Row{"VersionNumber", "version: 1\n", false, "unknown version '1'"},
        Row{"UnknownTopLevel", "version: v1\nbogus: x\n", true, "unknown field 'bogus'"},
        Row{"UnknownInResource",
            "version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, comment: ok}]}}\n", true,
            "unknown field 'comment'"},
        Row{"CaseInsensitiveKeys", "version: v1\nFlags: {MIGSTRATEGY: mixed}\nSHARING: {timeslicing: {resources: [{name: gpu, replicas: 2}]}}\n",
            true, ""},
        Row{"DuplicateKey", "version: v1\nflags: {migStrategy: bogus}\nflags: {migStrategy: none}\n", true,
            "duplicate field 'flags'"},
        Row{"ReplicasHex", "version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: 0x10}]}}\n", true, ""},
        Row{"ReplicasFloat", "version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: 2.5}]}}\n", false,
            "expected an integer"},
        Row{"RenameByDefaultYes", "version: v1\nsharing: {timeSlicing: {renameByDefault: yes, resources: [{name: gpu, replicas: 2}]}}\n",
            true, ""},
        Row{"TopLevelList", "- a\n", false, "expected a device-plugin config"}),
    [](const auto& info) { return std::string(info.param.name); });

// config_test.go: MPS fails requests for more than one replica unless told otherwise.
TEST(DevicePluginNvidiaConfig, MpsFailRequestsGreaterThanOne) {
  Diagnostics diags;
  auto c = parse_device_plugin_config(
      "version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 2\n", "c.yaml", diags);
  ASSERT_TRUE(c) << all_of(diags);
  EXPECT_TRUE(c->sharing()->fail_requests_greater_than_one);
  auto off = parse_device_plugin_config(
      "version: v1\nsharing:\n  mps:\n    failRequestsGreaterThanOne: false\n    resources:\n      - name: nvidia.com/gpu\n"
      "        replicas: 2\n",
      "c.yaml", diags);
  ASSERT_TRUE(off) << all_of(diags);
  EXPECT_FALSE(off->sharing()->fail_requests_greater_than_one);
}

// What the accepted values become: YAML 1.1 as yaml.v2 reads it (010 is octal).
TEST(DevicePluginNvidiaConfig, ValuesAsNvidiaReadsThem) {
  Diagnostics diags;
  auto c = parse_device_plugin_config(R"(version: v1
flags: {plugin: {deviceListStrategy: cdi-cri}}
sharing:
  mps:
    renameByDefault: on
    resources:
    - {name: gpu, replicas: 010, devices: [0x1, 2.0, "GPU-{4cf8db2d-06c0-7d70-1a51-e59b25b2c16c}"]}
  timeSlicing:
    resources: [{name: gpu, replicas: 4}]
)", "v.yaml", diags);
  ASSERT_TRUE(c) << all_of(diags);
  ASSERT_TRUE(c->uses_mps());  // MPS wins, as in NVIDIA's sharing.go
  const auto& r = c->sharing()->resources.at(0);
  EXPECT_EQ(r.replicas, 8u);
  EXPECT_EQ(r.devices.ids, (std::vector<std::string>{"1", "2", "GPU-{4cf8db2d-06c0-7d70-1a51-e59b25b2c16c}"}));
  EXPECT_TRUE(c->sharing()->rename_by_default);
  ASSERT_EQ(c->plugin.device_list_strategy.size(), 1u);
  EXPECT_EQ(c->plugin.device_list_strategy[0], DeviceListStrategy::cdi_cri);
}

}  // namespace
}  // namespace tessera::config
