#include "node_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tessera::sim {

namespace {

std::string errno_text() { return std::strerror(errno); }

// Holds flock(LOCK_EX) for a scope.
class ExclusiveLock {
 public:
  explicit ExclusiveLock(int fd) : fd_(fd) {
    while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~ExclusiveLock() { flock(fd_, LOCK_UN); }
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

 private:
  int fd_;
};

Result<std::string> read_all(int fd) {
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Errc::io, "cannot read the node file: " + errno_text());
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

Result<void> NodeStore::create(const std::string& dir, const Node& node) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(Errc::io, "cannot create " + dir + ": " + ec.message());
  if (std::filesystem::exists(dir + "/node.json")) return fail(Errc::conflict, dir + " already holds a simulated node");
  int lock_fd = ::open((dir + "/node.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return fail(Errc::io, "cannot create " + dir + "/node.lock: " + errno_text());
  NodeStore store(dir, lock_fd);
  ExclusiveLock lock(lock_fd);
  return store.write(node);
}

Result<std::unique_ptr<NodeStore>> NodeStore::open(const std::string& dir) {
  int lock_fd = ::open((dir + "/node.lock").c_str(), O_RDWR | O_CLOEXEC);
  if (lock_fd < 0) return fail(Errc::not_found, dir + " is not a simulated node (no node.lock: " + errno_text() + ")");
  std::unique_ptr<NodeStore> store(new NodeStore(dir, lock_fd));
  if (auto r = store->refresh(); !r) return unexpected<Error>(r.error());
  return store;
}

NodeStore::~NodeStore() {
  if (file_fd_ >= 0) ::close(file_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<void> NodeStore::refresh() {
  std::string path = dir_ + "/node.json";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(Errc::io, "cannot stat " + path + ": " + errno_text());
  if (cached_ && st.st_ino == cached_ino_ && st.st_dev == cached_dev_) return {};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(Errc::io, "cannot open " + path + ": " + errno_text());
  struct stat fst {};
  auto text = fstat(fd, &fst) == 0 ? read_all(fd) : fail(Errc::io, "cannot stat " + path + ": " + errno_text());
  if (!text) {
    ::close(fd);
    return unexpected<Error>(text.error());
  }
  auto node = node_from_json_text(*text);
  if (!node) {
    ::close(fd);
    return fail(node.error().code, path + ": " + node.error().message);
  }
  if (file_fd_ >= 0) ::close(file_fd_);
  file_fd_ = fd;
  cached_ino_ = fst.st_ino;
  cached_dev_ = fst.st_dev;
  cached_ = std::make_shared<const Node>(std::move(*node));
  return {};
}

Result<std::shared_ptr<const Node>> NodeStore::read() {
  if (auto r = refresh(); !r) return unexpected<Error>(r.error());
  return cached_;
}

Result<bool> NodeStore::update(const std::function<bool(Node&)>& change) {
  ExclusiveLock lock(lock_fd_);
  if (auto r = refresh(); !r) return unexpected<Error>(r.error());
  Node node = *cached_;
  if (!change(node)) return false;
  if (auto r = write(node); !r) return unexpected<Error>(r.error());
  return true;
}

Result<void> NodeStore::write(const Node& node) {
  std::string path = dir_ + "/node.json";
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(Errc::io, "cannot create " + tmp + ": " + errno_text());
  std::string text = to_json_text(node);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      return fail(Errc::io, "cannot write " + tmp + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(Errc::io, "cannot replace " + path + ": " + why);
  }
  // What we wrote is now the freshest node; keep it without re-reading.
  if (file_fd_ >= 0) ::close(file_fd_);
  file_fd_ = fd;
  cached_ino_ = st.st_ino;
  cached_dev_ = st.st_dev;
  cached_ = std::make_shared<const Node>(node);
  return {};
}

}  // namespace tessera::sim
