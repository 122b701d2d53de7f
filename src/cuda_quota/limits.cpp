// The limits file: see limits.hpp and src/cuda_quota/env.h.
#include "cuda_quota/limits.hpp"

#include <cstdio>
#include <cstring>

namespace tessera::quota {
namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool starts_with(const char* p, std::size_t n, const char* prefix) {
  const std::size_t m = std::strlen(prefix);
  return n >= m && std::memcmp(p, prefix, m) == 0;
}

// Splits off the text up to the next space (or the end) as a field.
bool next_field(const char*& p, const char* end, const char*& field, std::size_t& length) {
  if (p >= end) return false;
  field = p;
  while (p < end && *p != ' ') ++p;
  length = static_cast<std::size_t>(p - field);
  if (p < end) ++p;  // the separating space; a trailing one leaves an empty field next
  return length > 0;
}

}  // namespace

bool parse_u64(const char* p, std::size_t n, std::uint64_t& out) {
  if (n == 0) return false;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
    const auto digit = static_cast<std::uint64_t>(p[i] - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  out = v;
  return true;
}

bool uuid_hex(const char* text, std::size_t length, char* digits) {
  if (length < 5 || length >= kUuidBytes) return false;
  if (std::memcmp(text, "GPU-", 4) != 0 && std::memcmp(text, "MIG-", 4) != 0) return false;
  int n = 0;
  bool hex_only = true;
  for (std::size_t i = 4; i < length; ++i) {
    const char c = text[i];
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && c != '-' && c != '/') return false;
    if (c == '-') continue;
    if (!is_hex(c) || n == 32) {
      hex_only = false;
      continue;
    }
    if (digits) digits[n] = static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    ++n;
  }
  if (digits) digits[hex_only && n == 32 ? 32 : 0] = '\0';
  return true;
}

bool valid_key(const char* key, std::size_t length) {
  if (length == 0 || length >= kKeyBytes) return false;
  for (std::size_t i = 0; i < length; ++i) {
    const char c = key[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

const char* text_file_problem(const char* text, std::size_t size) {
  if (size == 0) return "it is empty";
  if (std::memchr(text, '\0', size)) return "it holds a NUL byte";
  if (text[size - 1] != '\n') return "its last line does not end with a newline";
  return nullptr;
}

bool refuse_line(char* why, std::size_t why_size, unsigned line, const char* problem) {
  if (line) std::snprintf(why, why_size, "line %u %s", line, problem);
  else std::snprintf(why, why_size, "%s", problem);
  return false;
}

bool parse_limits(const char* text, std::size_t size, Limits& out, char* why, std::size_t why_size) {
  out = Limits{};
  auto fail = [&](unsigned line, const char* problem) { return refuse_line(why, why_size, line, problem); };
  if (size > kLimitsMaxBytes) {
    char problem[96];
    std::snprintf(problem, sizeof problem, "it is %zu bytes, more than a limits file can be (%zu)", size, kLimitsMaxBytes);
    return fail(0, problem);
  }
  if (const char* problem = text_file_problem(text, size)) return fail(0, problem);
  bool have_key = false;
  unsigned line = 0;
  for (const char* p = text; p < text + size;) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(text + size - p)));
    const std::size_t n = static_cast<std::size_t>(eol - p);
    ++line;
    const char* end = p + n;
    const char* at = p;
    p = eol + 1;
    if (line == 1) {
      if (n == 16 && std::memcmp(at, "tessera-limits 1", 16) == 0) continue;
      if (starts_with(at, n, "tessera-limits ")) return fail(line, "names a format version other than 1");
      return fail(line, "is not \"tessera-limits 1\": not a tessera limits file");
    }
    if (n == 0) return fail(line, "is empty");
    if (at[0] == '#') continue;
    for (const char* c = at; c < end; ++c)
      if (static_cast<unsigned char>(*c) < 0x20 || static_cast<unsigned char>(*c) >= 0x7f)
        return fail(line, "holds a control or non-ASCII character");
    if (starts_with(at, n, "key ")) {
      if (have_key) return fail(line, "gives the key a second time");
      const char* key = at + 4;
      const std::size_t length = static_cast<std::size_t>(end - key);
      if (!valid_key(key, length)) return fail(line, "has a key that is not 1-127 of [A-Za-z0-9._-]");
      std::memcpy(out.key, key, length);
      out.key[length] = '\0';
      have_key = true;
      continue;
    }
    if (at[0] < '0' || at[0] > '9') return fail(line, "is neither \"key <key>\" nor \"<k> <uuid> <bytes>\"");
    if (*(end - 1) == ' ') return fail(line, "ends with a space");
    const char* field = nullptr;
    std::size_t length = 0;
    std::uint64_t k = 0;
    if (!next_field(at, end, field, length) || !parse_u64(field, length, k) || (length > 1 && field[0] == '0'))
      return fail(line, "does not start with a device index");
    if (k != out.device_count) return fail(line, "is out of order: devices are numbered 0, 1, ... one line each");
    if (out.device_count == kMaxDevices) return fail(line, "names more than 16 devices");
    LimitDevice& d = out.devices[out.device_count];
    if (!next_field(at, end, field, length) || !uuid_hex(field, length, nullptr))
      return fail(line, "has no GPU or MIG UUID after its index");
    std::memcpy(d.uuid, field, length);
    d.uuid[length] = '\0';
    if (!next_field(at, end, field, length) || !parse_u64(field, length, d.quota))
      return fail(line, "has no plain decimal number of bytes after its UUID");
    if (at < end) {
      if (!next_field(at, end, field, length) || !starts_with(field, length, "context=") ||
          !parse_u64(field + 8, length - 8, d.context))
        return fail(line, "has something after its bytes other than \"context=<bytes>\"");
      if (at < end) return fail(line, "has more fields than \"<k> <uuid> <bytes> context=<bytes>\"");
    }
    ++out.device_count;
  }
  if (!have_key) return fail(0, "it has no \"key\" line");
  if (out.device_count == 0) return fail(0, "it names no device");
  return true;
}

std::size_t format_limits(const Limits& in, char* out, std::size_t size) {
  if (in.device_count == 0 || in.device_count > kMaxDevices) return 0;
  const std::size_t key_length = strnlen(in.key, kKeyBytes);
  if (!valid_key(in.key, key_length)) return 0;
  int n = std::snprintf(out, size, "tessera-limits 1\nkey %s\n", in.key);
  if (n < 0 || static_cast<std::size_t>(n) >= size) return 0;
  std::size_t used = static_cast<std::size_t>(n);
  for (std::uint32_t k = 0; k < in.device_count; ++k) {
    const LimitDevice& d = in.devices[k];
    if (!uuid_hex(d.uuid, strnlen(d.uuid, kUuidBytes), nullptr)) return 0;
    if (d.context)
      n = std::snprintf(out + used, size - used, "%u %s %llu context=%llu\n", k, d.uuid,
                        static_cast<unsigned long long>(d.quota), static_cast<unsigned long long>(d.context));
    else
      n = std::snprintf(out + used, size - used, "%u %s %llu\n", k, d.uuid, static_cast<unsigned long long>(d.quota));
    if (n < 0 || static_cast<std::size_t>(n) >= size - used) return 0;
    used += static_cast<std::size_t>(n);
  }
  return used <= kLimitsMaxBytes ? used : 0;
}

}  // namespace tessera::quota
