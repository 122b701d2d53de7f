#include "cli/output.hpp"

#include <algorithm>
#include <ostream>

#include "core/text.hpp"

namespace tessera::cli {

void Table::add(std::vector<std::string> row) {
  for (auto& cell : row) cell = escape_control(cell);
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      s += row[i];
      if (i + 1 < row.size()) s += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << '\n';
  };
  line(header_);
  for (const auto& r : rows_) line(r);
}

size_t print_diagnostics(const config::Diagnostics& diags, std::ostream& err) {
  for (const auto& d : diags.items()) err << config::format(d) << '\n';
  return diags.error_count();
}

const GpuModel* find_gpu_model(std::string_view command, std::string_view name, std::ostream& err) {
  const auto& catalog = Catalog::builtin();
  if (const auto* model = catalog.find(name)) return model;
  err << command << ": unknown GPU model " << quote(name) << " (nearest: " << join(catalog.nearest_names(name))
      << "; `tessera catalog` lists all)\n";
  return nullptr;
}

}  // namespace tessera::cli
