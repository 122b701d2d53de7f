// The driver-limits record (docs/design-memory-quotas.md §9): which devices of
// a container's share the driver itself holds to their quota, written by
// tessera-memory-hook beside the container's limits file
// (<ledger root>/<key>/driver-limits) once the driver has read its limit back,
// and read by the exporter and `tessera inventory` to report the backend of
// each share. A device it does not name is held by the quota library alone.
// glibc and the C++ language only, no heap: the hook links it.
//
//   tessera-driver-limits 1              first line, exactly
//   <uuid> <bytes> <cgroup directory>    one per device the driver holds
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_quota/ledger.hpp"

namespace tessera::quota {

inline constexpr const char* kDriverLimitsFileName = "driver-limits";
inline constexpr std::size_t kCgroupPathBytes = 512;  // NUL-terminated
inline constexpr std::size_t kDriverLimitsMaxBytes = 16384;

// The limit the driver is asked to hold for a quota of `quota` bytes: the quota in whole MiB, as
// NVIDIA's toolkit hook sets NVIDIA_GPU_MEMORY_LIMIT (which Allocate sets to quota >> 20), so that
// where both hooks run they set one limit.
constexpr std::uint64_t driver_limit_bytes(std::uint64_t quota) { return quota & ~((std::uint64_t{1} << 20) - 1); }

struct DriverLimit {
  char uuid[kUuidBytes] = {};
  std::uint64_t bytes = 0;                // the hard limit the driver read back
  char cgroup[kCgroupPathBytes] = {};     // the container's cgroup v2 directory
};

struct DriverLimits {
  std::uint32_t count = 0;
  DriverLimit devices[kMaxDevices] = {};
};

// Whether `path` can be a cgroup directory in the record: absolute, printable
// ASCII without spaces, no "." or ".." component, shorter than kCgroupPathBytes.
bool valid_cgroup_path(const char* path, std::size_t length);

// Parses the record's bytes; false with `why` (NUL-terminated) naming the
// line and what is wrong with it.
bool parse_driver_limits(const char* text, std::size_t size, DriverLimits& out, char* why, std::size_t why_size);

// The record's text for `in` in `out`; its length, or 0 when an entry is not
// valid or the text does not fit.
std::size_t format_driver_limits(const DriverLimits& in, char* out, std::size_t size);

// Reads <dir>/driver-limits (never through a symlink). False where there is
// none (`why` empty) or it is not a valid record (`why` says why); `out` then
// names no device, so every device reads as the library's.
bool read_driver_limits(const char* dir, DriverLimits& out, char* why, std::size_t why_size);

// The entry for `uuid`, or nullptr.
const DriverLimit* find_driver_limit(const DriverLimits& limits, const char* uuid);

}  // namespace tessera::quota
