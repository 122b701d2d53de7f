// A progress line for long work (planning, a MIG change, a fleet plan): on
// standard error, refreshed a few times a second, only when standard error is
// a terminal (TESSERA_PROGRESS=always or never overrides), erased when the
// work ends, so piped output and logs stay clean.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace tessera::cli {

class Progress {
 public:
  // `what` ("planning"), and the time limit the work has, if any (shown as "of N s").
  explicit Progress(std::string what, double limit_seconds = 0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // What is being done now ("step 3 of 16: create GI 1g.10gb on GPU 0").
  void set(std::string detail);

 private:
  void draw(bool last);
  std::string what_;
  double limit_;
  std::chrono::steady_clock::time_point started_;
  bool shown_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string detail_;
  bool stop_ = false;
  size_t width_ = 0;
  std::thread ticker_;
};

}  // namespace tessera::cli
