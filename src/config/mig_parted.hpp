// NVIDIA mig-parted's config format (version v1), read strictly:
//
//   version: v1
//   mig-configs:
//     <name>:
//       - device-filter: ["0x20B210DE"]   # optional: PCI device id(s)
//         devices: all | [0, 1]
//         mig-enabled: true
//         mig-devices: {"1g.10gb": 7}
//
// Also accepts the same document embedded in a Kubernetes ConfigMap (as the
// GPU Operator ships it), with locations reported in the outer file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"

namespace tessera::config {

struct DeviceSelector {
  bool all = true;
  std::vector<uint32_t> indices;  // when !all
  bool selects(uint32_t index) const;
};

struct MigDeviceCount {
  std::string profile;  // as written, e.g. "1g.10gb+me"
  uint32_t count = 0;
  SourceLocation where;
};

struct MigConfigEntry {
  SourceLocation where;
  std::string field;                       // "mig-configs.<name>[i]"
  std::vector<uint32_t> device_filter;     // empty = every GPU
  SourceLocation filter_where;
  DeviceSelector devices;
  bool mig_enabled = false;
  std::vector<MigDeviceCount> mig_devices;  // in file order
  SourceLocation mig_devices_where;
};

struct MigConfig {
  std::string name;
  SourceLocation where;
  std::vector<MigConfigEntry> entries;
};

struct MigPartedConfig {
  std::string file;
  std::vector<MigConfig> configs;  // in file order
  const MigConfig* find(std::string_view name) const;
};

// Largest count accepted in mig-devices before the catalog is consulted.
constexpr int64_t kMaxMigDeviceCount = 64;

// Parses `text`; every problem goes into `diags`. Returns a value only when
// there were no errors.
std::optional<MigPartedConfig> parse_mig_parted(std::string_view text, const std::string& file, Diagnostics& diags);

// Reads `path` (or standard input for "-") and parses it.
std::optional<MigPartedConfig> load_mig_parted(const std::string& path, Diagnostics& diags);

// Whole-file read with the size limit applied; errors into `diags`.
std::optional<std::string> read_config_file(const std::string& path, Diagnostics& diags);

}  // namespace tessera::config
