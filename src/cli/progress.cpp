#include "cli/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/text.hpp"

namespace tessera::cli {

Progress::Progress(std::string what, double limit_seconds)
    : what_(std::move(what)), limit_(limit_seconds), started_(std::chrono::steady_clock::now()) {
  const char* mode = std::getenv("TESSERA_PROGRESS");
  const std::string_view m = mode ? mode : "auto";
  shown_ = m == "always" || (m != "never" && isatty(STDERR_FILENO) == 1);
  if (!shown_) return;
  ticker_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      draw(false);
      cv_.wait_for(lock, std::chrono::milliseconds(250));
    }
  });
}

Progress::~Progress() {
  if (!shown_) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  ticker_.join();
  draw(true);
}

void Progress::set(std::string detail) {
  if (!shown_) return;
  std::lock_guard lock(mu_);
  detail_ = std::move(detail);
  draw(false);  // each step shows, however fast the steps come
}

void Progress::draw(bool last) {
  // Called with mu_ held (or after the ticker ended).
  if (last) {
    // Erased: what the command prints next starts on a clean line.
    std::fprintf(stderr, "\r%*s\r", int(width_), "");
    std::fflush(stderr);
    return;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string line = what_ + " " + format_seconds(s);
  if (limit_ > 0) line += " of " + format_seconds(limit_);
  if (!detail_.empty()) line += ": " + escape_control(detail_);
  if (line.size() > 100) line = line.substr(0, 97) + "...";
  const size_t pad = width_ > line.size() ? width_ - line.size() : 0;
  std::fprintf(stderr, "\r%s%*s", line.c_str(), int(pad), "");
  std::fflush(stderr);
  width_ = line.size();
}

}  // namespace tessera::cli
