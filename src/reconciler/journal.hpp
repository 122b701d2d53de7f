// A record of each apply in the state directory, written before every step
// and after it (to a temporary file, then renamed), so a crash or a failed
// NVML call leaves a record of what was done and what was not. The next
// apply reads it, says what was interrupted, and plans again from the GPUs'
// actual state: the plan converges from wherever the last run stopped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace tessera::reconciler {

struct JournalStep {
  uint32_t gpu = 0;
  std::string operation;  // human-readable, e.g. "GPU 0: create 3g.40gb@4"
  std::string status;     // pending | done | failed
  std::string detail;     // error message or created UUID
};

struct Journal {
  std::string config_file;
  std::string config_name;
  std::string started;   // UTC, ISO 8601
  std::string finished;  // empty while in progress
  std::string outcome;   // in-progress | success | failed | pending-reset
  std::string error;     // why it failed before any step ran
  std::vector<JournalStep> steps;

  bool interrupted() const { return outcome == "in-progress"; }
  size_t done() const;
};

class JournalFile {
 public:
  explicit JournalFile(std::string state_dir);
  [[nodiscard]] Result<std::optional<Journal>> load() const;
  [[nodiscard]] Result<void> save(const Journal& journal) const;
  // The node-label protocol value (nvidia.com/mig.config.state): pending | success | failed.
  [[nodiscard]] Result<void> write_state(const std::string& value) const;
  std::string journal_path() const { return dir_ + "/mig-journal.json"; }
  std::string state_path() const { return dir_ + "/mig.config.state"; }

 private:
  std::string dir_;
};

std::string utc_now();

}  // namespace tessera::reconciler
