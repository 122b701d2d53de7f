// NVIDIA mig-parted's config format (version v1), read as mig-parted reads
// it (api/spec/v1): what it accepts is accepted, what it rejects is rejected,
// and what it accepts but will do nothing (a device-filter that matches no
// GPU, an empty file, a duplicate key) is accepted with a warning.
//
//   version: v1
//   mig-configs:
//     <name>:
//       - device-filter: ["0x20B210DE"]   # optional: PCI device id(s), "dev:subsystem" too
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

namespace tessera {
struct GpuModel;
}

namespace tessera::config {

struct DeviceSelector {
  bool all = true;
  std::vector<uint32_t> indices;  // when !all
  bool selects(uint32_t index) const;
};

// A MIG profile name in go-nvlib's grammar (pkg/nvlib/device/mig_profile.go):
// [<C>c.]<G>g.<GB>gb, then optionally +attr[,attr...] or -attr[,attr...].
// Numbers are decimal (leading zeros allowed) and fit in int64; an attribute
// starts with a letter, holds letters, digits and inner dots, and appears once.
struct MigProfileName {
  int64_t c = 0;
  int64_t g = 0;
  int64_t gb = 0;
  std::vector<std::string> attributes;  // in written order
  bool negative = false;                // the attributes followed '-'
  // go-nvlib's String(): "1c.1g.5gb" -> "1g.5gb", "01g.05gb" -> "1g.5gb".
  std::string canonical() const;
};

// Parses `text`; on failure says why in `why` (go-nvlib's reason).
std::optional<MigProfileName> parse_mig_profile_name(std::string_view text, std::string* why = nullptr);

struct MigDeviceCount {
  std::string profile;    // as written, e.g. "1g.10gb+me"
  std::string canonical;  // go-nvlib's normal form, e.g. "1c.1g.10gb" -> "1g.10gb"
  uint32_t count = 0;
  SourceLocation where;
};

// One device-filter string as mig-parted parses it (pkg/types/device.go):
// <device-vendor>[:<subsystem-device-vendor>], each a number in C syntax
// (0x20B210DE, or decimal, or octal) of at most 32 bits.
struct DeviceFilter {
  std::string text;
  uint32_t device_id = 0;                 // device << 16 | vendor
  std::optional<uint32_t> subsystem_id;   // subsystem device << 16 | vendor
  bool matches(uint32_t pci_device_id, uint32_t pci_subsystem_id) const;
};

// Parses one device-filter string; nothing when mig-parted cannot (such a filter matches no GPU).
std::optional<DeviceFilter> parse_device_filter(std::string_view text);

struct MigConfigEntry {
  SourceLocation where;
  std::string field;                       // "mig-configs.<name>[i]"
  bool has_device_filter = false;          // a non-empty device-filter was given
  std::vector<DeviceFilter> device_filter;  // the filters that parse; none with has_device_filter = no GPU
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

// Whether the entry's device-filter selects a GPU with these PCI ids (every
// GPU without a filter). A filter naming another id of the GPU's catalog
// `model` (may be null) matches too.
bool filter_selects(const MigConfigEntry& entry, uint32_t pci_device_id, uint32_t pci_subsystem_id,
                    const GpuModel* model = nullptr);

struct MigPartedConfig {
  std::string file;
  std::vector<MigConfig> configs;  // in file order
  const MigConfig* find(std::string_view name) const;
};

// Largest count accepted in a fleet spec's mig-devices before the catalog is
// consulted. (mig-parted sets no maximum; its configs leave it to the catalog.)
constexpr int64_t kMaxMigDeviceCount = 64;

// Parses `text`; every problem goes into `diags`. Returns a value only when
// there were no errors.
std::optional<MigPartedConfig> parse_mig_parted(std::string_view text, const std::string& file, Diagnostics& diags);

// Reads `path` (or standard input for "-") and parses it.
std::optional<MigPartedConfig> load_mig_parted(const std::string& path, Diagnostics& diags);

// Whole-file read with the size limit applied; errors into `diags`.
std::optional<std::string> read_config_file(const std::string& path, Diagnostics& diags);

}  // namespace tessera::config
