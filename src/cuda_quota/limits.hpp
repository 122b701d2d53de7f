// The limits file (src/cuda_quota/env.h): the quota of each device of a
// container's share, written by the device plugin at Allocate and read by the
// quota library in the container. Both sides use this code, so the format has
// one definition. glibc/POSIX and the C++ language only, no heap: the library
// links it (docs/design-memory-quotas.md §4, §6).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_quota/env.h"
#include "cuda_quota/ledger.hpp"

namespace tessera::quota {

inline constexpr std::size_t kLimitsMaxBytes = TESSERA_LIMITS_MAX_BYTES;
inline constexpr std::uint32_t kLimitsVersion = 1;

struct LimitDevice {
  char uuid[kUuidBytes] = {};  // "GPU-…" or "MIG-…", as written
  std::uint64_t quota = 0;     // bytes
  std::uint64_t context = 0;   // bytes charged for a first context that cannot be measured; 0: none
};

struct Limits {
  std::uint32_t device_count = 0;
  char key[kKeyBytes] = {};
  LimitDevice devices[kMaxDevices] = {};
};

// Whether `text` can be a device's UUID in the format: "GPU-" or "MIG-", then
// letters, digits, '-' or '/' (NVML's names), shorter than kUuidBytes.
// `digits` (when given, 33 bytes) gets its 32 hex digits in lower case when
// it has exactly those (what CUDA's 16 UUID bytes are matched against), else "".
bool uuid_hex(const char* text, std::size_t length, char* digits);

// A plain decimal uint64 in [p, p + n): digits only, at least one, no overflow.
bool parse_u64(const char* p, std::size_t n, std::uint64_t& out);

// What is wrong with a text file's bytes as a whole, or nullptr: empty, a NUL
// byte, a last line without its newline (the limits file and the memory
// hook's record share these rules).
const char* text_file_problem(const char* text, std::size_t size);

// Writes "line <line> <problem>" (or only the problem, for line 0) into `why`
// and returns false: a parser's refusal.
bool refuse_line(char* why, std::size_t why_size, unsigned line, const char* problem);

// Whether `key` can be a ledger key: 1 to kKeyBytes - 1 of [A-Za-z0-9._-].
bool valid_key(const char* key, std::size_t length);

// Parses the file's bytes. False with `why` (NUL-terminated, at most
// `why_size` bytes) naming the line and what is wrong with it; untrusted text
// is never quoted raw.
bool parse_limits(const char* text, std::size_t size, Limits& out, char* why, std::size_t why_size);

// The file's text for `in`, NUL-terminated in `out`; its length, or 0 when
// `in` is not valid (no device, more than kMaxDevices, a bad key or UUID) or
// the text does not fit `size`.
std::size_t format_limits(const Limits& in, char* out, std::size_t size);

}  // namespace tessera::quota
