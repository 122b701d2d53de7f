#include "core/file_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera {
namespace {

Result<void> io_error(const std::string& what, const std::string& path) {
  return fail(Errc::io, "cannot " + what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

Result<void> replace_file_durably(const std::string& path, const std::string& content, mode_t mode) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return io_error("create", tmp);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      auto r = io_error("write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return r;
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    auto r = io_error("flush", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return r;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto r = io_error("rename into place", path);
    ::unlink(tmp.c_str());
    return r;
  }
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some filesystems refuse fsync on a directory
    ::close(dfd);
  }
  return {};
}

}  // namespace tessera
