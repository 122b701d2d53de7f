// An SVG map of a plan: one row per GPU, its memory slices left to right, each
// instance a box with its profile and the services in it.
#include <sstream>

#include "planner/outputs.hpp"

namespace tessera::planner {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

const char* fill(Isolation sharing, bool empty) {
  if (empty) return "#eeeeee";
  switch (sharing) {
    case Isolation::dedicated: return "#9ecae1";
    case Isolation::shared: return "#a1d99b";
    case Isolation::best_effort: return "#fdd0a2";
  }
  return "#ffffff";
}

}  // namespace

std::string render_svg(const Problem& p, const Plan& plan) {
  constexpr int kSliceWidth = 110, kRowHeight = 64, kLabelWidth = 190, kTop = 30;
  int width = kLabelWidth + 8 * kSliceWidth + 20;
  int height = kTop + int(plan.gpus.size()) * kRowHeight + 20;
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<text x=\"10\" y=\"18\" font-size=\"14\">tessera plan: " << plan.gpus.size()
      << " GPUs (blue dedicated, green MPS, orange time-sliced, grey idle)</text>\n";
  for (size_t g = 0; g < plan.gpus.size(); ++g) {
    const auto& gpu = plan.gpus[g];
    const GpuModel& model = *p.gpu_types[size_t(gpu.gpu_type)].model;
    int y = kTop + int(g) * kRowHeight;
    double per_slice = 8.0 * kSliceWidth / double(model.memory_slices ? model.memory_slices : 8);
    out << "<text x=\"10\" y=\"" << y + kRowHeight / 2 << "\">GPU " << g << " " << escape(model.name) << "</text>\n";
    for (const auto& inst : gpu.instances) {
      const Unit& unit = unit_of(p, inst);
      double x = kLabelWidth + inst.start * per_slice;
      double w = (unit.profile == kWholeGpu ? model.memory_slices : unit.memory_slices) * per_slice;
      out << "<g><rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w - 2 << "\" height=\"" << kRowHeight - 6
          << "\" fill=\"" << fill(inst.sharing, inst.replicas.empty()) << "\" stroke=\"#333\"/>\n"
          << "<text x=\"" << x + 4 << "\" y=\"" << y + 14 << "\" font-weight=\"bold\">" << escape(unit.name) << "</text>\n";
      int line = 0;
      for (const auto& r : inst.replicas) {
        if (line == 2 && inst.replicas.size() > 3) {
          out << "<text x=\"" << x + 4 << "\" y=\"" << y + 28 + 12 * line << "\">+" << inst.replicas.size() - 2
              << " more</text>\n";
          break;
        }
        out << "<text x=\"" << x + 4 << "\" y=\"" << y + 28 + 12 * line << "\">" << escape(p.services[size_t(r.service)].name)
            << "</text>\n";
        ++line;
      }
      out << "</g>\n";
    }
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace tessera::planner
