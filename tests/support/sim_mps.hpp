// Test clean-up for the simulated MPS control daemon (sim/mps): whatever a
// failing test left running under `root` (each daemon's state file names its
// pid while it runs) is killed, so no daemon outlives the test.
#pragma once

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace tessera::testing {

inline void kill_simulated_mps_daemons(const std::string& root) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.path().filename() == "tessera-sim-mps.json") {
      std::ifstream in(e.path());
      auto st = nlohmann::json::parse(in, nullptr, false);
      if (st.is_object() && st.value("running", false) && st.value("pid", -1) > 1) ::kill(st.value("pid", -1), SIGKILL);
    }
}

}  // namespace tessera::testing
