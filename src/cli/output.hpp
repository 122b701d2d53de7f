// Plain-text tables and diagnostics printing for the command line.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"
#include "core/catalog.hpp"

namespace tessera::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  // Cells may hold input (config names): control characters are escaped.
  void add(std::vector<std::string> row);
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

// The GPU model a command line names (--gpu MODEL), or nothing after printing
// the one message every command gives (a usage error: exit kExitUsage):
// "<command>: unknown GPU model 'X' (nearest: A, B, C; `tessera catalog` lists all)".
const GpuModel* find_gpu_model(std::string_view command, std::string_view name, std::ostream& err);

}  // namespace tessera::cli
