// The driver-limits record: see driver_limits.hpp.
#include "cuda_quota/driver_limits.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cuda_quota/limits.hpp"

namespace tessera::quota {
namespace {

// Plain decimal bytes, without leading zeros.
bool parse_bytes(const char* p, std::size_t n, std::uint64_t& out) {
  return !(n > 1 && p[0] == '0') && parse_u64(p, n, out);
}

}  // namespace

bool valid_cgroup_path(const char* path, std::size_t length) {
  if (length == 0 || length >= kCgroupPathBytes || path[0] != '/') return false;
  for (std::size_t i = 0; i < length; ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  // No "." or ".." component: the path names the directory it spells.
  for (std::size_t i = 0; i < length;) {
    std::size_t j = i + 1;
    while (j < length && path[j] != '/') ++j;
    const std::size_t n = j - i - 1;
    if ((n == 1 && path[i + 1] == '.') || (n == 2 && path[i + 1] == '.' && path[i + 2] == '.')) return false;
    i = j;
  }
  return true;
}

bool parse_driver_limits(const char* text, std::size_t size, DriverLimits& out, char* why, std::size_t why_size) {
  out = DriverLimits{};
  auto fail = [&](unsigned line, const char* problem) { return refuse_line(why, why_size, line, problem); };
  if (size > kDriverLimitsMaxBytes) return fail(0, "it is larger than a driver-limits record can be");
  if (const char* problem = text_file_problem(text, size)) return fail(0, problem);
  unsigned line = 0;
  for (const char* p = text; p < text + size;) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(text + size - p)));
    const char* at = p;
    const char* end = eol;
    p = eol + 1;
    ++line;
    const auto n = static_cast<std::size_t>(end - at);
    if (line == 1) {
      if (n == 23 && std::memcmp(at, "tessera-driver-limits 1", 23) == 0) continue;
      return fail(line, "is not \"tessera-driver-limits 1\"");
    }
    const char* sp1 = static_cast<const char*>(std::memchr(at, ' ', n));
    const char* sp2 = sp1 ? static_cast<const char*>(std::memchr(sp1 + 1, ' ', static_cast<std::size_t>(end - sp1 - 1)))
                          : nullptr;
    if (!sp2) return fail(line, "is not \"<uuid> <bytes> <cgroup>\"");
    if (out.count == kMaxDevices) return fail(line, "names more than 16 devices");
    DriverLimit& d = out.devices[out.count];
    const auto uuid_length = static_cast<std::size_t>(sp1 - at);
    if (!uuid_hex(at, uuid_length, nullptr)) return fail(line, "does not start with a GPU or MIG UUID");
    if (!parse_bytes(sp1 + 1, static_cast<std::size_t>(sp2 - sp1 - 1), d.bytes))
      return fail(line, "has no plain decimal number of bytes after its UUID");
    const auto cgroup_length = static_cast<std::size_t>(end - sp2 - 1);
    if (!valid_cgroup_path(sp2 + 1, cgroup_length)) return fail(line, "has no absolute cgroup directory after its bytes");
    std::memcpy(d.uuid, at, uuid_length);
    std::memcpy(d.cgroup, sp2 + 1, cgroup_length);
    for (std::uint32_t k = 0; k < out.count; ++k)
      if (std::strcmp(out.devices[k].uuid, d.uuid) == 0) return fail(line, "names a device a second time");
    ++out.count;
  }
  return true;
}

std::size_t format_driver_limits(const DriverLimits& in, char* out, std::size_t size) {
  if (in.count > kMaxDevices) return 0;
  int n = std::snprintf(out, size, "tessera-driver-limits 1\n");
  if (n < 0 || static_cast<std::size_t>(n) >= size) return 0;
  auto used = static_cast<std::size_t>(n);
  for (std::uint32_t k = 0; k < in.count; ++k) {
    const DriverLimit& d = in.devices[k];
    if (!uuid_hex(d.uuid, strnlen(d.uuid, kUuidBytes), nullptr) ||
        !valid_cgroup_path(d.cgroup, strnlen(d.cgroup, kCgroupPathBytes)))
      return 0;
    n = std::snprintf(out + used, size - used, "%s %llu %s\n", d.uuid, static_cast<unsigned long long>(d.bytes),
                      d.cgroup);
    if (n < 0 || static_cast<std::size_t>(n) >= size - used) return 0;
    used += static_cast<std::size_t>(n);
  }
  return used <= kDriverLimitsMaxBytes ? used : 0;
}

bool read_driver_limits(const char* dir, DriverLimits& out, char* why, std::size_t why_size) {
  out = DriverLimits{};
  if (why_size) why[0] = '\0';
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s", dir, kDriverLimitsFileName);
  const int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) std::snprintf(why, why_size, "%s: %s", path, std::strerror(errno));
    return false;
  }
  static thread_local char text[kDriverLimitsMaxBytes + 1];
  std::size_t size = 0;
  for (;;) {
    const ssize_t n = ::read(fd, text + size, sizeof text - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<std::size_t>(n);
    if (size == sizeof text) break;
  }
  ::close(fd);
  char problem[192];
  if (!parse_driver_limits(text, size, out, problem, sizeof problem)) {
    std::snprintf(why, why_size, "%s: %s", path, problem);
    out = DriverLimits{};
    return false;
  }
  return true;
}

const DriverLimit* find_driver_limit(const DriverLimits& limits, const char* uuid) {
  for (std::uint32_t k = 0; k < limits.count && k < kMaxDevices; ++k)
    if (std::strcmp(limits.devices[k].uuid, uuid) == 0) return &limits.devices[k];
  return nullptr;
}

}  // namespace tessera::quota
