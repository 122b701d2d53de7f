// Number options said in words: CLI11's own checks print a range up to
// 1.8e308 in full, and an unsigned option takes "-4" as 18446744073709551612.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

namespace tessera::cli {

// A whole number from `min` to `max` (decimal digits only: no sign, no
// fraction, no exponent), as "'-4' is not a whole number from 0 to 4294967295".
inline CLI::Validator whole_number(std::uint64_t min, std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
  const std::string range = max == std::numeric_limits<std::uint64_t>::max()
                                ? std::to_string(min) + " or more"
                                : "from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool digits = !text.empty() && text[0] != '+' && text[0] != '-';
        if (!digits || ec != std::errc() || end != text.data() + text.size() || v < min || v > max)
          return "'" + text + "' is not a whole number " + range;
        return {};
      },
      range);
}

// A number (a fraction allowed) above 0, or with `zero_too` at least 0.
inline CLI::Validator number_from_zero(bool zero_too) {
  const std::string what = zero_too ? "0 or more" : "greater than 0";
  return CLI::Validator(
      [zero_too, what](std::string& text) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v != v ||
            (zero_too ? v < 0 : v <= 0))
          return "'" + text + "' is not a number " + what;
        return {};
      },
      what);
}
inline CLI::Validator positive_number() { return number_from_zero(false); }
inline CLI::Validator non_negative_number() { return number_from_zero(true); }

}  // namespace tessera::cli
