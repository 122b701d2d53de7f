// Replacing a file so that a reader sees either the old content or the new,
// whole: written to a file of its own name in the same directory and renamed
// over the old one (a symlink there is replaced, never followed). Durably,
// the file and then the directory are also flushed to disk, so the rename
// survives a power cut (the next start after a crash reads it).
#pragma once

#include <string>
#include <sys/types.h>

#include "core/error.hpp"

namespace tessera {

enum class Flush { no, durably };

// Errors (Errc::io) name the file and the operating system's reason; the old
// file is then left as it was. Concurrent writers of one path each write
// their own aside file (`<path>.new.<pid>.<n>`); the last rename wins. A
// crash between the write and the rename leaves that aside file behind.
[[nodiscard]] Result<void> replace_file(const std::string& path, const std::string& content, mode_t mode, Flush flush);

[[nodiscard]] inline Result<void> replace_file_durably(const std::string& path, const std::string& content,
                                                       mode_t mode = 0644) {
  return replace_file(path, content, mode, Flush::durably);
}

}  // namespace tessera
