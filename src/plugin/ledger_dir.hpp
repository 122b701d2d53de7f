// The host side of a container's memory quota (docs/design-memory-quotas.md
// §2, §4): <ledger root>/<key> holds the container's limits file and its
// ledger, which Allocate mounts into the container as single files (the
// limits read-only), and the preload list beside them.
#pragma once

#include <span>
#include <string>

#include "core/error.hpp"
#include "sharing/allocate.hpp"

namespace tessera::plugin {

// Makes `path` a directory of mode 0755 owned by this process (the plugin
// runs as root), so that no process of a container can add, rename or remove
// a file there; an existing one is reused, its mode and owner repaired (a
// directory of an older layout was 1777). A missing parent (the ledger root)
// is created, mode 0755. Errors (Errc::io) name the path and the reason: the
// root cannot be written, something other than a directory is in the way, or
// the path is a symlink (never followed).
[[nodiscard]] Result<void> ensure_ledger_dir(const std::string& path);

// What Allocate writes for a container with a quota, before it answers and
// so before any process of the container exists: in `dir` (made as above) a
// fresh ledger for `devices` (tessera::quota::prepare_ledger: mode 0666, any
// uid of the container charges it; one a live process holds with these very
// quotas is kept), then the limits file (mode 0644), each written aside and
// renamed over whatever the path held, never through a symlink. A ledger
// that had to be replaced under a live process is logged. Errors (Errc::io)
// name the path and the reason.
[[nodiscard]] Result<void> prepare_quota_files(const std::string& dir, const std::string& key,
                                               std::span<const sharing::QuotaDevice> devices);

// Makes `path` a regular file (mode 0644) holding exactly `content`: written
// aside and renamed into place when missing or different, never through a
// symlink. Errors (Errc::io) name the path and the reason.
[[nodiscard]] Result<void> ensure_preload_file(const std::string& path, const std::string& content);

}  // namespace tessera::plugin
