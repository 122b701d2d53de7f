// Small text helpers shared by messages.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tessera {

// "a, b, c"
std::string join(std::span<const std::string> items, std::string_view separator = ", ");

}  // namespace tessera
