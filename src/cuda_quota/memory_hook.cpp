// tessera-memory-hook: the driver backend of a container's memory quota
// (docs/design-memory-quotas.md §9). A CDI createContainer hook: the container
// runtime runs it on the host once the container's cgroup exists and before
// any of the container's processes runs, with the container's OCI state on
// stdin. It reads the container's limits file (the node's decision, written
// at Allocate or at DRA prepare), finds the container's cgroup v2 directory
// through the state's pid, and asks the driver to hold that cgroup to each
// whole GPU's quota (nvmlDeviceSetMemoryLimits_v1, R615 and newer), reading
// the limit back before it counts. What the driver holds is recorded in
// `driver-limits` beside the limits file; everything else (MIG devices, an
// older driver, cgroup v1, a refused call) stays with the quota library
// alone, which the container loads either way.
//
// Exit status: 0 when every device is held by the driver or left to the
// library (each said on stderr); 1 when the input is unusable (the state, the
// limits file), which fails the container's creation rather than let it run
// with a quota nobody can read; 2 for a wrong command line.
//
// Like libtessera-cuda.so it runs where tessera's libraries are not
// installed: glibc only, no C++ runtime, no heap.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_quota/driver_limits.hpp"
#include "cuda_quota/limits.hpp"
#include "nvml/abi.hpp"

namespace {

using namespace tessera::quota;
using namespace tessera::nvml::abi;

constexpr const char* kUsage =
    "usage: tessera-memory-hook --limits FILE [--nvml LIBRARY] [--cgroup-root DIR] [--proc-root DIR]\n"
    "\n"
    "A CDI createContainer hook: reads the container's OCI state on stdin and has the driver hold\n"
    "the container's cgroup to the quota of each whole GPU in FILE (the container's limits file,\n"
    "a host path), where the driver offers memory limits (R615 and newer, cgroup v2). Every other\n"
    "device is left to the quota library. What the driver holds is recorded in FILE's directory,\n"
    "as driver-limits.\n"
    "\n"
    "  --limits FILE       the container's limits file (required)\n"
    "  --nvml LIBRARY      NVML to load (default libnvidia-ml.so.1)\n"
    "  --cgroup-root DIR   where cgroup v2 is mounted (default /sys/fs/cgroup)\n"
    "  --proc-root DIR     where proc is mounted (default /proc)\n";

constexpr std::size_t kStateMaxBytes = 1 << 20;  // runc's states are a few KiB
constexpr std::size_t kPathBytes = 4096;

void say(const char* level, const char* format, ...) __attribute__((format(printf, 2, 3)));
void say(const char* level, const char* format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::fprintf(stderr, "tessera-memory-hook: %s: %s\n", level, line);
}

// Reads all of `fd` into `buffer`; the size, or -1 past `capacity` (the
// rest is read and dropped, so that the writer never meets a closed pipe).
long read_all(int fd, char* buffer, std::size_t capacity) {
  std::size_t used = 0;
  for (;;) {
    if (used == capacity) {
      char extra[4096];
      bool over = false;
      for (;;) {
        const ssize_t more = ::read(fd, extra, sizeof extra);
        if (more < 0 && errno == EINTR) continue;
        if (more <= 0) break;
        over = true;
      }
      return over ? -1 : static_cast<long>(used);
    }
    const ssize_t n = ::read(fd, buffer + used, capacity - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return static_cast<long>(used);
    used += static_cast<std::size_t>(n);
  }
}

// ------------------------------------------------------------------ the OCI state

// Just enough JSON to find the top-level "pid" of an OCI state (runtime-spec
// runtime.md, "State"): the value of every other key is skipped whole. A key
// is compared as written (a key spelled with escapes is not "pid").
struct Scanner {
  const char* p;
  const char* end;
  const char* error = nullptr;

  void ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  }
  bool fail(const char* why) {
    if (!error) error = why;
    return false;
  }
  // A string at p; [start, length) its raw text between the quotes.
  bool string(const char*& start, std::size_t& length) {
    if (p >= end || *p != '"') return fail("a string was expected");
    start = ++p;
    while (p < end && *p != '"') {
      if (static_cast<unsigned char>(*p) < 0x20) return fail("a string holds a control character");
      if (*p == '\\') {
        if (++p >= end) break;
        if (*p == 'u') {
          for (int i = 0; i < 4; ++i)
            if (++p >= end || !std::strchr("0123456789abcdefABCDEF", *p)) return fail("a \\u escape is malformed");
        } else if (!std::strchr("\"\\/bfnrt", *p)) {
          return fail("a string has an unknown escape");
        }
      }
      ++p;
    }
    if (p >= end) return fail("a string is not closed");
    length = static_cast<std::size_t>(p - start);
    ++p;
    return true;
  }
  bool value(int depth) {
    if (depth > 64) return fail("it nests deeper than 64 levels");
    ws();
    if (p >= end) return fail("a value is missing");
    const char* s = nullptr;
    std::size_t n = 0;
    switch (*p) {
      case '"':
        return string(s, n);
      case '{':
      case '[': {
        const char close = *p == '{' ? '}' : ']';
        const bool object = *p == '{';
        ++p;
        ws();
        if (p < end && *p == close) return ++p, true;
        for (;;) {
          if (object) {
            ws();
            if (!string(s, n)) return false;
            ws();
            if (p >= end || *p != ':') return fail("a ':' is missing after a key");
            ++p;
          }
          if (!value(depth + 1)) return false;
          ws();
          if (p < end && *p == ',') {
            ++p;
            continue;
          }
          if (p < end && *p == close) return ++p, true;
          return fail("a ',' or a closing bracket is missing");
        }
      }
      default: {
        const char* start = p;
        while (p < end && (std::strchr("+-.eE", *p) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z'))) ++p;
        const auto length = static_cast<std::size_t>(p - start);
        if (length == 0) return fail("a value is not JSON");
        return true;
      }
    }
  }
};

// The container's pid from its OCI state; 0 with `why` set when the state is
// not one.
long state_pid(const char* text, std::size_t size, const char*& why) {
  Scanner s{text, text + size};
  long pid = 0;
  s.ws();
  if (s.p >= s.end || *s.p != '{') return why = "it is not a JSON object", 0;
  ++s.p;
  s.ws();
  if (s.p < s.end && *s.p == '}') return why = "it has no \"pid\"", 0;
  for (;;) {
    const char* key = nullptr;
    std::size_t length = 0;
    s.ws();
    if (!s.string(key, length)) return why = s.error, 0;
    s.ws();
    if (s.p >= s.end || *s.p != ':') return why = "a ':' is missing after a key", 0;
    ++s.p;
    s.ws();
    const char* at = s.p;
    if (!s.value(1)) return why = s.error, 0;
    if (length == 3 && std::memcmp(key, "pid", 3) == 0) {
      if (pid) return why = "it gives \"pid\" twice", 0;
      long v = 0;
      for (const char* c = at; c < s.p; ++c) {
        if (*c < '0' || *c > '9' || v > (INT_MAX - (*c - '0')) / 10) return why = "its \"pid\" is not a positive integer", 0;
        v = v * 10 + (*c - '0');
      }
      if (v <= 0 || (at < s.p && *at == '0')) return why = "its \"pid\" is not a positive integer", 0;
      pid = v;
    }
    s.ws();
    if (s.p < s.end && *s.p == ',') {
      ++s.p;
      continue;
    }
    if (s.p < s.end && *s.p == '}') break;
    return why = "a ',' or '}' is missing", 0;
  }
  ++s.p;
  s.ws();
  if (s.p != s.end) return why = "something follows the object", 0;
  if (!pid) return why = "it has no \"pid\"", 0;
  return pid;
}

// ------------------------------------------------------------------ the cgroup

// The container's cgroup v2 directory, from /proc/<pid>/cgroup's "0::" line,
// in `out`. False with `why` where there is none to limit: no unified
// hierarchy, a cgroup outside it, a path that does not name a directory.
bool cgroup_dir(const char* proc_root, const char* cgroup_root, long pid, char* out, std::size_t size,
                const char*& why) {
  char path[kPathBytes];
  std::snprintf(path, sizeof path, "%s/%ld/cgroup", proc_root, pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return why = "the container's process has no /proc entry (it is gone)", false;
  char text[8192];
  const long n = read_all(fd, text, sizeof text - 1);
  ::close(fd);
  if (n < 0) return why = "its /proc/<pid>/cgroup cannot be read", false;
  text[n] = '\0';
  const char* line = nullptr;
  for (const char* p = text; *p;) {
    if (std::strncmp(p, "0::", 3) == 0) line = p + 3;
    const char* eol = std::strchr(p, '\n');
    if (!eol) break;
    p = eol + 1;
  }
  if (!line) return why = "the host has no cgroup v2 hierarchy (cgroup v1)", false;
  const char* eol = std::strchr(line, '\n');
  const std::size_t length = eol ? static_cast<std::size_t>(eol - line) : std::strlen(line);
  char controllers[kPathBytes];
  std::snprintf(controllers, sizeof controllers, "%s/cgroup.controllers", cgroup_root);
  if (::access(controllers, F_OK) != 0) return why = "no cgroup v2 hierarchy is mounted at the cgroup root", false;
  const int written = std::snprintf(out, size, "%s%.*s", cgroup_root, static_cast<int>(length), line);
  if (written < 0 || static_cast<std::size_t>(written) >= size ||
      !valid_cgroup_path(out, static_cast<std::size_t>(written)))
    return why = "the container's cgroup path is not one a limit can name", false;
  struct stat st {};
  if (::lstat(out, &st) != 0 || !S_ISDIR(st.st_mode)) return why = "the container's cgroup directory is missing", false;
  return true;
}

// ------------------------------------------------------------------ the driver

struct Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*set)(nvmlDevice_t, nvmlSetMemoryLimits_v1_t*) = nullptr;
  nvmlReturn_t (*get)(nvmlDevice_t, nvmlGetMemoryLimits_v1_t*) = nullptr;

  template <class F>
  void bind(F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(handle, name));
  }
  const char* text(nvmlReturn_t r) const { return error_string ? error_string(r) : "NVML error"; }
};

// Opens NVML with the memory-limit calls; false with `why` where the driver
// has none to offer.
bool open_nvml(const char* library, Nvml& nvml, const char*& why) {
  nvml.handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!nvml.handle) return why = "NVML cannot be loaded", false;
  nvml.bind(nvml.init, "nvmlInit_v2");
  nvml.bind(nvml.shutdown, "nvmlShutdown");
  nvml.bind(nvml.error_string, "nvmlErrorString");
  nvml.bind(nvml.by_uuid, "nvmlDeviceGetHandleByUUID");
  nvml.bind(nvml.set, "nvmlDeviceSetMemoryLimits_v1");
  nvml.bind(nvml.get, "nvmlDeviceGetMemoryLimits_v1");
  if (!nvml.init || !nvml.shutdown || !nvml.by_uuid) return why = "NVML lacks its basic entry points", false;
  if (!nvml.set || !nvml.get) return why = "the driver has no memory limits (they came with R615)", false;
  if (const nvmlReturn_t r = nvml.init(); r != NVML_SUCCESS) return why = "nvmlInit_v2 failed", false;
  return true;
}

// Has the driver hold `cgroup` to `bytes` on the GPU `uuid` and reads it
// back; false with the reason in `why` (a buffer) where it does not.
bool hold(const Nvml& nvml, const char* uuid, const char* cgroup, std::uint64_t bytes, char* why, std::size_t size) {
  nvmlDevice_t device = nullptr;
  if (const nvmlReturn_t r = nvml.by_uuid(uuid, &device); r != NVML_SUCCESS) {
    std::snprintf(why, size, "nvmlDeviceGetHandleByUUID: %s", nvml.text(r));
    return false;
  }
  nvmlSetMemoryLimits_v1_t set{cgroup, bytes, bytes};
  if (const nvmlReturn_t r = nvml.set(device, &set); r != NVML_SUCCESS) {
    std::snprintf(why, size, "nvmlDeviceSetMemoryLimits_v1: %s", nvml.text(r));
    return false;
  }
  nvmlGetMemoryLimits_v1_t got{};
  got.nameSpace = cgroup;
  if (const nvmlReturn_t r = nvml.get(device, &got); r != NVML_SUCCESS) {
    std::snprintf(why, size, "nvmlDeviceGetMemoryLimits_v1 after setting: %s", nvml.text(r));
    return false;
  }
  if (got.hardLimit != bytes) {
    std::snprintf(why, size, "the driver reads back a hard limit of %llu bytes, not %llu", got.hardLimit,
                  static_cast<unsigned long long>(bytes));
    return false;
  }
  return true;
}

// ------------------------------------------------------------------ the record

// Replaces `dir`/driver-limits with `record` (removes it when it names no
// device): written aside, then renamed, never through a symlink.
bool write_record(const char* dir, const DriverLimits& record) {
  char path[kPathBytes], temporary[kPathBytes];
  const int path_length = std::snprintf(path, sizeof path, "%s/%s", dir, kDriverLimitsFileName);
  if (path_length < 0 || static_cast<std::size_t>(path_length) >= sizeof path)
    return say("error", "the driver-limits record's path in %s is longer than %zu bytes", dir, sizeof path - 1), false;
  if (record.count == 0) {
    if (::unlink(path) != 0 && errno != ENOENT) return say("error", "%s cannot be removed: %s", path, std::strerror(errno)), false;
    return true;
  }
  char text[kDriverLimitsMaxBytes];
  const std::size_t n = format_driver_limits(record, text, sizeof text);
  if (n == 0) return say("error", "the driver-limits record does not fit"), false;
  const int temporary_length =
      std::snprintf(temporary, sizeof temporary, "%s/.%s.%ld", dir, kDriverLimitsFileName, static_cast<long>(::getpid()));
  if (temporary_length < 0 || static_cast<std::size_t>(temporary_length) >= sizeof temporary)
    return say("error", "the driver-limits record's path in %s is longer than %zu bytes", dir, sizeof temporary - 1), false;
  const int fd = ::open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return say("error", "%s cannot be written: %s", temporary, std::strerror(errno)), false;
  const bool ok = ::write(fd, text, n) == static_cast<ssize_t>(n) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(temporary, path) != 0) {
    say("error", "%s cannot be written: %s", path, std::strerror(errno));
    ::unlink(temporary);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* limits_path = nullptr;
  const char* library = "libnvidia-ml.so.1";
  const char* cgroup_root = "/sys/fs/cgroup";
  const char* proc_root = "/proc";
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const char** target = std::strcmp(arg, "--limits") == 0        ? &limits_path
                          : std::strcmp(arg, "--nvml") == 0        ? &library
                          : std::strcmp(arg, "--cgroup-root") == 0 ? &cgroup_root
                          : std::strcmp(arg, "--proc-root") == 0   ? &proc_root
                                                                   : nullptr;
    if (!target) {
      say("error", "unknown argument \"%.64s\"", arg);
      std::fputs(kUsage, stderr);
      return 2;
    }
    if (i + 1 >= argc || !*argv[i + 1]) {
      say("error", "%s needs a value", arg);
      return 2;
    }
    *target = argv[++i];
  }
  if (!limits_path) {
    say("error", "--limits FILE is required");
    std::fputs(kUsage, stderr);
    return 2;
  }

  static char state[kStateMaxBytes];
  const long state_size = read_all(STDIN_FILENO, state, sizeof state);
  if (state_size < 0) return say("error", "the container's OCI state on stdin is unreadable or over 1 MiB"), 1;
  const char* why = nullptr;
  const long pid = state_pid(state, static_cast<std::size_t>(state_size), why);
  if (!pid) return say("error", "the OCI state on stdin is not usable: %s", why), 1;

  // The node's limits: unusable ones fail the container, as the library would.
  const int fd = ::open(limits_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return say("error", "limits file %s cannot be opened: %s", limits_path, std::strerror(errno)), 1;
  char text[kLimitsMaxBytes + 1];
  const long text_size = read_all(fd, text, kLimitsMaxBytes);
  ::close(fd);
  Limits limits;
  char problem[256];
  if (text_size < 0) return say("error", "limits file %s cannot be read or is over %zu bytes", limits_path, kLimitsMaxBytes), 1;
  if (!parse_limits(text, static_cast<std::size_t>(text_size), limits, problem, sizeof problem))
    return say("error", "limits file %s is not valid: %s", limits_path, problem), 1;
  char dir[kPathBytes];
  std::snprintf(dir, sizeof dir, "%s", limits_path);
  if (char* slash = std::strrchr(dir, '/')) *(slash == dir ? slash + 1 : slash) = '\0';
  else std::snprintf(dir, sizeof dir, ".");

  DriverLimits record;
  char cgroup[kCgroupPathBytes];
  Nvml nvml;
  bool have_cgroup = cgroup_dir(proc_root, cgroup_root, pid, cgroup, sizeof cgroup, why);
  const char* nvml_why = nullptr;
  const bool have_nvml = have_cgroup && open_nvml(library, nvml, nvml_why);
  for (std::uint32_t k = 0; k < limits.device_count; ++k) {
    const LimitDevice& d = limits.devices[k];
    if (!have_cgroup) {
      say("info", "%s: the quota library holds %llu bytes: %s", d.uuid, static_cast<unsigned long long>(d.quota), why);
      continue;
    }
    if (!have_nvml) {
      say("info", "%s: the quota library holds %llu bytes: %s", d.uuid, static_cast<unsigned long long>(d.quota),
          nvml_why);
      continue;
    }
    if (std::strncmp(d.uuid, "MIG-", 4) == 0) {
      say("info", "%s: the quota library holds %llu bytes: the driver has no memory limits for MIG devices", d.uuid,
          static_cast<unsigned long long>(d.quota));
      continue;
    }
    char failure[256];
    if (!hold(nvml, d.uuid, cgroup, d.quota, failure, sizeof failure)) {
      say("warn", "%s: the quota library holds %llu bytes: %s", d.uuid, static_cast<unsigned long long>(d.quota),
          failure);
      continue;
    }
    DriverLimit& entry = record.devices[record.count++];
    std::memcpy(entry.uuid, d.uuid, sizeof entry.uuid);
    entry.bytes = d.quota;
    std::memcpy(entry.cgroup, cgroup, sizeof entry.cgroup);
    say("info", "%s: the driver holds cgroup %s to %llu bytes", d.uuid, cgroup, static_cast<unsigned long long>(d.quota));
  }
  if (have_nvml) nvml.shutdown();
  // A record that cannot be written misreports the backend; the limits hold.
  (void)write_record(dir, record);
  return 0;
}
