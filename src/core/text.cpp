#include "core/text.hpp"

namespace tessera {

std::string join(std::span<const std::string> items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace tessera
