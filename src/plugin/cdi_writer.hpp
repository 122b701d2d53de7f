// The node side of CDI (sharing/cdi.hpp holds the decisions): what the
// driver put on the node (device nodes, MIG capabilities, libraries and
// programs), read through the driver root as this process sees it, and the
// spec files, written atomically into the spec directory the container
// runtime reads (/var/run/cdi by default), stale ones removed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "sharing/cdi.hpp"
#include "sharing/inventory.hpp"

namespace tessera::plugin {

struct CdiOptions {
  bool write_specs = false;            // on when a cdi-* device list strategy is
  std::string spec_dir = "/var/run/cdi";
  std::string driver_root = "/";       // the driver's root on the host (NVIDIA's nvidiaDriverRoot)
  // Where this process sees the driver root (NVIDIA's containerDriverRoot);
  // when that directory does not exist, the driver root itself.
  std::string container_driver_root = "/driver-root";
  std::string dev_root;                // the host root of dev/ (nvidiaDevRoot); empty: the driver root
  sharing::CdiNames names;
  std::string cdi_hook;  // host path of tessera-cdi-hook (sharing::DriverFiles::cdi_hook)
};

// The driver's files for this inventory: control nodes that exist, each GPU's
// minor, each MIG device's capability minors (from the driver's
// proc/driver/nvidia/capabilities, under the driver root when it has one,
// else /proc), and with write_specs the driver's libraries and programs. With
// write_specs, a driver root that holds neither libcuda.so.1 nor
// libnvidia-ml.so.1 is an error naming where it looked.
[[nodiscard]] Result<sharing::DriverFiles> read_driver_files(const CdiOptions& options, const sharing::Inventory& inventory);

// The host path of the driver's library `soname` (libnvidia-ml.so.1, ...):
// the first of the driver's library directories that holds it, read through
// the driver root as this process sees it, named under the host's driver
// root. Empty when none holds it.
std::string driver_library(const CdiOptions& options, const std::string& soname);

// Writes each spec as <spec_dir>/<file_name> (a temporary file renamed over
// it, so a runtime never reads half a spec), creating the directory if
// needed, and removes this vendor's spec files that are no longer wanted.
// Errors name the file and the reason; a failed write leaves the previous
// file in place.
[[nodiscard]] Result<void> write_cdi_specs(const std::vector<sharing::CdiSpec>& specs, const CdiOptions& options);

// Writes one spec as <spec_dir>/<file_name> (atomically, as above) and
// leaves every other file alone: the DRA driver's per-claim specs.
[[nodiscard]] Result<void> write_cdi_spec(const sharing::CdiSpec& spec, const CdiOptions& options);
// Removes <spec_dir>/<file_name>; a file already gone is not an error.
[[nodiscard]] Result<void> remove_cdi_spec(const std::string& file_name, const CdiOptions& options);

// A spec as JSON text (what write_cdi_specs writes, less kept replica names).
std::string cdi_spec_json(const sharing::CdiSpec& spec);

// A shared replica's name ("<physical>::<n>") stays defined for as long as
// its physical device is: the kubelet replays a restarting container's saved
// CDI names, and a reload (or restart) that lowers the replica count must not
// leave them unresolvable. `now` plus every replica device of `before` (the
// spec file being replaced) whose physical name `now` still defines and whose
// own name it lacks, given the physical device's current device nodes. A
// `before` of another kind, or not a spec, adds nothing.
nlohmann::json keep_replica_names(nlohmann::json now, const nlohmann::json& before);

}  // namespace tessera::plugin
