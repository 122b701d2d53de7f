#include "core/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string reason(int err) { return std::strerror(err); }

}  // namespace

Result<std::string> read_whole_file(const std::string& path, size_t max_bytes) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    int err = errno;
    return fail(err == ENOENT || err == ENOTDIR ? Errc::not_found : Errc::io, "cannot open file: " + reason(err));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return fail(Errc::io, "cannot read file: " + reason(errno));
  if (S_ISDIR(st.st_mode)) return fail(Errc::io, "cannot read file: " + reason(EISDIR));
  auto too_large = [&](size_t bytes) {
    return fail(Errc::invalid_argument, "file is too large (" + std::to_string(bytes) + " bytes; the limit is " +
                                            std::to_string(max_bytes) + ")");
  };
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > max_bytes) return too_large(static_cast<size_t>(st.st_size));
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(Errc::io, "cannot read file: " + reason(errno));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) return too_large(text.size());  // a pipe: at least this much
  }
  return text;
}

}  // namespace tessera
