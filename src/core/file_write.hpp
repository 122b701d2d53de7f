// Replacing a file so that a reader (or the next start after a crash) sees
// either the old content or the new, whole: written to a temporary file in
// the same directory, flushed to disk, renamed over the old one, and the
// directory flushed so the rename itself survives a power cut.
#pragma once

#include <string>
#include <sys/types.h>

#include "core/error.hpp"

namespace tessera {

// Errors (Errc::io) name the file and the operating system's reason; the old
// file is then left as it was.
[[nodiscard]] Result<void> replace_file_durably(const std::string& path, const std::string& content, mode_t mode = 0644);

}  // namespace tessera
