// The fewest instances any valid placement of a desired multiset must
// destroy, found by brute force over every placement the catalog allows:
// independent of the MIG planner's own search.
#pragma once

#include <algorithm>
#include <vector>

#include "core/mig_layout.hpp"

namespace tessera::testing {

inline size_t brute_force_min_destroyed(const GpuModel& m, const MigLayout& current, std::vector<uint32_t> wanted) {
  std::sort(wanted.begin(), wanted.end());
  size_t best_overlap = 0;
  MigLayout chosen;
  auto visit = [&](auto&& self, size_t i) -> void {
    if (i == wanted.size()) {
      size_t overlap = 0;
      for (const auto& c : current)
        if (std::find(chosen.begin(), chosen.end(), c) != chosen.end()) ++overlap;
      best_overlap = std::max(best_overlap, overlap);
      return;
    }
    for (const auto& pl : m.profiles[wanted[i]].placements) {
      if (i > 0 && wanted[i - 1] == wanted[i] && pl.start <= chosen.back().start) continue;
      chosen.push_back({wanted[i], pl.start});
      if (check_layout(m, chosen)) self(self, i + 1);
      chosen.pop_back();
    }
  };
  visit(visit, 0);
  return current.size() - best_overlap;
}

}  // namespace tessera::testing
