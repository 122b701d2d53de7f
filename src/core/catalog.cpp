#include "core/catalog.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <tuple>

namespace tessera {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

bool GpuInstanceProfile::allows_start(uint32_t start) const {
  return std::any_of(placements.begin(), placements.end(), [&](const Placement& p) { return p.start == start; });
}

const ComputeInstanceProfile* GpuInstanceProfile::default_compute_profile() const {
  for (const auto& c : compute_profiles)
    if (c.is_default) return &c;
  return nullptr;
}

const GpuInstanceProfile* GpuModel::profile(std::string_view wanted) const {
  for (const auto& p : profiles)
    if (iequals(p.name, wanted)) return &p;
  return nullptr;
}

const GpuInstanceProfile* GpuModel::profile_by_id(uint32_t id) const {
  for (const auto& p : profiles)
    if (p.profile_id == id) return &p;
  return nullptr;
}

const GpuInstanceProfile* GpuModel::profile_by_nvml_index(uint32_t index) const {
  for (const auto& p : profiles)
    if (p.nvml_index == index) return &p;
  return nullptr;
}

bool GpuModel::matches_pci_id(uint32_t id) const {
  return id == pci_device_id || std::find(alias_pci_ids.begin(), alias_pci_ids.end(), id) != alias_pci_ids.end();
}

Catalog::Catalog(std::vector<GpuModel> models) : models_(std::move(models)) {}

const Catalog& Catalog::builtin() {
  static const Catalog catalog(builtin_gpu_models());
  return catalog;
}

const GpuModel* Catalog::find(std::string_view name) const {
  for (const auto& m : models_) {
    if (iequals(m.name, name) || (!m.nvml_name.empty() && iequals(m.nvml_name, name))) return &m;
    for (const auto& a : m.aliases)
      if (iequals(a, name)) return &m;
  }
  return nullptr;
}

const GpuModel* Catalog::find_by_pci_id(uint32_t id) const {
  for (const auto& m : models_)
    if (m.matches_pci_id(id)) return &m;
  return nullptr;
}

std::vector<std::string> Catalog::nearest_names(std::string_view name, size_t count) const {
  std::vector<std::string> names;
  for (const auto& m : models_) names.push_back(m.name);
  return nearest(name, names, count);
}

std::vector<std::string> nearest(std::string_view wanted, std::span<const std::string> names, size_t count) {
  // Names that start with what was typed (case aside) come first, then those
  // that contain it: "H100" is short for H100-SXM5-80GB, and "H200" for
  // H200-SXM-141GB rather than GH200-96GB, whatever the edit distance says.
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string needle = lower(wanted);
  std::vector<std::tuple<int, size_t, std::string>> scored;
  for (const auto& n : names) {
    const size_t at = needle.empty() ? std::string::npos : lower(n).find(needle);
    scored.emplace_back(at == 0 ? 0 : at != std::string::npos ? 1 : 2, edit_distance(wanted, n), n);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < count; ++i) out.push_back(std::get<2>(scored[i]));
  return out;
}

std::optional<uint32_t> parse_pci_id(std::string_view text) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  if (text.empty() || text.size() > 8) return std::nullopt;
  uint32_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string format_pci_id(uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", id);
  return buf;
}

std::string mig_resource_name(std::string_view profile) {
  std::string name = "nvidia.com/mig-" + std::string(profile);
  std::replace(name.begin(), name.end(), '+', '.');
  return name;
}

std::optional<std::string> mig_profile_of_resource(std::string_view resource) {
  constexpr std::string_view prefix = "nvidia.com/mig-";
  if (!resource.starts_with(prefix) || resource.size() == prefix.size()) return std::nullopt;
  std::string profile(resource.substr(prefix.size()));
  // [<c>c.]<g>g.<mem>gb[+attributes]: the '.' right after the first "gb" stood for '+'.
  const size_t gb = profile.find("gb");
  if (gb != std::string::npos && gb + 2 < profile.size() && profile[gb + 2] == '.') profile[gb + 2] = '+';
  return profile;
}

}  // namespace tessera
