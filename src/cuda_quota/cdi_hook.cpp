// tessera-cdi-hook: what a container needs done inside its root filesystem
// once the runtime has mounted the driver's files from tessera's CDI specs,
// as CDI createContainer hooks (the runtime runs them in the container's
// mount namespace before it pivots into the root filesystem, with the
// container's OCI state on stdin; runtime-spec config.md, "createContainer
// Hooks"). The root filesystem is the bundle's config.json root.path.
//
//   update-ldcache --folder DIR...   adds DIRs to the container's linker cache
//       (/etc/ld.so.conf.d/00-tessera-cdi.conf and /etc/ld.so.cache), with
//       the host's ldconfig run as `ldconfig -r <root>` (it chroots itself),
//       so that programs that look the driver up with `ldconfig -p` (Triton,
//       and so vLLM and torch.compile) or by soname find it.
//   create-symlinks --link TARGET::LINK...   makes LINK (a path in the
//       container) a symlink to TARGET, e.g. libcuda.so.1::/usr/lib/.../libcuda.so
//       for programs that dlopen("libcuda.so").
//   enable-cuda-compat --host-driver-version V   where the image carries CUDA's
//       forward-compatibility driver (/usr/local/cuda/compat/libcuda.so.<W>,
//       one of them) of a newer major version than the host's driver V, and
//       a linker cache, puts its folder in /etc/ld.so.conf.d/00-compat-tessera.conf,
//       read before the driver's folders (00-tessera-cdi.conf), so that an
//       image built for a newer CUDA runs; otherwise nothing (NVIDIA's rule,
//       container-toolkit cmd/nvidia-cdi-hook/cudacompat).
//   disable-device-node-modification [--params PATH]   where the host's driver
//       lets its user-space libraries create device nodes
//       (/proc/driver/nvidia/params "ModifyDeviceFiles: 1"), bind-mounts a
//       read-only copy saying "ModifyDeviceFiles: 0" over the container's
//       /proc/driver/nvidia/params, so that the libraries in the container
//       do not make nodes for devices it was not given.
//
// Every change is made inside the container's root only: files and links are
// made by a child that has chroot()ed there, so a symlink in the image cannot
// lead them onto the host. The same commands as NVIDIA's nvidia-cdi-hook
// (container-toolkit cmd/nvidia-cdi-hook), written anew. Exit status: 0 when
// done, or when the root is read-only (said: the container runs without it);
// 1 when the state or bundle is unusable, or the params' copy cannot be
// mounted; 2 for a wrong command line.
// glibc only, no C++ runtime, no heap, like tessera-memory-hook.
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_quota/hook_io.hpp"

namespace {

using namespace tessera::hook;

constexpr const char* kUsage =
    "usage: tessera-cdi-hook update-ldcache --folder DIR... [--ldconfig PATH]\n"
    "       tessera-cdi-hook create-symlinks --link TARGET::LINK...\n"
    "       tessera-cdi-hook enable-cuda-compat --host-driver-version VERSION\n"
    "       tessera-cdi-hook disable-device-node-modification [--params PATH]\n"
    "\n"
    "CDI createContainer hooks: read the container's OCI state on stdin, find its root filesystem\n"
    "through the bundle's config.json, and change only what is inside it.\n"
    "\n"
    "  update-ldcache      add each DIR (a path in the container) to the linker's configuration\n"
    "                      (/etc/ld.so.conf.d/00-tessera-cdi.conf) and rebuild /etc/ld.so.cache\n"
    "                      with the host's ldconfig (-r the container's root)\n"
    "  --ldconfig PATH     the host's ldconfig (default /sbin/ldconfig, else /usr/sbin/ldconfig)\n"
    "  create-symlinks     make each LINK (an absolute path in the container) a symlink to TARGET,\n"
    "                      unless something is there already\n"
    "  enable-cuda-compat  when the image has one /usr/local/cuda/compat/libcuda.so.<W> of a newer major\n"
    "                      version than the host's driver VERSION, and a linker cache, list that folder\n"
    "                      first (/etc/ld.so.conf.d/00-compat-tessera.conf); run before update-ldcache\n"
    "  disable-device-node-modification\n"
    "                      where the host's driver params say ModifyDeviceFiles: 1, mount a read-only\n"
    "                      copy saying 0 over the container's /proc/driver/nvidia/params\n"
    "  --params PATH       the host's driver params (default /proc/driver/nvidia/params)\n";

constexpr std::size_t kPathBytes = 4096;
constexpr int kMaxItems = 64;

void say(const char* level, const char* format, ...) __attribute__((format(printf, 2, 3)));
void say(const char* level, const char* format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  vsay("tessera-cdi-hook", level, line, sizeof line, format, args);
  va_end(args);
}

// A path in the container: absolute, no "." or ".." component, no
// character below ' ', shorter than kPathBytes.
bool container_path(const char* p) {
  if (p[0] != '/' || std::strlen(p) >= kPathBytes) return false;
  for (const char* c = p; *c; ++c)
    if (static_cast<unsigned char>(*c) < 0x20) return false;
  for (const char* c = p; *c;) {
    while (*c == '/') ++c;
    const char* e = c;
    while (*e && *e != '/') ++e;
    const std::size_t n = static_cast<std::size_t>(e - c);
    if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) return false;
    c = e;
  }
  return true;
}

// The container's root filesystem, from the state's bundle and its
// config.json (root.path, relative to the bundle or absolute), in `root`.
bool find_root(char* root, std::size_t size) {
  static char state[1 << 20];
  const long n = read_all(STDIN_FILENO, state, sizeof state);
  if (n < 0) return say("error", "the container's OCI state on stdin is unreadable or over 1 MiB"), false;
  Scanner s{state, state + n};
  const char* bundle = nullptr;
  std::size_t bundle_length = 0;
  if (!member_string(s, nullptr, "bundle", bundle, bundle_length))
    return say("error", "the OCI state on stdin has no usable \"bundle\": %s", s.error), false;
  if (bundle_length == 0 || bundle[0] != '/' || bundle_length >= kPathBytes - 16)
    return say("error", "the OCI state's bundle \"%.*s\" is not an absolute path", static_cast<int>(bundle_length), bundle), false;
  char config_path[kPathBytes];
  std::snprintf(config_path, sizeof config_path, "%.*s/config.json", static_cast<int>(bundle_length), bundle);
  const int fd = ::open(config_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return say("error", "%s cannot be opened: %s", config_path, std::strerror(errno)), false;
  static char config[16 << 20];
  const long m = read_all(fd, config, sizeof config);
  ::close(fd);
  if (m < 0) return say("error", "%s cannot be read or is over 16 MiB", config_path), false;
  Scanner c{config, config + m};
  const char* path = nullptr;
  std::size_t path_length = 0;
  if (!member_string(c, "root", "path", path, path_length))
    return say("error", "%s has no usable root.path: %s", config_path, c.error), false;
  const int w = path_length && path[0] == '/'
                    ? std::snprintf(root, size, "%.*s", static_cast<int>(path_length), path)
                    : std::snprintf(root, size, "%.*s/%.*s", static_cast<int>(bundle_length), bundle,
                                    static_cast<int>(path_length), path);
  if (w < 0 || static_cast<std::size_t>(w) >= size || path_length == 0)
    return say("error", "%s: root.path \"%.*s\" is empty or too long", config_path, static_cast<int>(path_length), path), false;
  struct stat st {};
  if (::stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
    return say("error", "the container's root %s is not a directory", root), false;
  return true;
}

// The exit status of child `pid` once it has ended; -1 when it was killed.
int exit_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs `work` in a child chroot()ed to `root`; its exit status (0 done, 3 the
// root is read-only, else failed), or -1 when no child could be made.
template <class Work>
int in_root(const char* root, Work work) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::chroot(root) != 0 || ::chdir("/") != 0) {
      say("error", "cannot enter the container's root %s: %s", root, std::strerror(errno));
      ::_exit(1);
    }
    ::_exit(work());
  }
  const int status = exit_status(pid);
  return status < 0 ? 1 : status;
}

// mkdir -p of the directories above `path` (inside the chroot).
bool make_parents(const char* path) {
  char dir[kPathBytes];
  std::snprintf(dir, sizeof dir, "%s", path);
  for (char* c = dir + 1; *c; ++c) {
    if (*c != '/') continue;
    *c = '\0';
    if (::mkdir(dir, 0755) != 0 && errno != EEXIST) return false;
    *c = '/';
  }
  return true;
}

// Whether the linker configuration in the current root (/etc/ld.so.conf)
// includes /etc/ld.so.conf.d, as Debian's, Ubuntu's and Red Hat's do.
bool conf_includes_conf_d() {
  static char text[64 << 10];
  const int fd = ::open("/etc/ld.so.conf", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const long n = read_all(fd, text, sizeof text - 1);
  ::close(fd);
  if (n < 0) return false;
  text[n] = '\0';
  for (char* line = text; line && *line;) {
    char* next = std::strchr(line, '\n');
    if (next) *next++ = '\0';
    while (*line == ' ' || *line == '\t') ++line;
    if (std::strncmp(line, "include", 7) == 0 && std::strstr(line, "ld.so.conf.d")) return true;
    line = next;
  }
  return false;
}

int update_ldcache(const char* root, const char* const* folders, int count, const char* ldconfig) {
  // The configuration, so that a later ldconfig in the container keeps the
  // folders. 0: written and read through the image's /etc/ld.so.conf; 6:
  // written, but the image's configuration does not include it.
  const int wrote = in_root(root, [&] {
    char text[kMaxItems * kPathBytes / 8];
    std::size_t used = 0;
    used += static_cast<std::size_t>(
        std::snprintf(text + used, sizeof text - used, "# The NVIDIA driver's libraries, mounted by CDI (tessera-cdi-hook).\n"));
    for (int i = 0; i < count && used < sizeof text; ++i)
      used += static_cast<std::size_t>(std::snprintf(text + used, sizeof text - used, "%s\n", folders[i]));
    if (used >= sizeof text) return 1;
    if (!make_parents("/etc/ld.so.conf.d/x")) return errno == EROFS ? 3 : 1;
    const int fd = ::open("/etc/ld.so.conf.d/00-tessera-cdi.conf", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return errno == EROFS ? 3 : 1;
    const bool ok = ::write(fd, text, used) == static_cast<ssize_t>(used);
    ::close(fd);
    if (!ok) return 1;
    return conf_includes_conf_d() ? 0 : 6;
  });
  if (wrote == 3) {
    say("warn", "the container's root %s is read-only: its linker cache stays as the image has it", root);
    return 0;
  }
  if (wrote != 0 && wrote != 6) say("warn", "cannot write /etc/ld.so.conf.d/00-tessera-cdi.conf in %s; the cache is rebuilt anyway", root);
  // The host's ldconfig, which chroots to the root itself (-r) and reads the
  // container's /etc/ld.so.conf there. The folders go on its command line
  // only where that configuration does not list them: ldconfig reads its
  // command line's folders before the configuration's, and the first
  // folder with a library wins, so there they would come before a
  // forward-compatible CUDA (00-compat-tessera.conf).
  const char* argv[kMaxItems + 4] = {"ldconfig", "-r", root};
  int argc = 3;
  if (wrote != 0)
    for (int i = 0; i < count; ++i) argv[argc++] = folders[i];
  argv[argc] = nullptr;
  const pid_t pid = ::fork();
  if (pid < 0) return say("error", "cannot start %s: %s", ldconfig, std::strerror(errno)), 1;
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::execv(ldconfig, const_cast<char* const*>(argv));
    say("error", "cannot run %s: %s", ldconfig, std::strerror(errno));
    ::_exit(127);
  }
  if (const int status = exit_status(pid); status != 0) {
    say("warn", "%s -r %s failed (status %d): the container's linker cache may lack the driver", ldconfig, root, status);
    return 0;
  }
  say("info", "the linker cache of %s lists the driver's folders", root);
  return 0;
}

// The major version of a driver version ("580" of "580.65.06"): the digits
// up to the first dot; -1 unless it is digits and dots.
long major_version(const char* v) {
  long major = 0;
  const char* c = v;
  for (; *c >= '0' && *c <= '9' && c - v < 6; ++c) major = major * 10 + (*c - '0');
  if (c == v || (*c != '.' && *c != '\0')) return -1;
  for (; *c; ++c)
    if (!((*c >= '0' && *c <= '9') || *c == '.')) return -1;
  return major;
}

constexpr const char* kCompatDir = "/usr/local/cuda/compat";
constexpr const char* kCompatConf = "/etc/ld.so.conf.d/00-compat-tessera.conf";

int enable_cuda_compat(const char* root, long host_major, const char* host_version) {
  const int r = in_root(root, [&] {
    struct stat st {};
    if (::stat(kCompatDir, &st) != 0 || !S_ISDIR(st.st_mode)) return 10;  // no forward compatibility in the image
    if (::stat("/etc/ld.so.cache", &st) != 0) return 11;                  // no linker cache to put it in
    char dir[PATH_MAX];
    if (!::realpath(kCompatDir, dir)) return 1;  // inside the chroot: /usr/local/cuda is often a link
    DIR* d = ::opendir(dir);
    if (!d) return 1;
    char found[NAME_MAX + 1] = "";
    int libs = 0;
    while (const dirent* e = ::readdir(d)) {
      // libcuda.so.*.*: the versioned file, not the libcuda.so.1 link.
      if (std::strncmp(e->d_name, "libcuda.so.", 11) != 0 || !std::strchr(e->d_name + 11, '.')) continue;
      ++libs;
      std::snprintf(found, sizeof found, "%s", e->d_name);
    }
    ::closedir(d);
    if (libs != 1) {
      say("warn", "%s holds %d libcuda.so.<version> files, not one: the image's forward compatibility is not used", kCompatDir, libs);
      return 12;
    }
    const long compat_major = major_version(found + 11);
    if (compat_major < 0) {
      say("warn", "%s/%s: no driver version in the name: the image's forward compatibility is not used", kCompatDir, found);
      return 12;
    }
    if (compat_major <= host_major) {
      say("info", "the image's %s/%s is not newer than the host's driver %s: the host's libcuda is used", kCompatDir, found, host_version);
      return 13;
    }
    char text[PATH_MAX + 96];
    const int n = std::snprintf(text, sizeof text, "# CUDA's forward compatibility, newer than the host's driver (tessera-cdi-hook).\n%s\n", dir);
    if (!make_parents(kCompatConf)) return errno == EROFS ? 3 : 1;
    const int fd = ::open(kCompatConf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return errno == EROFS ? 3 : 1;
    const bool ok = ::write(fd, text, static_cast<std::size_t>(n)) == n && ::fchmod(fd, 0644) == 0;
    ::close(fd);
    if (!ok) return 1;
    say("info", "the image's %s/%s (driver %ld) is newer than the host's %s: %s is listed first", dir, found, compat_major, host_version, dir);
    return 0;
  });
  if (r == 3) say("warn", "the container's root %s is read-only: CUDA's forward compatibility is not enabled", root);
  if (r == 1) say("warn", "cannot write %s in %s: CUDA's forward compatibility is not enabled", kCompatConf, root);
  return 0;  // as NVIDIA's: an image without a usable compat driver runs on the host's
}

// The params with "ModifyDeviceFiles: 1" made 0, in `out`; false when there
// is nothing to change (already 0, or no such line).
bool params_without_modification(const char* in, long n, char* out, std::size_t size) {
  bool changed = false;
  std::size_t used = 0;
  for (const char* line = in; line < in + n;) {
    const char* end = static_cast<const char*>(std::memchr(line, '\n', static_cast<std::size_t>(in + n - line)));
    const std::size_t len = static_cast<std::size_t>((end ? end : in + n) - line);
    const bool modify = len == 20 && std::strncmp(line, "ModifyDeviceFiles: 1", 20) == 0;
    const char* text = modify ? "ModifyDeviceFiles: 0" : line;
    if (used + len + 1 >= size) return false;
    std::memcpy(out + used, text, len);
    used += len;
    out[used++] = '\n';
    changed |= modify;
    line += len + 1;
  }
  out[used] = '\0';
  return changed;
}

int disable_device_node_modification(const char* root, const char* params) {
  static char host[64 << 10], masked[64 << 10];
  const int in = ::open(params, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    say("info", "%s: %s: no driver parameters to change", params, std::strerror(errno));
    return 0;
  }
  const long n = read_all(in, host, sizeof host);
  ::close(in);
  if (n < 0) return say("error", "%s is unreadable or over 64 KiB", params), 1;
  if (!params_without_modification(host, n, masked, sizeof masked)) {
    say("info", "%s does not say ModifyDeviceFiles: 1: nothing to change", params);
    return 0;
  }
  // The container's own /proc/driver/nvidia/params, reached through no
  // symlink (an image's link must not lead the mount elsewhere).
  char real_root[PATH_MAX], target[PATH_MAX + 32], real_target[PATH_MAX];
  if (!::realpath(root, real_root)) return say("error", "cannot resolve the container's root %s: %s", root, std::strerror(errno)), 1;
  std::snprintf(target, sizeof target, "%s/proc/driver/nvidia/params", real_root);
  if (!::realpath(target, real_target)) {
    say("info", "the container sees no /proc/driver/nvidia/params (%s): nothing to change", std::strerror(errno));
    return 0;
  }
  if (std::strcmp(real_target, target) != 0)
    return say("error", "the container's /proc/driver/nvidia/params leads to %s: not mounted over", real_target), 1;
  // The copy on a tmpfs of its own, mounted in the container's mount
  // namespace (the hook runs there), detached once the copy is bound.
  char dir[] = "/tmp/tessera-params-XXXXXX";
  if (!::mkdtemp(dir)) return say("error", "cannot make a directory for the params' copy: %s", std::strerror(errno)), 1;
  int status = 1;
  char copy[sizeof dir + 8];
  std::snprintf(copy, sizeof copy, "%s/params", dir);
  if (::mount("tessera-params", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755") != 0) {
    say("error", "cannot mount a tmpfs at %s: %s", dir, std::strerror(errno));
  } else {
    const int fd = ::open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    const std::size_t size = std::strlen(masked);
    if (fd < 0 || ::write(fd, masked, size) != static_cast<ssize_t>(size)) {
      say("error", "cannot write %s: %s", copy, std::strerror(errno));
    } else if (::mount(copy, target, nullptr, MS_BIND, nullptr) != 0) {
      say("error", "cannot bind %s over %s: %s", copy, target, std::strerror(errno));
    } else if (::mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      say("error", "cannot make %s read-only: %s", target, std::strerror(errno));
      ::umount2(target, MNT_DETACH);
    } else {
      say("info", "the container's /proc/driver/nvidia/params says ModifyDeviceFiles: 0");
      status = 0;
    }
    if (fd >= 0) ::close(fd);
    ::umount2(dir, MNT_DETACH);
  }
  ::rmdir(dir);
  return status;
}

int create_symlinks(const char* root, const char* const* links, int count) {
  int made = 0;
  for (int i = 0; i < count; ++i) {
    const char* sep = std::strstr(links[i], "::");
    char target[kPathBytes], link[kPathBytes];
    std::snprintf(target, sizeof target, "%.*s", static_cast<int>(sep - links[i]), links[i]);
    std::snprintf(link, sizeof link, "%s", sep + 2);
    const int r = in_root(root, [&] {
      struct stat st {};
      if (::lstat(link, &st) == 0) return 4;  // something is there: left alone
      if (!make_parents(link)) return errno == EROFS ? 3 : 1;
      if (::symlink(target, link) != 0) return errno == EROFS ? 3 : errno == EEXIST ? 4 : 1;
      return 0;
    });
    if (r == 0) {
      ++made;
    } else if (r == 3) {
      say("warn", "the container's root %s is read-only: no %s", root, link);
      return 0;
    } else if (r != 4) {
      say("warn", "cannot make %s -> %s in %s", link, target, root);
    }
  }
  say("info", "%d of %d links made in %s", made, count, root);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char* command = argv[1];
  const bool ldcache = std::strcmp(command, "update-ldcache") == 0;
  const bool symlinks = std::strcmp(command, "create-symlinks") == 0;
  const bool compat = std::strcmp(command, "enable-cuda-compat") == 0;
  const bool params = std::strcmp(command, "disable-device-node-modification") == 0;
  if (!ldcache && !symlinks && !compat && !params) {
    say("error", "unknown command \"%.64s\" (update-ldcache, create-symlinks, enable-cuda-compat, disable-device-node-modification)",
        command);
    std::fputs(kUsage, stderr);
    return 2;
  }
  const char* items[kMaxItems];
  int count = 0;
  const char* ldconfig = ::access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig" : "/usr/sbin/ldconfig";
  const char* host_version = nullptr;
  const char* params_file = "/proc/driver/nvidia/params";
  for (int i = 2; i < argc; ++i) {
    const char* arg = argv[i];
    // NVIDIA's hook takes --host-driver-version=V as one word.
    if (compat && std::strncmp(arg, "--host-driver-version=", 22) == 0) {
      host_version = arg + 22;
      continue;
    }
    const bool folder = ldcache && std::strcmp(arg, "--folder") == 0;
    const bool link = symlinks && std::strcmp(arg, "--link") == 0;
    const bool program = ldcache && std::strcmp(arg, "--ldconfig") == 0;
    const bool version = compat && std::strcmp(arg, "--host-driver-version") == 0;
    const bool params_path = params && std::strcmp(arg, "--params") == 0;
    if (!folder && !link && !program && !version && !params_path) {
      say("error", "%s: unknown argument \"%.64s\"", command, arg);
      return 2;
    }
    if (i + 1 >= argc || !*argv[i + 1]) return say("error", "%s needs a value", arg), 2;
    const char* value = argv[++i];
    if (program || params_path) {
      if (value[0] != '/') return say("error", "%s \"%.64s\" is not an absolute path", arg, value), 2;
      (program ? ldconfig : params_file) = value;
      continue;
    }
    if (version) {
      host_version = value;
      continue;
    }
    if (count == kMaxItems) return say("error", "more than %d %s values", kMaxItems, arg), 2;
    if (folder && !container_path(value))
      return say("error", "--folder \"%.64s\" is not an absolute path in the container (no . or ..)", value), 2;
    if (link) {
      const char* sep = std::strstr(value, "::");
      if (!sep || sep == value || static_cast<std::size_t>(sep - value) >= kPathBytes || !container_path(sep + 2))
        return say("error", "--link \"%.64s\" is not TARGET::LINK with LINK an absolute path in the container", value), 2;
    }
    items[count++] = value;
  }
  long host_major = -1;
  if (compat) {
    if (!host_version) return say("error", "enable-cuda-compat needs --host-driver-version VERSION"), 2;
    host_major = major_version(host_version);
    if (host_major < 0)
      return say("error", "--host-driver-version \"%.64s\" is not a driver version (digits and dots, e.g. 580.65.06)", host_version), 2;
  }
  if ((ldcache || symlinks) && count == 0)
    return say("error", "%s needs %s", command, ldcache ? "--folder DIR" : "--link TARGET::LINK"), 2;
  char root[kPathBytes];
  if (!find_root(root, sizeof root)) return 1;
  if (compat) return enable_cuda_compat(root, host_major, host_version);
  if (params) return disable_device_node_modification(root, params_file);
  return ldcache ? update_ldcache(root, items, count, ldconfig) : create_symlinks(root, items, count);
}
