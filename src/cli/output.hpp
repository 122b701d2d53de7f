// Plain-text tables and diagnostics printing for the command line.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "config/diagnostics.hpp"

namespace tessera::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Prints every diagnostic, one per line, to `err`; returns the error count.
size_t print_diagnostics(const config::Diagnostics& diags, std::ostream& err);

// Exit codes shared by every command.
constexpr int kExitOk = 0;
constexpr int kExitInvalid = 1;  // the input is wrong, or the operation failed
constexpr int kExitUsage = 2;    // the command line is wrong

}  // namespace tessera::cli
