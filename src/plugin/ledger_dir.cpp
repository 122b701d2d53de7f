#include "plugin/ledger_dir.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/file_write.hpp"
#include "cuda_quota/env.h"
#include "cuda_quota/driver_limits.hpp"
#include "cuda_quota/ledger.hpp"
#include "cuda_quota/limits.hpp"

namespace tessera::plugin {
namespace {

// Not writable by anyone but the plugin: a container's processes charge the
// ledger through its file mount, and cannot replace it.
constexpr mode_t kLedgerDirMode = 0755;

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
  } else if ((st.st_uid != ::geteuid() || st.st_gid != ::getegid()) && ::fchown(fd, ::geteuid(), ::getegid()) != 0) {
    out = refused(path, std::string("cannot make it the plugin's own: ") + std::strerror(errno));
  } else if ((st.st_mode & 07777) != kLedgerDirMode && ::fchmod(fd, kLedgerDirMode) != 0) {
    out = refused(path, std::string("cannot set mode 0755: ") + std::strerror(errno));
  }
  ::close(fd);
  return out;
}

Result<void> prepare_quota_files(const std::string& dir, const std::string& key,
                                 std::span<const sharing::QuotaDevice> devices) {
  if (auto made = ensure_ledger_dir(dir); !made) return made;
  if (devices.empty() || devices.size() > quota::kMaxDevices)
    return fail(Errc::invalid_argument, "quota files in " + dir + ": " + std::to_string(devices.size()) +
                                            " devices, expected 1 to " + std::to_string(quota::kMaxDevices));
  std::vector<quota::DeviceQuota> ledger_devices;
  quota::Limits limits;
  limits.device_count = static_cast<std::uint32_t>(devices.size());
  std::snprintf(limits.key, sizeof limits.key, "%s", key.c_str());
  for (std::size_t k = 0; k < devices.size(); ++k) {
    ledger_devices.push_back({devices[k].uuid, devices[k].quota, devices[k].memory});
    std::snprintf(limits.devices[k].uuid, sizeof limits.devices[k].uuid, "%s", devices[k].uuid.c_str());
    limits.devices[k].quota = devices[k].quota;
    limits.devices[k].context = devices[k].context;
  }
  char text[quota::kLimitsMaxBytes + 1];
  const std::size_t n = quota::format_limits(limits, text, sizeof text);
  if (n == 0)
    return fail(Errc::invalid_argument, "quota files in " + dir + ": the key or a device UUID cannot go in a limits file");
  const quota::Prepared ledger = quota::prepare_ledger({dir, key, ledger_devices});
  if (!ledger.ok) return fail(Errc::io, std::string("cannot prepare the quota ") + ledger.message);
  if (ledger.message[0]) spdlog::warn("{}", ledger.message);
  // What the driver held for an earlier container of this key is not this
  // one's: its memory hook records it afresh.
  const std::string record = dir + "/" + quota::kDriverLimitsFileName;
  if (::unlink(record.c_str()) != 0 && errno != ENOENT)
    return fail(Errc::io, "cannot remove the driver-limits record " + record + ": " + std::strerror(errno));
  // Not flushed to disk: a container outlives no reboot, and Allocate waits on it.
  if (auto r = replace_file(dir + "/" TESSERA_LIMITS_FILE_NAME, std::string(text, n), 0644, Flush::no); !r)
    return fail(Errc::io, "cannot write the quota limits file: " + r.error().message);
  return {};
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
