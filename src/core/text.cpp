#include "core/text.hpp"

#include <cstdint>
#include <cstdio>

namespace tessera {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when the bytes
// there are not one (stray continuation, overlong form, surrogate, beyond U+10FFFF, cut short).
size_t utf8_length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  uint8_t b = byte(i);
  size_t n = 0;
  uint32_t min = 0, cp = 0;
  if (b >= 0xC2 && b <= 0xDF) n = 2, min = 0x80, cp = b & 0x1F;
  else if (b >= 0xE0 && b <= 0xEF) n = 3, min = 0x800, cp = b & 0x0F;
  else if (b >= 0xF0 && b <= 0xF4) n = 4, min = 0x10000, cp = b & 0x07;
  else return 0;
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    uint8_t c = byte(i + k);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

std::string hex_escape(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(b));
  return buf;
}

// The next piece of escaped output for the input at text[i]; `consumed` is how
// many input bytes it stands for, `chars` how many characters it prints as.
std::string next_piece(std::string_view text, size_t i, size_t& consumed, size_t& chars) {
  auto b = static_cast<uint8_t>(text[i]);
  consumed = 1;
  auto piece = [&chars](std::string s) {
    chars = s.size();
    return s;
  };
  if (b == '\n') return piece("\\n");
  if (b == '\r') return piece("\\r");
  if (b == '\t') return piece("\\t");
  if (b < 0x20 || b == 0x7f) return piece(hex_escape(b));
  if (b < 0x80) return piece(std::string(1, static_cast<char>(b)));
  size_t n = utf8_length(text, i);
  if (n == 0) return piece(hex_escape(b));
  // C1 controls (U+0080..U+009F) act on terminals too.
  if (n == 2 && b == 0xC2 && static_cast<uint8_t>(text[i + 1]) < 0xA0) {
    consumed = 2;
    chars = 8;
    return hex_escape(b) + hex_escape(static_cast<uint8_t>(text[i + 1]));
  }
  consumed = n;
  chars = 1;
  return std::string(text.substr(i, n));
}

}  // namespace

std::string join(std::span<const std::string> items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string escape_control(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t consumed = 0, chars = 0;
  for (size_t i = 0; i < text.size(); i += consumed) out += next_piece(text, i, consumed, chars);
  return out;
}

std::string excerpt(std::string_view text, size_t max_chars) {
  std::string out;
  size_t printed = 0, consumed = 0, chars = 0;
  for (size_t i = 0; i < text.size(); i += consumed) {
    std::string piece = next_piece(text, i, consumed, chars);
    if (printed + chars > max_chars) return out + "…";
    out += piece;
    printed += chars;
  }
  return out;
}

std::string quote(std::string_view text, size_t max_chars) { return "'" + excerpt(text, max_chars) + "'"; }

std::string format_seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", seconds);
  return buf;
}

std::string counted(size_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

}  // namespace tessera
