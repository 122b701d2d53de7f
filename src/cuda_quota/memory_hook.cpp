// tessera-memory-hook: the driver backend of a container's memory quota
// (docs/design-memory-quotas.md §9). A CDI createRuntime hook: the container
// runtime runs it in the runtime's namespaces on the host once the
// container's namespaces and cgroup exist and before the container's program
// runs, with the container's OCI state on stdin, whose pid is the container's
// init process as the host sees it (OCI runtime-spec config.md, "POSIX-platform
// Hooks": createRuntime is called in the runtime namespace; createContainer in
// the container's, where the state's pid reads as 1 and /proc/1/cgroup is the
// container's cgroup namespace's view). It reads the container's limits file
// (the node's decision, written at Allocate or at DRA prepare), finds the
// container's cgroup v2 directory through the state's pid, and asks the
// driver to cap that cgroup at each whole GPU's quota
// (nvmlDeviceSetMemoryLimits_v1, R615 and newer: hard limit the quota, soft
// limit 0, since a soft limit is reserved in every ancestor and outlives the
// cgroup), reading the limit back before it counts. A process in the root
// cgroup is refused: a limit there would cap the whole host. What the driver
// holds is recorded in `driver-limits` beside the limits file; everything
// else (MIG devices, an older driver, cgroup v1, a refused call) stays with
// the quota library alone, which the container loads either way.
//
// With --clear it is the same spec's poststop hook: every limit the record
// names is cleared (soft 0, hard NVML_DEVICE_MEMORY_LIMIT_MAX: NVML's "no
// limit"), whether or not the cgroup is still there, and the record goes.
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
#include "cuda_quota/glibc_floor.hpp"
#include "cuda_quota/hook_io.hpp"
#include "cuda_quota/limits.hpp"
#include "nvml/abi.hpp"

namespace {

using namespace tessera::quota;
using namespace tessera::nvml::abi;
using namespace tessera::hook;

constexpr const char* kUsage =
    "usage: tessera-memory-hook --limits FILE [--clear] [--nvml LIBRARY] [--cgroup-root DIR] [--proc-root DIR]\n"
    "\n"
    "A CDI createRuntime hook: reads the container's OCI state on stdin (its pid as the host sees\n"
    "it) and has the driver cap the container's cgroup at the quota of each whole GPU in FILE (the\n"
    "container's limits file, a host path), where the driver offers memory limits (R615 and newer,\n"
    "cgroup v2). Every other device is left to the quota library. What the driver holds is recorded\n"
    "in FILE's directory, as driver-limits.\n"
    "\n"
    "  --limits FILE       the container's limits file (required)\n"
    "  --clear             the poststop hook: clear every limit the record names, remove the record\n"
    "  --nvml LIBRARY      NVML to load (default libnvidia-ml.so.1)\n"
    "  --cgroup-root DIR   where cgroup v2 is mounted (default /sys/fs/cgroup)\n"
    "  --proc-root DIR     where proc is mounted (default /proc)\n";

constexpr std::size_t kStateMaxBytes = 1 << 20;  // runc's states are a few KiB
constexpr std::size_t kPathBytes = 4096;

int log_fd = -1;  // <ledger dir>/memory-hook.log, once open

void say(const char* level, const char* format, ...) __attribute__((format(printf, 2, 3)));
void say(const char* level, const char* format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  vsay("tessera-memory-hook", level, line, sizeof line, format, args);
  va_end(args);
  if (log_fd >= 0) {
    char out[1100];
    const int n = std::snprintf(out, sizeof out, "%s: %s\n", level, line);
    if (n > 0) (void)!::write(log_fd, out, static_cast<std::size_t>(n) < sizeof out ? static_cast<std::size_t>(n) : sizeof out - 1);
  }
}

// Opens <dir>/memory-hook.log (never through a symlink): anew for the
// createRuntime run, appended to by the poststop run. Without it the hook
// still says everything on stderr.
void open_log(const char* dir, bool append) {
  char path[4096];
  const int n = std::snprintf(path, sizeof path, "%s/memory-hook.log", dir);
  if (n < 0 || static_cast<std::size_t>(n) >= sizeof path) return;
  log_fd = ::open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
}

// What the hook needs of an OCI state: the container's pid (0: none given,
// as at poststop) and its id (the runtime's container id: letters, digits,
// '_', '-', '.', at most kIdBytes - 1).
constexpr std::size_t kIdBytes = 129;
struct State {
  long pid = 0;
  char id[kIdBytes] = {};
};

// Parses the state; false with `why` set when it is not one or its pid or id
// is not usable.
bool parse_state(const char* text, std::size_t size, State& out, const char*& why) {
  Scanner s{text, text + size};
  bool have_id = false, have_pid = false;
  why = nullptr;
  const bool walked = members(s, [&](const char* key, std::size_t length) {
    const char* at = s.p;
    if (!s.value(1)) return false;
    if (length == 3 && std::memcmp(key, "pid", 3) == 0) {
      if (have_pid) return why = "it gives \"pid\" twice", false;
      have_pid = true;
      // crun's poststop state says "pid": 0 for a process that is gone
      // (runtime-spec: pid is required only while created or running): no pid.
      if (s.p - at == 1 && *at == '0') return true;
      long v = 0;
      for (const char* c = at; c < s.p; ++c) {
        if (*c < '0' || *c > '9' || v > (INT_MAX - (*c - '0')) / 10) return why = "its \"pid\" is not a positive integer", false;
        v = v * 10 + (*c - '0');
      }
      if (v <= 0 || (at < s.p && *at == '0')) return why = "its \"pid\" is not a positive integer", false;
      out.pid = v;
    } else if (length == 2 && std::memcmp(key, "id", 2) == 0) {
      if (have_id) return why = "it gives \"id\" twice", false;
      // The raw string between the quotes: no escapes in a usable id.
      const std::size_t n = static_cast<std::size_t>(s.p - at);
      if (*at != '"' || n < 3 || n - 2 >= kIdBytes) return why = "its \"id\" is not a container id", false;
      for (const char* c = at + 1; c < s.p - 1; ++c)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-' || (*c == '.' && c != at + 1)))
          return why = "its \"id\" is not a container id (letters, digits, '_', '-', '.')", false;
      std::memcpy(out.id, at + 1, n - 2);
      out.id[n - 2] = '\0';
      have_id = true;
    }
    return true;
  });
  if (!walked) return why = why ? why : s.error, false;
  s.ws();
  if (s.p != s.end) return why = "something follows the object", false;
  if (!have_id) return why = "it has no \"id\"", false;
  return true;
}

// ------------------------------------------------------------------ the cgroup

// The container's cgroup v2 directory, from /proc/<pid>/cgroup's "0::" line,
// in `out`. False with `why` where there is none to limit: no unified
// hierarchy (then `out` holds the cgroup v1 memory controller's path, or is
// empty), the root cgroup, a cgroup outside the tree, a path that does not
// name a directory.
bool cgroup_dir(const char* proc_root, const char* cgroup_root, long pid, char* out, std::size_t size,
                const char*& why) {
  out[0] = '\0';
  char path[kPathBytes];
  std::snprintf(path, sizeof path, "%s/%ld/cgroup", proc_root, pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return why = "the container's process has no /proc entry (it is gone)", false;
  char text[8192];
  const long n = read_all(fd, text, sizeof text - 1);
  ::close(fd);
  if (n < 0) return why = "its /proc/<pid>/cgroup cannot be read", false;
  text[n] = '\0';
  // The unified hierarchy's line ("0::<path>") and, for cgroup v1, the
  // memory controller's ("<n>:<controllers with memory>:<path>").
  const char* line = nullptr;
  const char* memory = nullptr;
  std::size_t memory_length = 0;
  for (const char* p = text; *p;) {
    const char* eol = std::strchr(p, '\n');
    const std::size_t n = eol ? static_cast<std::size_t>(eol - p) : std::strlen(p);
    if (n >= 3 && std::strncmp(p, "0::", 3) == 0) line = p + 3;
    const char* controllers = static_cast<const char*>(std::memchr(p, ':', n));
    const char* path =
        controllers ? static_cast<const char*>(std::memchr(controllers + 1, ':', n - static_cast<std::size_t>(controllers + 1 - p)))
                    : nullptr;
    for (const char* c = controllers ? controllers + 1 : nullptr; c && c < path;) {
      const char* comma = static_cast<const char*>(std::memchr(c, ',', static_cast<std::size_t>(path - c)));
      const char* stop = comma ? comma : path;
      if (stop - c == 6 && std::memcmp(c, "memory", 6) == 0) {
        memory = path + 1;
        memory_length = static_cast<std::size_t>(p + n - memory);
      }
      c = stop + 1;
    }
    if (!eol) break;
    p = eol + 1;
  }
  char controllers[kPathBytes];
  std::snprintf(controllers, sizeof controllers, "%s/cgroup.controllers", cgroup_root);
  if (::access(controllers, F_OK) != 0) {
    // cgroup v1 (a kernel lists "0::/" even with no unified hierarchy
    // mounted): name the memory controller's cgroup, so the log says whose it is.
    if (memory) std::snprintf(out, size, "%.*s", static_cast<int>(memory_length), memory);
    return why = "the host has no cgroup v2 hierarchy at the cgroup root (cgroup v1)", false;
  }
  if (!line) return why = "the container's process has no cgroup v2 entry in /proc/<pid>/cgroup", false;
  const char* eol = std::strchr(line, '\n');
  const std::size_t length = eol ? static_cast<std::size_t>(eol - line) : std::strlen(line);
  if (length == 1 && line[0] == '/')
    return why = "the container's process is in the root cgroup (a limit there would cap the whole host; was the "
                 "hook run in the container's cgroup namespace, as a createContainer hook is?)",
           false;
  const int written = std::snprintf(out, size, "%s%.*s", cgroup_root, static_cast<int>(length), line);
  if (written < 0 || static_cast<std::size_t>(written) >= size ||
      !valid_cgroup_path(out, static_cast<std::size_t>(written)))
    return out[0] = '\0', why = "the container's cgroup path is not one a limit can name", false;
  struct stat st {};
  if (tessera::hook::path_stat(out, &st, false) != 0 || !S_ISDIR(st.st_mode))
    return out[0] = '\0', why = "the container's cgroup directory is missing", false;
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
  // Soft 0: the driver reserves a soft limit in every ancestor and keeps it
  // after the cgroup goes; the quota is a cap, not a reservation.
  nvmlSetMemoryLimits_v1_t set{cgroup, 0, bytes};
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
  if (got.hardLimit != bytes || got.softLimit != 0) {
    std::snprintf(why, size, "the driver reads back limits soft %llu / hard %llu bytes, not 0 / %llu", got.softLimit,
                  got.hardLimit, static_cast<unsigned long long>(bytes));
    return false;
  }
  return true;
}

// Clears the limit on `uuid` for `cgroup` (soft 0, hard NVML's "no limit");
// false with the reason in `why`. A limit already gone is cleared.
bool clear(const Nvml& nvml, const char* uuid, const char* cgroup, char* why, std::size_t size) {
  nvmlDevice_t device = nullptr;
  if (const nvmlReturn_t r = nvml.by_uuid(uuid, &device); r != NVML_SUCCESS) {
    std::snprintf(why, size, "nvmlDeviceGetHandleByUUID: %s", nvml.text(r));
    return false;
  }
  nvmlSetMemoryLimits_v1_t none{cgroup, 0, NVML_DEVICE_MEMORY_LIMIT_MAX};
  if (const nvmlReturn_t r = nvml.set(device, &none); r != NVML_SUCCESS && r != NVML_ERROR_NOT_FOUND) {
    std::snprintf(why, size, "nvmlDeviceSetMemoryLimits_v1 (clear): %s", nvml.text(r));
    return false;
  }
  return true;
}

// ------------------------------------------------------------------ the record

// Replaces `dir`/`name` with `record` (removes it when it names no device):
// written aside, then renamed, never through a symlink.
bool write_record(const char* dir, const char* name, const DriverLimits& record) {
  char path[kPathBytes], temporary[kPathBytes];
  const int path_length = std::snprintf(path, sizeof path, "%s/%s", dir, name);
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
      std::snprintf(temporary, sizeof temporary, "%s/.%s.%ld", dir, name, static_cast<long>(::getpid()));
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

// The per-container copy of what the driver holds, "driver-limits.<id>": what
// the poststop hook of that container, and only it, clears (a later
// container of the same share has its own, and replaces driver-limits).
void container_record_name(const State& state, char* out, std::size_t size) {
  std::snprintf(out, size, "%s.%s", kDriverLimitsFileName, state.id);
}

// The limits file's directory (the ledger directory) in `dir`.
void ledger_dir_of(const char* limits_path, char* dir, std::size_t size) {
  std::snprintf(dir, size, "%s", limits_path);
  if (char* slash = std::strrchr(dir, '/')) *(slash == dir ? slash + 1 : slash) = '\0';
  else std::snprintf(dir, size, ".");
}

// Reads `dir`/`name` (never through a symlink) into `out`; false with `why`
// empty where there is none, or naming what is wrong.
bool read_record(const char* dir, const char* name, DriverLimits& out, char* why, std::size_t why_size) {
  why[0] = '\0';
  char path[kPathBytes];
  std::snprintf(path, sizeof path, "%s/%s", dir, name);
  const int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) std::snprintf(why, why_size, "%s cannot be opened: %s", path, std::strerror(errno));
    return false;
  }
  static char text[kDriverLimitsMaxBytes + 1];
  const long n = read_all(fd, text, kDriverLimitsMaxBytes);
  ::close(fd);
  if (n < 0) return std::snprintf(why, why_size, "%s cannot be read or is too long", path), false;
  return parse_driver_limits(text, static_cast<std::size_t>(n), out, why, why_size);
}

// --clear, the poststop hook: every limit this container's record names is
// cleared, its record removed, and driver-limits too where it is this
// container's; one that cannot be cleared stays in the record, said. Exit 0
// whatever happens (a poststop hook's failure is only logged).
int clear_recorded(const char* dir, const State& state, const char* library) {
  char name[kPathBytes];
  container_record_name(state, name, sizeof name);
  DriverLimits record, left, current;
  char why[kPathBytes + 256];  // room for a path and its reason
  if (!read_record(dir, name, record, why, sizeof why)) {
    if (why[0]) say("warn", "the driver-limits record of container %s is not valid (%s): nothing cleared", state.id, why);
    else say("info", "no driver-limits record of container %s in %s: the driver holds nothing for it", state.id, dir);
    return 0;
  }
  Nvml nvml;
  const char* nvml_why = nullptr;
  if (!open_nvml(library, nvml, nvml_why)) {
    say("warn", "the driver's limits of container %s stay: %s", state.id, nvml_why);
    return 0;
  }
  for (std::uint32_t k = 0; k < record.count; ++k) {
    const DriverLimit& e = record.devices[k];
    char failure[256];
    if (clear(nvml, e.uuid, e.cgroup, failure, sizeof failure)) {
      say("info", "%s: the driver no longer limits cgroup %s", e.uuid, e.cgroup);
    } else {
      say("warn", "%s: the limit on cgroup %s stays: %s", e.uuid, e.cgroup, failure);
      left.devices[left.count++] = e;
    }
  }
  nvml.shutdown();
  // driver-limits names this container's cgroup: the share's backend is no
  // longer the driver (a later container's record names its own cgroup).
  if (read_record(dir, kDriverLimitsFileName, current, why, sizeof why) && current.count > 0 &&
      std::strcmp(current.devices[0].cgroup, record.devices[0].cgroup) == 0)
    (void)write_record(dir, kDriverLimitsFileName, left);
  (void)write_record(dir, name, left);
  return 0;
}

}  // namespace

// The program's .init_array, run as __libc_csu_init ran it: hook_start.S
// hands this to __libc_start_main as its init (glibc_floor.hpp).
extern "C" {
extern void (*__init_array_start[])(int, char**, char**) __attribute__((visibility("hidden")));
extern void (*__init_array_end[])(int, char**, char**) __attribute__((visibility("hidden")));
__attribute__((used)) void tessera_hook_init(int argc, char** argv, char** envp) {
  const std::size_t count = static_cast<std::size_t>(__init_array_end - __init_array_start);
  for (std::size_t i = 0; i < count; ++i) __init_array_start[i](argc, argv, envp);
}
}

int main(int argc, char** argv) {
  const char* limits_path = nullptr;
  bool clear_mode = false;
  const char* library = "libnvidia-ml.so.1";
  const char* cgroup_root = "/sys/fs/cgroup";
  const char* proc_root = "/proc";
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (std::strcmp(arg, "--clear") == 0) {
      clear_mode = true;
      continue;
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

  char dir[kPathBytes];
  ledger_dir_of(limits_path, dir, sizeof dir);
  // What the hook says goes to the runtime (which shows it only when a hook
  // fails) and to <ledger dir>/memory-hook.log, for whoever asks later.
  open_log(dir, clear_mode);

  static char state_text[kStateMaxBytes];
  const long state_size = read_all(STDIN_FILENO, state_text, sizeof state_text);
  if (state_size < 0) return say("error", "the container's OCI state on stdin is unreadable or over 1 MiB"), 1;
  const char* why = nullptr;
  State state;
  if (!parse_state(state_text, static_cast<std::size_t>(state_size), state, why))
    return say("error", "the OCI state on stdin is not usable: %s", why), clear_mode ? 0 : 1;
  if (clear_mode) return clear_recorded(dir, state, library);  // no pid by poststop: the process is gone
  if (!state.pid) return say("error", "the OCI state on stdin is not usable: it has no \"pid\""), 1;
  const long pid = state.pid;

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

  DriverLimits record;
  char cgroup[kCgroupPathBytes];
  Nvml nvml;
  bool have_cgroup = cgroup_dir(proc_root, cgroup_root, pid, cgroup, sizeof cgroup, why);
  const char* nvml_why = nullptr;
  const bool have_nvml = have_cgroup && open_nvml(library, nvml, nvml_why);
  for (std::uint32_t k = 0; k < limits.device_count; ++k) {
    const LimitDevice& d = limits.devices[k];
    if (!have_cgroup) {
      if (cgroup[0])
        say("info", "%s: the quota library holds %llu bytes: %s, the container's memory cgroup %s", d.uuid,
            static_cast<unsigned long long>(d.quota), why, cgroup);
      else
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
    const std::uint64_t held = driver_limit_bytes(d.quota);  // in whole MiB, as NVIDIA's hook sets it
    char failure[256];
    if (held == 0 || !hold(nvml, d.uuid, cgroup, held, failure, sizeof failure)) {
      if (held == 0) std::snprintf(failure, sizeof failure, "a quota under 1 MiB is no driver limit");
      say("warn", "%s: the quota library holds %llu bytes: %s", d.uuid, static_cast<unsigned long long>(d.quota),
          failure);
      continue;
    }
    DriverLimit& entry = record.devices[record.count++];
    std::memcpy(entry.uuid, d.uuid, sizeof entry.uuid);
    entry.bytes = held;
    std::memcpy(entry.cgroup, cgroup, sizeof entry.cgroup);
    say("info", "%s: the driver holds cgroup %s to %llu bytes (the quota, %llu bytes, in whole MiB)", d.uuid, cgroup,
        static_cast<unsigned long long>(held), static_cast<unsigned long long>(d.quota));
  }
  if (have_nvml) nvml.shutdown();
  // A record that cannot be written misreports the backend; the limits hold.
  char name[kPathBytes];
  container_record_name(state, name, sizeof name);
  (void)write_record(dir, name, record);
  (void)write_record(dir, kDriverLimitsFileName, record);
  return 0;
}
