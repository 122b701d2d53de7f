#include "usage_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

namespace tessera_cuda_sim {

namespace {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool read_all(int fd, std::string& out) {
  out.clear();
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Start time and state of `pid` from /proc/<pid>/stat: fields 3 (state) and
// 22 (starttime), counted after the parenthesised command name (proc(5)).
bool read_stat(long pid, char& state, std::uint64_t& start) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return false;
  std::string text;
  if (!read_all(fd.fd, text)) return false;
  auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return false;
  const char* p = text.c_str() + close_paren + 1;
  // Field 3 is the first after ") ".
  if (std::sscanf(p, " %c", &state) != 1) return false;
  int field = 3;
  while (*p && field < 22) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
    ++field;
  }
  return std::sscanf(p, " %" SCNu64, &start) == 1;
}

bool alive(long pid, std::uint64_t start) {
  char state = 0;
  std::uint64_t now_start = 0;
  if (!read_stat(pid, state, now_start)) return false;
  return now_start == start && state != 'Z' && state != 'X' && state != 'x';
}

}  // namespace

std::uint64_t process_start_time(long pid) {
  char state = 0;
  std::uint64_t start = 0;
  return read_stat(pid, state, start) ? start : 0;
}

UsageFile::UsageFile(std::string dir, const std::string& uuid)
    : data_(dir + "/" + uuid + ".usage"), lock_(dir + "/" + uuid + ".lock"), tmp_(dir + "/" + uuid + ".usage.tmp") {}

UsageFile::Result UsageFile::update(std::int64_t delta, std::uint64_t capacity) const {
  Result r;
  auto fail = [&](const std::string& what) {
    r.ok = false;
    r.error = what + ": " + std::strerror(errno);
    return r;
  };
  Fd lock(::open(lock_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (lock.fd < 0) return fail(lock_);
  while (::flock(lock.fd, LOCK_EX) != 0)
    if (errno != EINTR) return fail("flock " + lock_);

  // Read the current state (an absent file is an empty one).
  std::string text;
  {
    Fd data(::open(data_.c_str(), O_RDONLY | O_CLOEXEC));
    if (data.fd < 0 && errno != ENOENT) return fail(data_);
    if (data.fd >= 0 && !read_all(data.fd, text)) return fail(data_);
  }
  std::uint64_t peak = 0;
  std::map<std::pair<long, std::uint64_t>, std::uint64_t> procs;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    long pid = 0;
    std::uint64_t start = 0, bytes = 0;
    if (std::sscanf(line.c_str(), "peak %" SCNu64, &peak) == 1) continue;
    if (std::sscanf(line.c_str(), "%ld %" SCNu64 " %" SCNu64, &pid, &start, &bytes) != 3) {
      errno = EINVAL;
      return fail(data_ + ": bad line '" + line.substr(0, 60) + "'");
    }
    procs[{pid, start}] = bytes;
  }

  static long cached_pid = 0;  // the caller holds the driver's mutex
  static std::uint64_t cached_start = 0;
  long me = static_cast<long>(::getpid());
  if (cached_pid != me) {
    cached_pid = me;
    cached_start = process_start_time(me);
  }
  const std::pair<long, std::uint64_t> key{me, cached_start};

  std::uint64_t others = 0;
  for (auto it = procs.begin(); it != procs.end();) {
    if (it->first != key && !alive(it->first.first, it->first.second)) {
      it = procs.erase(it);
      continue;
    }
    if (it->first != key) others += it->second;
    ++it;
  }
  std::uint64_t own = procs.contains(key) ? procs[key] : 0;
  if (delta > 0) {
    auto add = static_cast<std::uint64_t>(delta);
    if (others + own > capacity || add > capacity - others - own) {
      r.refused = true;
    } else {
      own += add;
    }
  } else {
    auto sub = static_cast<std::uint64_t>(-(delta + 1)) + 1;
    own = sub > own ? 0 : own - sub;
  }
  if (own) procs[key] = own;
  else procs.erase(key);
  std::uint64_t all = others + own;
  if (all > peak) peak = all;

  std::string out = "peak " + std::to_string(peak) + "\n";
  for (const auto& [k, bytes] : procs)
    out += std::to_string(k.first) + " " + std::to_string(k.second) + " " + std::to_string(bytes) + "\n";
  {
    Fd tmp(::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
    if (tmp.fd < 0 || !write_all(tmp.fd, out)) return fail(tmp_);
  }
  if (::rename(tmp_.c_str(), data_.c_str()) != 0) return fail("rename " + tmp_);
  r.ok = true;
  r.own = own;
  r.all = all;
  r.peak = peak;
  return r;
}

}  // namespace tessera_cuda_sim
