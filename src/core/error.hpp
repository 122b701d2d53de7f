// Errors are values: every fallible function returns Result<T>, whose error
// carries a typed code and a message that names the input.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "core/expected.hpp"

namespace tessera {

enum class Errc {
  invalid_argument,  // the caller passed something outside the allowed range
  not_found,         // a named thing (GPU model, profile, file) does not exist
  parse,             // input text is malformed
  validation,        // input is well-formed but breaks a rule
  io,                // the operating system refused (open, read, rename, ...)
  driver,            // the GPU driver (NVML) returned an error
  conflict,          // the request collides with existing state
  unsupported,       // valid, but not something this build or GPU can do
  timeout,           // no answer within the time allowed (not a proof that none exists)
  internal,          // a broken invariant: a bug in tessera
};

std::string_view errc_name(Errc code);

struct Error {
  Errc code = Errc::internal;
  std::string message;
};

template <class T>
using Result = expected<T, Error>;

// `return fail(Errc::not_found, "no GPU model named " + name);`
[[nodiscard]] inline unexpected<Error> fail(Errc code, std::string message) {
  return unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace tessera
