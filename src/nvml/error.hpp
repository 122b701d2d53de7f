// NVML errors as values: the return code NVML gave, the call that gave it and
// what it was about, so a message reads "nvmlDeviceCreateGpuInstanceWithPlacement
// (GPU-..., 1g.10gb at 3): NVML_ERROR_INSUFFICIENT_RESOURCES".
#pragma once

#include <string>
#include <string_view>

#include "core/error.hpp"
#include "nvml/abi.hpp"

namespace tessera::nvml {

using Return = abi::nvmlReturn_t;

// "NVML_ERROR_IN_USE"; "NVML_ERROR_<n>" for a code this build does not know.
std::string return_name(Return code);
// The code for a name such as "NVML_ERROR_UNKNOWN" or "UNKNOWN"; nothing when
// the name is not an NVML return code.
bool parse_return_name(std::string_view name, Return& code);

struct Error {
  Return code = abi::NVML_ERROR_UNKNOWN;
  std::string call;     // the NVML function, "nvmlDeviceGetCount_v2"
  std::string context;  // what it was asked about: a device UUID, a profile

  std::string message() const;
  // As tessera's general error: NOT_FOUND -> not_found, NOT_SUPPORTED ->
  // unsupported, IN_USE and INSUFFICIENT_RESOURCES -> conflict, ... driver.
  tessera::Error to_error() const;
};

template <class T>
using Result = expected<T, Error>;

[[nodiscard]] inline unexpected<Error> fail(Return code, std::string call, std::string context = {}) {
  return unexpected<Error>(Error{code, std::move(call), std::move(context)});
}

}  // namespace tessera::nvml
