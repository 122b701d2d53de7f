// Reading cuda_client's output: one line per step, `step code values...`.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "support/run.hpp"

namespace tessera::testing {

// One output line of the client, split into words: {step, code, values...}.
using Line = std::vector<std::string>;

inline std::vector<Line> lines(const std::string& out) {
  std::vector<Line> result;
  std::istringstream in(out);
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream words(text);
    Line line;
    for (std::string w; words >> w;) line.push_back(w);
    if (!line.empty()) result.push_back(line);
  }
  return result;
}

// The line of `step` in a run's output (the first one when a step repeats);
// a missing step fails the test and reads as code -99.
inline Line find(const RunResult& r, const std::string& step) {
  for (const auto& l : lines(r.out))
    if (l[0] == step) return l;
  ADD_FAILURE() << "no line for " << step << " in:\n" << r.out << "\nstderr:\n" << r.err;
  return Line{step, "-99", "0", "0", "0", "0"};
}

inline int code(const RunResult& r, const std::string& step) { return std::stoi(find(r, step)[1]); }

// The step's i-th value (after its code); ~0 when the line has none.
inline std::uint64_t value(const RunResult& r, const std::string& step, std::size_t i) {
  const Line l = find(r, step);
  return i + 2 < l.size() ? std::stoull(l[i + 2]) : ~0ULL;
}

inline std::string bytes(std::uint64_t n) { return std::to_string(n); }

}  // namespace tessera::testing
