// Byte sizes as users write them: "32.5GiB", "40gb", "512Mi", "1073741824".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace tessera {

// Binary (Ki/Mi/Gi/Ti, with or without B) and decimal (k/M/G/T with B) units;
// a bare number is bytes. Rejects negatives, overflow and trailing junk.
[[nodiscard]] Result<uint64_t> parse_bytes(std::string_view text);

// parse_bytes, where a person writes the size by hand (a plan spec's service
// memory, `sim process --memory`): a bare number is refused, since "40" there
// is nearly always 40 GiB meant and 40 bytes read. "40B" is bytes; 0 needs
// no unit.
[[nodiscard]] Result<uint64_t> parse_size(std::string_view text);

// 85899345920 -> "80 GiB", 1536 MiB -> "1.5 GiB".
std::string format_bytes(uint64_t bytes);

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

}  // namespace tessera
