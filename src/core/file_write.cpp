#include "core/file_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace tessera {
namespace {

Result<void> io_error(const std::string& what, const std::string& path) {
  return fail(Errc::io, "cannot " + what + " " + path + ": " + std::strerror(errno));
}

// A name no other writer (thread or process) of `path` uses at the same time.
std::string aside_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".new." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace

Result<void> replace_file(const std::string& path, const std::string& content, mode_t mode, Flush flush) {
  const std::string tmp = aside_name(path);
  ::unlink(tmp.c_str());  // left by a crashed process of the same pid
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return io_error("create", tmp);
  auto abandon = [&](const char* what, const std::string& name) {
    auto r = io_error(what, name);
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return r;
  };
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return abandon("write", tmp);
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || (flush == Flush::durably && ::fsync(fd) != 0)) return abandon("flush", tmp);
  ::close(fd);
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return abandon("rename into place", path);
  if (flush == Flush::durably) {
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);  // best effort: some filesystems refuse fsync on a directory
      ::close(dfd);
    }
  }
  return {};
}

}  // namespace tessera
