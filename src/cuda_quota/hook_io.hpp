// What tessera's OCI hooks (tessera-memory-hook, tessera-cdi-hook) share:
// reading their input whole and just enough JSON to find a few members of an
// OCI state (runtime-spec runtime.md, "State") or of a bundle's config.json.
// Like the hooks: glibc only, no heap, no exceptions.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace tessera::hook {

// A printf-style message in `line`, then "<program>: <level>: <message>" on
// stderr (a runtime shows a hook's output when the hook fails).
inline void vsay(const char* program, const char* level, char* line, std::size_t size, const char* format,
                 va_list args) {
  std::vsnprintf(line, size, format, args);
  std::fprintf(stderr, "%s: %s: %s\n", program, level, line);
}

// Reads all of `fd` into `buffer`; the size, or -1 past `capacity` (the
// rest is read and dropped, so that the writer never meets a closed pipe).
inline long read_all(int fd, char* buffer, std::size_t capacity) {
  std::size_t used = 0;
  for (;;) {
    if (used == capacity) {
      char extra[4096];
      bool over = false;
      for (;;) {
        const ssize_t more = ::read(fd, extra, sizeof extra);
        if (more < 0 && errno == EINTR) continue;
        if (more <= 0) break;
        over = true;
      }
      return over ? -1 : static_cast<long>(used);
    }
    const ssize_t n = ::read(fd, buffer + used, capacity - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return static_cast<long>(used);
    used += static_cast<std::size_t>(n);
  }
}

// Just enough JSON to find a few members of an object: every value is
// checked and skipped whole; keys are compared as written (a key spelled with
// escapes is not the key).
struct Scanner {
  const char* p;
  const char* end;
  const char* error = nullptr;

  void ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  }
  bool fail(const char* why) {
    if (!error) error = why;
    return false;
  }
  // A string at p; [start, length) its raw text between the quotes.
  bool string(const char*& start, std::size_t& length) {
    if (p >= end || *p != '"') return fail("a string was expected");
    start = ++p;
    while (p < end && *p != '"') {
      if (static_cast<unsigned char>(*p) < 0x20) return fail("a string holds a control character");
      if (*p == '\\') {
        if (++p >= end) break;
        if (*p == 'u') {
          for (int i = 0; i < 4; ++i)
            if (++p >= end || !std::strchr("0123456789abcdefABCDEF", *p)) return fail("a \\u escape is malformed");
        } else if (!std::strchr("\"\\/bfnrt", *p)) {
          return fail("a string has an unknown escape");
        }
      }
      ++p;
    }
    if (p >= end) return fail("a string is not closed");
    length = static_cast<std::size_t>(p - start);
    ++p;
    return true;
  }
  bool value(int depth) {
    if (depth > 64) return fail("it nests deeper than 64 levels");
    ws();
    if (p >= end) return fail("a value is missing");
    const char* s = nullptr;
    std::size_t n = 0;
    switch (*p) {
      case '"':
        return string(s, n);
      case '{':
      case '[': {
        const char close = *p == '{' ? '}' : ']';
        const bool object = *p == '{';
        ++p;
        ws();
        if (p < end && *p == close) return ++p, true;
        for (;;) {
          if (object) {
            ws();
            if (!string(s, n)) return false;
            ws();
            if (p >= end || *p != ':') return fail("a ':' is missing after a key");
            ++p;
          }
          if (!value(depth + 1)) return false;
          ws();
          if (p < end && *p == ',') {
            ++p;
            continue;
          }
          if (p < end && *p == close) return ++p, true;
          return fail("a ',' or a closing bracket is missing");
        }
      }
      default: {
        const char* start = p;
        while (p < end && (std::strchr("+-.eE", *p) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z'))) ++p;
        const auto length = static_cast<std::size_t>(p - start);
        if (length == 0) return fail("a value is not JSON");
        return true;
      }
    }
  }
};


// Walks the JSON object at `s.p`: for each member, `on_member(key, length)`
// is called with `s.p` at the member's value, which it must consume (or fail
// the walk by returning false). A key is its raw text (a key spelled with
// escapes is not the key). False with `s.error` set when the text is not an
// object; `s.p` is left after the object.
template <class OnMember>
bool members(Scanner& s, OnMember on_member) {
  s.ws();
  if (s.p >= s.end || *s.p != '{') return s.fail("it is not a JSON object");
  ++s.p;
  s.ws();
  if (s.p < s.end && *s.p == '}') return ++s.p, true;
  for (;;) {
    const char* key = nullptr;
    std::size_t length = 0;
    s.ws();
    if (!s.string(key, length)) return false;
    s.ws();
    if (s.p >= s.end || *s.p != ':') return s.fail("a ':' is missing after a key");
    ++s.p;
    s.ws();
    if (!on_member(key, length)) return false;
    s.ws();
    if (s.p < s.end && *s.p == ',') {
      ++s.p;
      continue;
    }
    if (s.p < s.end && *s.p == '}') return ++s.p, true;
    return s.fail("a ',' or '}' is missing");
  }
}

// The raw text [start, start + length) of the string member `key` of the
// JSON object at `s.p` (a value with escapes is refused); false with
// `s.error` set when the text is not an object or the member is missing, not
// a string or escaped. `s.p` is left after the object. With `object_key`, the
// member `key` of the object member `object_key` instead (config.json's
// root.path).
inline bool member_string(Scanner& s, const char* object_key, const char* key, const char*& start, std::size_t& length,
                          int depth = 0) {
  const char* want = object_key ? object_key : key;
  const std::size_t want_length = std::strlen(want);
  bool found = false;
  const bool walked = members(s, [&](const char* k, std::size_t kn) {
    const bool match = kn == want_length && std::memcmp(k, want, kn) == 0;
    if (match && found) return s.fail("a member is given twice");
    if (match && object_key) return found = member_string(s, nullptr, key, start, length, depth + 1);
    const char* at = s.p;
    if (!s.value(depth + 1)) return false;
    if (match) {
      if (*at != '"' || std::memchr(at + 1, '\\', static_cast<std::size_t>(s.p - at - 1)))
        return s.fail("a member is not a plain string");
      start = at + 1;
      length = static_cast<std::size_t>(s.p - at - 2);
      found = true;
    }
    return true;
  });
  if (!walked) return false;
  if (!found) return s.fail("a member is missing");
  return true;
}

}  // namespace tessera::hook
