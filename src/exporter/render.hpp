// A sample in the Prometheus text exposition format 0.0.4: one HELP and TYPE
// line per family that has a series, then its series. Names and units in
// docs/metrics.md.
#pragma once

#include <string>

#include "exporter/sample.hpp"

namespace tessera::exporter {

inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string render(const Sample& sample, const std::string& version);

// A label value escaped for the text format (backslash, double quote, newline).
std::string escape_label_value(const std::string& value);

}  // namespace tessera::exporter
