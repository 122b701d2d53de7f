// What lets tessera-memory-hook run on any host the project supports: the
// container runtime runs the hooks on the host, with the host's glibc, and a
// binary that names a symbol version newer than the host's is refused by the
// dynamic linker (runc then fails the container). The floor is glibc 2.28
// (EL8, Debian 10; Ubuntu 20.04 and Amazon Linux 2 are above it), checked on
// the built binary by tests/cuda_quota/check_glibc_floor.sh.
//
// Built against a newer glibc, three kinds of reference go above it:
//   - __libc_start_main@GLIBC_2.34, named by the C runtime's start file:
//     the hook brings its own entry point (hook_start.S);
//   - dlopen and dlsym, moved into libc.so.6 in 2.34 (GLIBC_2.34): bound
//     here to their first version, which libdl.so.2 holds on older hosts
//     (and libc.so.6 on newer ones), with libdl.so.2 kept in DT_NEEDED;
//   - stat and lstat, exported under GLIBC_2.33 since 2.33: replaced by the
//     newfstatat system call, whose struct is glibc's struct stat on x86-64.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "the hooks' glibc floor is set for x86-64 (GLIBC_2.2.5 is its first version)"
#endif

__asm__(".symver dlopen, dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym, dlsym@GLIBC_2.2.5");

namespace tessera::hook {

// stat(2) of `path`, following a final symlink or not; 0, or -1 with errno.
inline int path_stat(const char* path, struct stat* st, bool follow) {
  return static_cast<int>(::syscall(SYS_newfstatat, AT_FDCWD, path, st, follow ? 0 : AT_SYMLINK_NOFOLLOW));
}

}  // namespace tessera::hook
