// A simulated node for a test: made by the real `tessera sim create` in a
// temporary directory, opened through the production loader and wrapper.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "nvml/session.hpp"
#include "support/run.hpp"

namespace tessera::testing {

inline const std::string kBin = TESSERA_BIN;
inline const std::string kSimLibrary = TESSERA_SIM_LIBRARY;

class SimNode {
 public:
  // `tessera sim create DIR --gpu MODEL --count N` plus `extra` arguments.
  SimNode(const std::string& model, uint32_t count, const std::vector<std::string>& extra = {});
  const std::string& dir() const { return dir_; }

  // A session on this node through nvml::Library::open, as production opens a driver.
  nvml::Session open() const;
  // Runs `tessera ARGS...` (with --sim DIR appended where `with_sim`).
  RunResult tessera(std::vector<std::string> args, bool with_sim = true) const;
  // Runs `tessera sim SUB DIR ARGS...` and expects it to succeed.
  void drive(const std::string& sub, const std::vector<std::string>& args) const;

 private:
  TempDir tmp_;
  std::string dir_;
};

// gtest assertion helpers for nvml::Result.
#define EXPECT_NVML_OK(expr)                                                           \
  do {                                                                                 \
    auto&& nvml_ok_ = (expr);                                                          \
    EXPECT_TRUE(nvml_ok_.has_value()) << (nvml_ok_ ? "" : nvml_ok_.error().message()); \
  } while (0)

// The value of a successful nvml::Result, or a failed test.
template <class T>
T value_of(tessera::nvml::Result<T> r, const char* what) {
  if (!r) {
    ADD_FAILURE() << what << ": " << r.error().message();
    throw std::runtime_error(r.error().message());
  }
  return std::move(*r);
}
#define OK(expr) ::tessera::testing::value_of((expr), #expr)

}  // namespace tessera::testing
