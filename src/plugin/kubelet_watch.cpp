#include "plugin/kubelet_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "plugin/registration.hpp"

namespace tessera::plugin {

Result<std::unique_ptr<KubeletWatch>> KubeletWatch::start(std::string dir, std::function<void()> on_created) {
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return fail(Errc::io, std::string("inotify_init1: ") + std::strerror(errno));
  if (inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
    int err = errno;
    close(fd);
    return fail(Errc::io, "cannot watch " + dir + ": " + std::strerror(err));
  }
  int stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) {
    close(fd);
    return fail(Errc::io, std::string("eventfd: ") + std::strerror(errno));
  }
  std::unique_ptr<KubeletWatch> w(new KubeletWatch(fd, stop, std::move(on_created)));
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

KubeletWatch::KubeletWatch(int inotify_fd, int stop_fd, std::function<void()> on_created)
    : inotify_fd_(inotify_fd), stop_fd_(stop_fd), on_created_(std::move(on_created)) {}

void KubeletWatch::run() {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    ssize_t n = read(inotify_fd_, buf, sizeof buf);
    bool created = false;
    for (ssize_t off = 0; off < n;) {
      auto* ev = reinterpret_cast<inotify_event*>(buf + off);
      if (ev->len > 0 && std::strcmp(ev->name, kKubeletSocket) == 0) created = true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
    if (created) on_created_();
  }
}

KubeletWatch::~KubeletWatch() {
  uint64_t one = 1;
  [[maybe_unused]] auto w = write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  close(inotify_fd_);
  close(stop_fd_);
}

}  // namespace tessera::plugin
