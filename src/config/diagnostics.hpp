// What is wrong with an input, and where: file, line, column, field.
#pragma once

#include <string>
#include <vector>

namespace tessera::config {

struct SourceLocation {
  std::string file;
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based; 0 = unknown
};

// note: a fact worth saying that is no fault of the file (never an error, not even under --strict).
enum class Severity { note, warning, error };

struct Diagnostic {
  Severity severity = Severity::error;
  SourceLocation where;
  std::string field;  // dotted path, e.g. mig-configs.all-1g.10gb[0].mig-devices
  std::string message;
};

// "cfg.yaml:5:9: error: mig-configs.x[0].devices: expected 'all' or a list of GPU indices"
// Control characters and invalid UTF-8 in any part are escaped (core/text.hpp);
// a long field path is cut to an excerpt.
std::string format(const Diagnostic& d);

class Diagnostics {
 public:
  void error(SourceLocation where, std::string field, std::string message);
  void warning(SourceLocation where, std::string field, std::string message);
  void note(SourceLocation where, std::string field, std::string message);
  bool has_errors() const;
  size_t error_count() const;
  const std::vector<Diagnostic>& items() const { return items_; }
  // Stops runaway inputs from producing millions of lines.
  static constexpr size_t kMaxItems = 200;

 private:
  std::vector<Diagnostic> items_;
  size_t dropped_ = 0;
};

}  // namespace tessera::config
