#include "plugin/ledger_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tessera::plugin {
namespace {

constexpr mode_t kLedgerDirMode = 01777;

unexpected<Error> refused(const std::string& path, const std::string& why) {
  return fail(Errc::io, "cannot prepare the quota ledger directory " + path + ": " + why);
}

}  // namespace

Result<void> ensure_ledger_dir(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  if (::mkdir(path.c_str(), 0700) != 0) {
    int err = errno;
    if (err == ENOENT && !parent.empty()) {
      // The ledger root itself is missing: make it, then the directory.
      std::error_code ec;
      std::filesystem::create_directories(parent, ec);
      if (ec) return refused(path, "cannot create " + parent.string() + ": " + ec.message());
      err = ::mkdir(path.c_str(), 0700) == 0 ? 0 : errno;
    }
    if (err != 0 && err != EEXIST) {
      std::string why = std::strerror(err);
      if (err == EACCES || err == EPERM || err == EROFS) why = parent.string() + " is not writable (" + why + ")";
      if (err == ENOTDIR) why = "a part of " + parent.string() + " is not a directory";
      return refused(path, why);
    }
  }
  // Opened without following a symlink: a link planted at the path would
  // otherwise hand the container a directory of its choosing.
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return refused(path, "it is a symlink (refused: a ledger directory is never followed through a link)");
    if (err == ENOTDIR) return refused(path, "it exists and is not a directory");
    return refused(path, std::strerror(err));
  }
  struct stat st{};
  Result<void> out;
  if (::fstat(fd, &st) != 0) {
    out = refused(path, std::strerror(errno));
  } else if ((st.st_mode & 07777) != kLedgerDirMode && ::fchmod(fd, kLedgerDirMode) != 0) {
    out = refused(path, std::string("cannot set mode 1777: ") + std::strerror(errno));
  }
  ::close(fd);
  return out;
}

Result<void> ensure_preload_file(const std::string& path, const std::string& content) {
  auto refuse = [&](const std::string& why) {
    return fail(Errc::io, "cannot write the quota library's preload list " + path + ": " + why);
  };
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) return refuse("it is a symlink (refused)");
    if (!S_ISREG(st.st_mode)) return refuse("it exists and is not a regular file");
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      std::string have(static_cast<size_t>(st.st_size), '\0');
      const ssize_t n = st.st_size > 0 ? ::read(fd, have.data(), have.size()) : 0;
      ::close(fd);
      if (n == st.st_size && have == content && (st.st_mode & 07777) == 0644) return {};
    }
  }
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) return refuse("cannot create " + parent.string() + ": " + ec.message());
  const std::string aside = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return refuse(parent.string() + " is not writable (" + std::strerror(errno) + ")");
  const bool written = ::fchmod(fd, 0644) == 0 &&
                       ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  const int err = errno;
  ::close(fd);
  if (!written || ::rename(aside.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(written ? errno : err);
    ::unlink(aside.c_str());
    return refuse(why);
  }
  return {};
}

}  // namespace tessera::plugin
