// Small text helpers shared by messages.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace tessera {

// "a, b, c"
std::string join(std::span<const std::string> items, std::string_view separator = ", ");

// Input text made safe to print: \n, \r and \t as those escapes, every other
// byte below 0x20 and 0x7f as \xNN (ESC is \x1b), bytes that are not valid
// UTF-8 as \xNN. Valid UTF-8 and printable ASCII pass through unchanged.
std::string escape_control(std::string_view text);

// How much of an input value a message quotes.
constexpr size_t kExcerptChars = 60;

// escape_control(text), cut to at most `max_chars` characters (an escape such
// as \x1b counts as its four characters and is never cut) followed by "…"
// when something was left out.
std::string excerpt(std::string_view text, size_t max_chars = kExcerptChars);

// "'" + excerpt(text) + "'": the one way messages quote a value from the input.
std::string quote(std::string_view text, size_t max_chars = kExcerptChars);

// A count and its noun: counted(1, "error") -> "1 error", counted(2, "GPU")
// -> "2 GPUs" (an "s" for every count but 1).
std::string counted(size_t n, std::string_view noun);

// Seconds as the user gave them: 0.1 -> "0.1 s", 60 -> "60 s", 0.001 -> "0.001 s".
std::string format_seconds(double seconds);

}  // namespace tessera
