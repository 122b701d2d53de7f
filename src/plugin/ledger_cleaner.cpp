#include "plugin/ledger_cleaner.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sharing/allocate.hpp"
#include "sharing/cdi.hpp"

namespace tessera::plugin {
namespace {

// Removes what directory `fd` holds, then nothing else: files and symlinks
// are unlinked, subdirectories entered (without following) and removed, at
// most `depth` levels down. False with `why` on the first failure.
bool empty_directory(int fd, int depth, std::string& why) {
  DIR* d = ::fdopendir(fd);
  if (!d) {
    why = std::strerror(errno);
    ::close(fd);
    return false;
  }
  bool ok = true;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) {
      if (depth <= 0) {
        why = name + ": nested too deep";
        ok = false;
        break;
      }
      const int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) why = name + ": " + std::strerror(errno);
      else if (empty_directory(sub, depth - 1, why) && ::unlinkat(::dirfd(d), e->d_name, AT_REMOVEDIR) != 0)
        why = name + ": " + std::strerror(errno);
      if (!why.empty()) {
        ok = false;
        break;
      }
    } else if (::unlinkat(::dirfd(d), e->d_name, 0) != 0) {
      why = name + ": " + std::strerror(errno);
      ok = false;
      break;
    }
  }
  ::closedir(d);  // closes fd
  return ok;
}

}  // namespace

std::set<std::string> held_ledger_keys(const std::vector<PodDevices>& pods) {
  std::set<std::string> keys;
  for (const auto& pod : pods)
    for (const auto& c : pod.containers)
      for (const auto& r : c.resources) keys.insert(sharing::ledger_key(r.resource, r.ids));
  return keys;
}

bool is_ledger_key(const std::string& name) {
  if (name.size() < 18 || name.size() > 48 + 17) return false;
  const std::size_t dash = name.size() - 17;
  if (name[dash] != '-') return false;
  for (std::size_t i = 0; i < dash; ++i) {
    const char c = name[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  }
  for (std::size_t i = dash + 1; i < name.size(); ++i)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
  return true;
}

// Whether a live process holds the ledger in directory `dir_fd`: each one
// holds an open-file-description lock on its slot's byte of `ledger`
// (src/cuda_quota/ledger.hpp), which the kernel drops when it dies. Only the
// lock table is asked; the file's contents are never read.
bool ledger_in_use(int dir_fd) {
  const int fd = ::openat(dir_fd, "ledger", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  bool held = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    struct flock probe {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    probe.l_start = 0;
    probe.l_len = 0;  // the whole file
    held = ::fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  }
  ::close(fd);
  return held;
}

LedgerSweep remove_stale_ledgers(const std::string& root, const std::set<std::string>& held,
                                 std::chrono::system_clock::time_point now, std::chrono::seconds grace,
                                 const std::string& cdi_spec_dir) {
  LedgerSweep out;
  const int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root_fd < 0) {
    if (errno != ENOENT) out.errors.push_back(root + ": " + std::strerror(errno));
    return out;
  }
  DIR* d = ::fdopendir(::dup(root_fd));
  std::vector<std::string> names;
  if (d) {
    while (dirent* e = ::readdir(d))
      if (is_ledger_key(e->d_name)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  for (const auto& key : names) {
    if (held.contains(key)) continue;
    struct stat st {};
    if (::fstatat(root_fd, key.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISLNK(st.st_mode)) {  // not one the plugin made: never followed, removed as a link
      if (::unlinkat(root_fd, key.c_str(), 0) == 0) out.removed.push_back(key);
      continue;
    }
    if (!S_ISDIR(st.st_mode)) continue;
    const auto changed = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
    if (now - changed < grace) {
      out.young.push_back(key);
      continue;
    }
    const int fd = ::openat(root_fd, key.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && ledger_in_use(fd)) {  // a process the kubelet does not list (an init container) still holds it
      ::close(fd);
      out.in_use.push_back(key);
      continue;
    }
    std::string why;
    if (fd < 0) why = std::strerror(errno);
    else if (empty_directory(fd, 2, why) && ::unlinkat(root_fd, key.c_str(), AT_REMOVEDIR) != 0) why = std::strerror(errno);
    if (why.empty()) out.removed.push_back(key);
    else out.errors.push_back(root + "/" + key + ": " + why);
  }
  ::close(root_fd);
  if (!cdi_spec_dir.empty())
    for (const auto& key : out.removed) {
      const std::string spec = cdi_spec_dir + "/" + sharing::quota_cdi_file(key);
      if (::unlink(spec.c_str()) != 0 && errno != ENOENT) out.errors.push_back(spec + ": " + std::strerror(errno));
    }
  return out;
}

Result<LedgerSweep> sweep_ledgers(const std::string& root, const std::string& pod_resources_socket,
                                  std::chrono::milliseconds timeout, std::chrono::seconds grace,
                                  const std::string& cdi_spec_dir) {
  auto pods = list_pod_resources(pod_resources_socket, timeout);
  if (!pods) return unexpected(pods.error());
  return remove_stale_ledgers(root, held_ledger_keys(*pods), std::chrono::system_clock::now(), grace, cdi_spec_dir);
}

LedgerSweeper::LedgerSweeper(Options options) : options_(std::move(options)), thread_([this] { loop(); }) {}

LedgerSweeper::~LedgerSweeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LedgerSweeper::loop() {
  std::string last_error;
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto sweep = sweep_ledgers(options_.root, options_.pod_resources_socket, options_.timeout, options_.grace,
                               options_.cdi_spec_dir);
    std::string error;
    if (!sweep) {
      error = "stale quota ledgers not removed: " + sweep.error().message;
    } else {
      for (const auto& key : sweep->removed)
        spdlog::info("removed the quota ledger {}/{}: no container holds it", options_.root, key);
      for (const auto& key : sweep->in_use)
        spdlog::debug("kept the quota ledger {}/{}: the kubelet lists no container for it (an init container?), "
                      "but a live process holds it", options_.root, key);
      for (const auto& e : sweep->errors) error += (error.empty() ? "cannot remove stale quota ledgers: " : "; ") + e;
    }
    if (!error.empty() && error != last_error) spdlog::warn("{}", error);
    last_error = error;
    lock.lock();
    cv_.wait_for(lock, options_.interval, [this] { return stop_; });
  }
}

}  // namespace tessera::plugin
