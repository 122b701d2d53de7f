// Reading a whole input file, with the operating system's reason when it
// cannot be read ("No such file or directory", "Permission denied",
// "Is a directory"), so that every command says why.
#pragma once

#include <cstddef>
#include <string>

#include "core/error.hpp"

namespace tessera {

struct FileTooLarge {
  size_t bytes = 0;  // at least this many
};

// Reads `path` whole: regular files, pipes and devices such as /dev/stdin.
// Errors (Errc::io, Errc::not_found): "cannot open file: <reason>" or
// "cannot read file: <reason>"; more than `max_bytes`: Errc::invalid_argument,
// "file is too large (N bytes; the limit is M)".
[[nodiscard]] Result<std::string> read_whole_file(const std::string& path, size_t max_bytes);

}  // namespace tessera
