// The host side of a container's quota ledger: the directory Allocate mounts
// read-write into the container (docs/design-memory-quotas.md §2, §4).
#pragma once

#include <string>

#include "core/error.hpp"

namespace tessera::plugin {

// Makes `path` a directory of mode 1777 (sticky, writable by every uid, so
// any process of the container can create the ledger) and returns once it
// is one. An existing directory is reused, its mode set to 1777. A missing
// parent (the ledger root) is created, mode 0755. Errors (Errc::io) name the
// path and the reason: the root cannot be written, something other than a
// directory is in the way, or the path is a symlink (never followed).
[[nodiscard]] Result<void> ensure_ledger_dir(const std::string& path);

// Makes `path` a regular file (mode 0644) holding exactly `content`: written
// aside and renamed into place when missing or different, never through a
// symlink. Errors (Errc::io) name the path and the reason.
[[nodiscard]] Result<void> ensure_preload_file(const std::string& path, const std::string& content);

}  // namespace tessera::plugin
