#include "core/units.hpp"
#include "core/text.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace tessera {

Result<uint64_t> parse_bytes(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  auto bad = [&](const std::string& why) {
    return fail(Errc::invalid_argument, quote(text) + " is not a byte size: " + why +
                                            " (examples: 14GiB, 32.5GiB, 512MiB, 80GB)");
  };
  if (s.empty()) return bad("it is empty");
  if (s.front() == '-') return bad("it is negative");
  size_t digits = 0;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.')) ++digits;
  if (digits == 0) return bad("it does not start with a number");
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + digits, value);
  if (ec != std::errc() || ptr != s.data() + digits) return bad("the number is malformed");
  std::string unit(s.substr(digits));
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double scale = 0;
  struct U { const char* name; double scale; };
  static constexpr U units[] = {
      {"", 1},           {"B", 1},
      {"Ki", 1024.0},    {"KiB", 1024.0},    {"Mi", 1048576.0}, {"MiB", 1048576.0},
      {"Gi", 1073741824.0}, {"GiB", 1073741824.0}, {"Ti", 1099511627776.0}, {"TiB", 1099511627776.0},
      {"kB", 1e3},       {"KB", 1e3},        {"MB", 1e6},        {"GB", 1e9},        {"TB", 1e12},
      {"k", 1e3},        {"M", 1e6},         {"G", 1e9},         {"T", 1e12},
  };
  for (const auto& u : units)
    if (unit == u.name) scale = u.scale;
  if (scale == 0) return bad("unknown unit " + quote(unit));
  double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes >= 1.8e19) return bad("it is too large");
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<uint64_t> parse_size(std::string_view text) {
  auto bytes = parse_bytes(text);
  if (!bytes) return bytes;
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (*bytes != 0 && !s.empty() && (std::isdigit(static_cast<unsigned char>(s.back())) || s.back() == '.')) {
    std::string number(s);
    while (!number.empty() && std::isspace(static_cast<unsigned char>(number.front()))) number.erase(0, 1);
    return fail(Errc::invalid_argument, quote(text) + " has no unit: write " + number + "GiB, " + number + "MiB or " +
                                            number + "B (a bare number would be " + number + " bytes)");
  }
  return bytes;
}

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  if (v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  std::string out = buf;
  // "1.50 GiB" -> "1.5 GiB"
  auto dot = out.find('.');
  if (dot != std::string::npos) {
    auto sp = out.find(' ');
    while (sp > dot + 1 && out[sp - 1] == '0') { out.erase(sp - 1, 1); --sp; }
  }
  return out;
}

}  // namespace tessera
