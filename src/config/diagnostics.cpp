#include "config/diagnostics.hpp"

#include <algorithm>

#include "core/text.hpp"

namespace tessera::config {

// Longest field path a message prints: paths are made of the input's keys.
constexpr size_t kMaxFieldChars = 120;

std::string format(const Diagnostic& d) {
  // Values are quoted with excerpt() where the message is made; this is the
  // last guard: nothing from the input reaches a terminal unescaped.
  std::string out = d.where.file.empty() ? "<input>" : escape_control(d.where.file);
  if (d.where.line > 0) {
    out += ":" + std::to_string(d.where.line);
    if (d.where.column > 0) out += ":" + std::to_string(d.where.column);
  }
  out += d.severity == Severity::error ? ": error: " : d.severity == Severity::warning ? ": warning: " : ": note: ";
  if (!d.field.empty()) out += excerpt(d.field, kMaxFieldChars) + ": ";
  out += escape_control(d.message);
  return out;
}

void Diagnostics::error(SourceLocation where, std::string field, std::string message) {
  if (items_.size() >= kMaxItems) { ++dropped_; return; }
  items_.push_back({Severity::error, std::move(where), std::move(field), std::move(message)});
}

void Diagnostics::warning(SourceLocation where, std::string field, std::string message) {
  if (items_.size() >= kMaxItems) { ++dropped_; return; }
  items_.push_back({Severity::warning, std::move(where), std::move(field), std::move(message)});
}

void Diagnostics::note(SourceLocation where, std::string field, std::string message) {
  if (items_.size() >= kMaxItems) { ++dropped_; return; }
  items_.push_back({Severity::note, std::move(where), std::move(field), std::move(message)});
}

bool Diagnostics::has_errors() const { return error_count() > 0 || dropped_ > 0; }

size_t Diagnostics::error_count() const {
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(),
                                           [](const Diagnostic& d) { return d.severity == Severity::error; }));
}

}  // namespace tessera::config
