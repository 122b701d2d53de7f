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
//
// Every change is made inside the container's root only: files and links are
// made by a child that has chroot()ed there, so a symlink in the image cannot
// lead them onto the host. The same commands as NVIDIA's nvidia-cdi-hook
// (container-toolkit cmd/nvidia-cdi-hook), written anew. Exit status: 0 when
// done, or when the root is read-only (said: the container runs without it);
// 1 when the state or bundle is unusable; 2 for a wrong command line.
// glibc only, no C++ runtime, no heap, like tessera-memory-hook.
#include <fcntl.h>
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
    "\n"
    "CDI createContainer hooks: read the container's OCI state on stdin, find its root filesystem\n"
    "through the bundle's config.json, and change only what is inside it.\n"
    "\n"
    "  update-ldcache      add each DIR (a path in the container) to the linker's configuration\n"
    "                      (/etc/ld.so.conf.d/00-tessera-cdi.conf) and rebuild /etc/ld.so.cache\n"
    "                      with the host's ldconfig (-r the container's root)\n"
    "  --ldconfig PATH     the host's ldconfig (default /sbin/ldconfig, else /usr/sbin/ldconfig)\n"
    "  create-symlinks     make each LINK (an absolute path in the container) a symlink to TARGET,\n"
    "                      unless something is there already\n";

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

int update_ldcache(const char* root, const char* const* folders, int count, const char* ldconfig) {
  // The configuration, so that a later ldconfig in the container keeps the folders.
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
    return ok ? 0 : 1;
  });
  if (wrote == 3) {
    say("warn", "the container's root %s is read-only: its linker cache stays as the image has it", root);
    return 0;
  }
  if (wrote != 0) say("warn", "cannot write /etc/ld.so.conf.d/00-tessera-cdi.conf in %s; the cache is rebuilt anyway", root);
  // The host's ldconfig, which chroots to the root itself (-r) and reads the
  // container's /etc/ld.so.conf there; the folders given as well.
  const char* argv[kMaxItems + 4] = {"ldconfig", "-r", root};
  int argc = 3;
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
  if (!ldcache && !symlinks) {
    say("error", "unknown command \"%.64s\" (update-ldcache, create-symlinks)", command);
    std::fputs(kUsage, stderr);
    return 2;
  }
  const char* items[kMaxItems];
  int count = 0;
  const char* ldconfig = ::access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig" : "/usr/sbin/ldconfig";
  for (int i = 2; i < argc; ++i) {
    const char* arg = argv[i];
    const bool folder = ldcache && std::strcmp(arg, "--folder") == 0;
    const bool link = symlinks && std::strcmp(arg, "--link") == 0;
    const bool program = ldcache && std::strcmp(arg, "--ldconfig") == 0;
    if (!folder && !link && !program) {
      say("error", "%s: unknown argument \"%.64s\"", command, arg);
      return 2;
    }
    if (i + 1 >= argc || !*argv[i + 1]) return say("error", "%s needs a value", arg), 2;
    const char* value = argv[++i];
    if (program) {
      if (value[0] != '/') return say("error", "--ldconfig \"%.64s\" is not an absolute path", value), 2;
      ldconfig = value;
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
  if (count == 0) return say("error", "%s needs %s", command, ldcache ? "--folder DIR" : "--link TARGET::LINK"), 2;
  char root[kPathBytes];
  if (!find_root(root, sizeof root)) return 1;
  return ldcache ? update_ldcache(root, items, count, ldconfig) : create_symlinks(root, items, count);
}
