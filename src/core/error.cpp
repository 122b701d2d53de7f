#include "core/error.hpp"

namespace tessera {

std::string_view errc_name(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return "invalid argument";
    case Errc::not_found: return "not found";
    case Errc::parse: return "parse error";
    case Errc::validation: return "invalid";
    case Errc::io: return "I/O error";
    case Errc::driver: return "driver error";
    case Errc::conflict: return "conflict";
    case Errc::unsupported: return "unsupported";
    case Errc::timeout: return "time limit reached";
    case Errc::internal: return "internal error";
  }
  return "unknown error";
}

}  // namespace tessera
