// tessera alerts: Prometheus alerting rules over the exporter's metrics, as a
// rule-group file or a PrometheusRule object. The rules come from
// cli/alerts_rules.yaml, compiled in; this file only fills in its ${name}
// placeholders and wraps the result.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/error.hpp"

namespace tessera::cli {
namespace {

// The text of cli/alerts_rules.yaml (the build wraps it in a raw string literal).
constexpr std::string_view kRulesSource =
#include "alerts_rules.inc"
    ;

struct AlertsArgs {
  std::string format = "rules";
  std::string namespace_;
  std::string output = "-";
  double memory_percent = 90;
  double sm_percent = 95;
  double quota_percent = 95;
  double interval_seconds = 10;
  std::string job = "tessera-exporter";
  std::vector<uint64_t> ignored_xids{13, 31, 43, 45, 68, 109};
  std::vector<std::string> ignored_xid_text;  // as given; empty items dropped
};

// The device a series describes, from its labels: a MIG instance (GPU_I_ID set) or a whole GPU.
constexpr std::string_view kDeviceText =
    "{{ if $labels.GPU_I_ID }}MIG instance {{ $labels.GPU_I_ID }} ({{ $labels.GPU_I_PROFILE }}) of GPU "
    "{{ $labels.gpu }}{{ else }}GPU {{ $labels.gpu }}{{ end }} ({{ $labels.UUID }}) on {{ $labels.Hostname }}";
// The pod holding it, when one does.
constexpr std::string_view kPodText = "{{ if $labels.pod }}, held by pod {{ $labels.namespace }}/{{ $labels.pod }},{{ end }}";

// A number as PromQL and people read it: no exponent, no trailing zeros.
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  std::string s = buf;
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

// The template with its leading comment block dropped and every ${name} replaced.
// An unknown name is a bug in the template: reported, never written out.
Result<std::string> render_rules(const AlertsArgs& a) {
  std::string xid_filter;
  for (auto x : a.ignored_xids) xid_filter += (xid_filter.empty() ? "!= " : " != ") + std::to_string(x);
  const std::map<std::string, std::string, std::less<>> values{
      {"memory_ratio", number(a.memory_percent / 100)}, {"memory_percent", number(a.memory_percent)},
      {"sm_ratio", number(a.sm_percent / 100)},         {"sm_percent", number(a.sm_percent)},
      {"quota_ratio", number(a.quota_percent / 100)},   {"quota_percent", number(a.quota_percent)},
      {"stall_seconds", number(3 * a.interval_seconds)},
      {"interval_seconds", number(a.interval_seconds)},
      {"xid_filter", xid_filter},
      {"job", a.job},
      {"device", std::string(kDeviceText)},
      {"pod", std::string(kPodText)},
  };
  std::string_view src = kRulesSource;
  while (src.starts_with('#')) {
    auto nl = src.find('\n');
    src.remove_prefix(nl == std::string_view::npos ? src.size() : nl + 1);
  }
  std::string out;
  out.reserve(src.size() * 2);
  for (size_t i = 0; i < src.size();) {
    if (src.compare(i, 2, "${") != 0) {
      out += src[i++];
      continue;
    }
    auto end = src.find('}', i);
    auto name = src.substr(i + 2, end == std::string_view::npos ? std::string_view::npos : end - i - 2);
    auto it = values.find(name);
    if (end == std::string_view::npos || it == values.end())
      return fail(Errc::internal, "alerts_rules.yaml: unknown placeholder '${" + std::string(name) + "}'");
    out += it->second;
    i = end + 1;
  }
  return out;
}

std::string indent(std::string_view text, std::string_view by) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    auto nl = text.find('\n', i);
    auto line = text.substr(i, nl == std::string_view::npos ? std::string_view::npos : nl - i);
    if (!line.empty()) out += by;
    out += line;
    out += '\n';
    i = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return out;
}

// The command line that makes this output again, for the file's header.
std::string command_line(const AlertsArgs& a, const AlertsArgs& defaults) {
  std::string s = "tessera alerts --format " + a.format;
  if (!a.namespace_.empty()) s += " --namespace " + a.namespace_;
  if (a.memory_percent != defaults.memory_percent) s += " --memory-pressure " + number(a.memory_percent);
  if (a.sm_percent != defaults.sm_percent) s += " --sm-saturation " + number(a.sm_percent);
  if (a.quota_percent != defaults.quota_percent) s += " --quota-pressure " + number(a.quota_percent);
  if (a.interval_seconds != defaults.interval_seconds) s += " --sampler-interval " + number(a.interval_seconds);
  if (a.job != defaults.job) s += " --job " + a.job;
  if (a.ignored_xids != defaults.ignored_xids) {
    std::string list;
    for (auto x : a.ignored_xids) list += (list.empty() ? "" : ",") + std::to_string(x);
    s += " --ignore-xids " + (list.empty() ? "''" : list);
  }
  return s;
}

Result<std::string> render(const AlertsArgs& a) {
  auto groups = render_rules(a);
  if (!groups) return unexpected<Error>(groups.error());
  std::string out = "# Prometheus alerting rules for tessera's GPU metrics (docs/alerts.md).\n"
                    "# Generated by `" + command_line(a, AlertsArgs{}) + "`: edit that, not this.\n";
  if (a.format == "rules") return out + *groups;
  out += "apiVersion: monitoring.coreos.com/v1\n"
         "kind: PrometheusRule\n"
         "metadata:\n"
         "  name: tessera-alerts\n";
  if (!a.namespace_.empty()) out += "  namespace: " + a.namespace_ + "\n";
  out += "  labels:\n"
         "    app.kubernetes.io/name: tessera\n"
         "spec:\n";
  return out + indent(*groups, "  ");
}

// Writes through a temporary file beside the target, then renames it over.
Result<void> write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return fail(Errc::io, path + ": cannot write: " + std::strerror(errno));
    f << text;
    f.flush();
    if (!f) {
      std::filesystem::remove(tmp);
      return fail(Errc::io, path + ": cannot write: " + std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    return fail(Errc::io, path + ": cannot write: " + ec.message());
  }
  return {};
}

// A whole decimal number as text, or nothing.
std::optional<double> parse_number(const std::string& s) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// A number option in [low, high] (low itself excluded when `open_low`).
// CLI11 puts the option's name before the message.
CLI::Validator number_in(const char* name, const char* what, double low, bool open_low, double high,
                         const char* range_text) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        auto v = parse_number(s);
        if (!v && (s == "nan" || s == "inf" || s == "-inf")) return std::string("expected ") + what + " " + range_text + ", got " + s;
        if (!v) return std::string("expected ") + what + ", got '" + s + "'";
        if (*v < low || (open_low && *v == low) || *v > high)
          return std::string("expected ") + what + " " + range_text + ", got " + s;
        return {};
      },
      name);
}

bool whole_number(const std::string& s, size_t max_digits) {
  return !s.empty() && s.size() <= max_digits && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

void add_alerts_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<AlertsArgs>();
  auto* cmd = app.add_subcommand(
      "alerts",
      "Write Prometheus alerting rules for the metrics of `tessera exporter` (dcgm-exporter's names and\n"
      "tessera_*): memory pressure per GPU and per MIG instance, SM saturation, a shared replica near its\n"
      "memory quota, critical XIDs, devices down, the exporter absent or down, its sampler stalled. Every\n"
      "alert names its GPU, MIG instance and pod from the series' labels. docs/alerts.md explains each rule.\n"
      "--format rules writes a rule file for Prometheus's rule_files (check it with `promtool check rules`);\n"
      "--format prometheusrule writes the same rules as a PrometheusRule object for the Prometheus Operator.");
  cmd->add_option("--format", args->format, "rules (a rule-group file) or prometheusrule (monitoring.coreos.com/v1)")
      ->check(CLI::IsMember({"rules", "prometheusrule"}))
      ->capture_default_str();
  cmd->add_option("--namespace", args->namespace_, "The PrometheusRule's namespace (--format prometheusrule only)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            static const std::regex dns_label("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
            if (s.size() > 63 || !std::regex_match(s, dns_label))
              return "'" + s + "' is not a namespace name (lower-case letters, digits and '-', at most 63, "
                     "starting and ending with a letter or digit)";
            return {};
          },
          "NAME"));
  cmd->add_option("-o,--output", args->output, "Write to this file instead of standard output ('-')");
  cmd->add_option("--memory-pressure", args->memory_percent,
                  "Percent of a GPU's or MIG instance's memory in use, for 5 minutes, that fires its memory alert")
      ->check(number_in("PERCENT", "a percentage", 0, true, 100, "above 0 and at most 100"))
      ->capture_default_str();
  cmd->add_option("--sm-saturation", args->sm_percent, "Percent of SM activity, for 15 minutes, that fires TesseraSMSaturated")
      ->check(number_in("PERCENT", "a percentage", 0, true, 100, "above 0 and at most 100"))
      ->capture_default_str();
  cmd->add_option("--quota-pressure", args->quota_percent,
                  "Percent of a shared replica's memory quota in use, for 5 minutes, that fires TesseraReplicaNearQuota")
      ->check(number_in("PERCENT", "a percentage", 0, true, 100, "above 0 and at most 100"))
      ->capture_default_str();
  cmd->add_option("--sampler-interval", args->interval_seconds,
                  "The exporter's --interval in seconds: its sampler counts as stalled after 3 intervals without a sample")
      ->check(number_in("SECONDS", "seconds", 0.2, false, 3600, "from 0.2 to 3600 (as the exporter's --interval)"))
      ->capture_default_str();
  cmd->add_option("--job", args->job, "The exporter's scrape job (the ServiceMonitor's Service name unless it sets jobLabel)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            static const std::regex job("[A-Za-z0-9_.:/-]+");
            if (!std::regex_match(s, job))
              return "'" + s + "' is not a job name this command writes (letters, digits and _ . : / -)";
            return {};
          },
          "JOB"))
      ->capture_default_str();
  cmd->add_option("--ignore-xids", args->ignored_xid_text,
                  "XIDs that fire no alert, comma-separated: application errors, as `tessera plugin --ignore-xids`\n"
                  "(NVIDIA's list by default; '' for none)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            if (!s.empty() && !whole_number(s, 6)) return "'" + s + "' is not an XID (a whole number)";
            return {};
          },
          "XID"))
      ->default_str("13,31,43,45,68,109");
  cmd->callback([args, &exit_code] {
    if (!args->ignored_xid_text.empty()) {
      args->ignored_xids.clear();
      for (const auto& x : args->ignored_xid_text)
        if (!x.empty()) args->ignored_xids.push_back(std::stoull(x));
    }
    if (!args->namespace_.empty() && args->format != "prometheusrule") {
      std::cerr << "tessera alerts: --namespace applies to --format prometheusrule only\n";
      exit_code = kExitUsage;
      return;
    }
    auto text = render(*args);
    if (!text) {
      std::cerr << "tessera alerts: " << text.error().message << '\n';
      exit_code = kExitInvalid;
      return;
    }
    if (args->output == "-") {
      std::cout << *text;
      std::cout.flush();
      exit_code = std::cout ? kExitOk : kExitInvalid;
      return;
    }
    if (auto w = write_file(args->output, *text); !w) {
      std::cerr << "tessera alerts: " << w.error().message << '\n';
      exit_code = kExitInvalid;
      return;
    }
    exit_code = kExitOk;
  });
}

}  // namespace tessera::cli
