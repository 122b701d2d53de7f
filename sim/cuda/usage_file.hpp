// One device's memory usage shared by the processes of a TESSERA_SIM_CUDA_DIR:
// `<dir>/<uuid>.usage`, text, replaced whole by rename under an exclusive
// flock of `<dir>/<uuid>.lock`:
//
//   peak <bytes>
//   <pid> <start time> <bytes>      one line per process holding memory
//
// A process is identified by pid plus its start time (field 22 of
// /proc/<pid>/stat), so a reused pid is not mistaken for the old process.
// Lines of processes that are gone (or zombies) are dropped at every update:
// the driver frees a dead process's memory.
#pragma once

#include <cstdint>
#include <string>

namespace tessera_cuda_sim {

class UsageFile {
 public:
  UsageFile(std::string dir, const std::string& uuid);

  struct Result {
    bool ok = false;       // false: an I/O or format error (message in `error`)
    bool refused = false;  // the charge would pass `capacity`; nothing changed
    std::uint64_t own = 0, all = 0, peak = 0;
    std::string error;
  };
  // Adds `delta` to this process's bytes unless the total would pass
  // `capacity` (a negative delta never fails), and reports the figures after.
  Result update(std::int64_t delta, std::uint64_t capacity) const;

 private:
  std::string data_, lock_, tmp_;
};

// This process's start time in clock ticks since boot; 0 if unreadable.
std::uint64_t process_start_time(long pid);

}  // namespace tessera_cuda_sim
