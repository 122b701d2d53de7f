// A session on a simulated node through the real NVML loader, as the product
// opens one with --sim: the simulated libnvidia-ml.so.1 reads its node
// directory from TESSERA_SIM_DIR.
#pragma once

#include <stdlib.h>

#include <string>

#include "nvml/session.hpp"

namespace tessera::testing {

inline Result<nvml::Session> open_simulated_nvml(const std::string& library, const std::string& node_dir) {
  ::setenv("TESSERA_SIM_DIR", node_dir.c_str(), 1);
  auto lib = nvml::Library::open(library);
  if (!lib) return unexpected(Error{Errc::io, lib.error().message});
  auto session = nvml::Session::open(std::move(*lib));
  if (!session) return unexpected(Error{Errc::io, session.error().message()});
  return std::move(*session);
}

}  // namespace tessera::testing
