// A session on a simulated node through the real NVML loader, as the product
// opens one with --sim: the simulated libnvidia-ml.so.1 reads its node
// directory from TESSERA_SIM when NVML is initialised.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

#include "nvml/session.hpp"

namespace tessera::testing {

// Sets TESSERA_SIM for a scope and puts back what was there. The variable is
// also the command line's --sim (and the DIR of `tessera sim`), so it is set
// only while NVML is initialised, never left for the `tessera` processes a
// test starts afterwards: each of those names its own node.
class ScopedSimEnv {
 public:
  explicit ScopedSimEnv(const std::string& dir) {
    if (const char* old = ::getenv("TESSERA_SIM")) old_ = old;
    ::setenv("TESSERA_SIM", dir.c_str(), 1);
  }
  ~ScopedSimEnv() {
    if (old_)
      ::setenv("TESSERA_SIM", old_->c_str(), 1);
    else
      ::unsetenv("TESSERA_SIM");
  }
  ScopedSimEnv(const ScopedSimEnv&) = delete;
  ScopedSimEnv& operator=(const ScopedSimEnv&) = delete;

 private:
  std::optional<std::string> old_;
};

inline Result<nvml::Session> open_simulated_nvml(const std::string& library, const std::string& node_dir) {
  ScopedSimEnv env(node_dir);
  auto lib = nvml::Library::open(library);
  if (!lib) return unexpected(Error{Errc::io, lib.error().message});
  auto session = nvml::Session::open(std::move(*lib));
  if (!session) return unexpected(Error{Errc::io, session.error().message()});
  return std::move(*session);
}

}  // namespace tessera::testing
