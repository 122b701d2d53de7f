// tessera: plan, apply, expose, isolate and measure shares of NVIDIA GPUs on
// Kubernetes. This is the command-line entry point.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/completion.hpp"
#include "cli/flags.hpp"
#include "cli/output.hpp"
#include "core/catalog.hpp"
#include "core/text.hpp"

namespace {

// The first word of the command line that is not an option of tessera's own
// (--log-level VALUE); its index in argv, or 0 when there is none.
int command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--log-level") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    return i;
  }
  return 0;
}

// An option of `cmd` or of a command above it, by the word that names it
// ("--file", "-f", "--file=x"); null when none does.
const CLI::Option* find_option(const CLI::App* cmd, const std::string& word) {
  const std::string name = word.substr(0, word.find('='));
  for (const CLI::App* c = cmd; c; c = c->get_parent())
    for (const auto* opt : c->get_options()) {
      if (name.starts_with("--")) {
        for (const auto& l : opt->get_lnames())
          if ("--" + l == name) return opt;
      } else if (name.size() == 2) {
        for (const auto& s : opt->get_snames())
          if ("-" + s == name) return opt;
      }
    }
  return nullptr;
}

// What CLI11 answers too briefly ("A subcommand is required", "--file is
// required", "The following arguments were not expected"), said with the
// word at fault and the nearest names, at every level: an unknown option of
// the command reached, a word that names none of its subcommands, a word a
// command without positional arguments does not take (a file given without
// --file), or no subcommand at all (its help then, on stderr). True when it
// said something.
bool explain_usage_error(CLI::App& app, const std::vector<std::string>& words) {
  CLI::App* cmd = &app;
  std::string path = "tessera";
  std::string stray, extra;
  std::vector<std::string> unknown;
  bool values = false;  // after an option that takes several values: words are its values
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") break;
    if (w.size() > 1 && w[0] == '-') {
      values = false;
      const CLI::Option* opt = find_option(cmd, w);
      if (!opt) {
        unknown.push_back(w.substr(0, w.find('=')));
        continue;
      }
      if (opt->get_expected_max() > 0 && w.find('=') == std::string::npos && w != "--help" && w != "-h") {
        ++i;  // its value
        values = opt->get_expected_max() > 1;
      }
      continue;
    }
    if (values || !stray.empty()) continue;
    CLI::App* sub = nullptr;
    for (auto* s : cmd->get_subcommands([](CLI::App*) { return true; }))
      if (s->get_name() == w) sub = s;
    if (sub) {
      cmd = sub;
      path += " " + w;
    } else if (!cmd->get_subcommands([](CLI::App*) { return true; }).empty()) {
      stray = w;
    } else if (extra.empty() && std::ranges::none_of(cmd->get_options(), [](const CLI::Option* o) { return !o->nonpositional(); })) {
      extra = w;
    }
  }
  if (!unknown.empty()) {
    std::vector<std::string> names;  // the command's own options first, each once
    for (const CLI::App* c = cmd; c; c = c->get_parent())
      for (const auto* opt : c->get_options())
        for (const auto& l : opt->get_lnames())
          if (std::find(names.begin(), names.end(), "--" + l) == names.end()) names.push_back("--" + l);
    for (const auto& u : unknown)
      std::cerr << path << ": unknown option '" << tessera::escape_control(u) << "' (nearest: "
                << tessera::join(tessera::nearest(u, names, 3)) << "); run `" << path << " --help` for its options\n";
    return true;
  }
  std::vector<std::string> subs;
  for (const auto* s : cmd->get_subcommands([](CLI::App*) { return true; })) subs.push_back(s->get_name());
  if (!stray.empty()) {
    std::cerr << path << ": unknown command '" << tessera::escape_control(stray) << "' (nearest: "
              << tessera::join(tessera::nearest(stray, subs, 3)) << "); run `" << path << " --help` for the list\n";
    return true;
  }
  if (!extra.empty()) {
    std::cerr << path << ": unexpected argument '" << tessera::escape_control(extra) << "'";
    if (find_option(cmd, "--file"))
      std::cerr << " (a file is given with --file: `" << path << " --file " << tessera::escape_control(extra) << "`)";
    std::cerr << "; run `" << path << " --help` for its options\n";
    return true;
  }
  if (!subs.empty() && cmd->get_subcommands().empty()) {
    std::cerr << cmd->help() << path << ": a command is needed: " << tessera::join(subs) << '\n';
    return true;
  }
  return false;
}

}  // namespace

static int tessera_main(int argc, char** argv) {
  CLI::App app{
      "tessera: share NVIDIA GPUs between inference services on Kubernetes.\n"
      "Plans MIG layouts, applies mig-parted configs, serves GPUs, MIG instances and\n"
      "shared replicas to the kubelet, and checks the configs you already have.",
      "tessera"};
  app.require_subcommand(1);
  app.set_version_flag("-V,--version", "tessera " TESSERA_VERSION, "Print tessera's version and exit");
  app.footer("Run `tessera COMMAND --help` (or `tessera help COMMAND`) for a command's options; `tessera version`\n"
             "prints the version; `tessera completion bash|zsh|fish` a completion script (docs/cli.md).\n"
             "Exit codes: 0 ok, 1 invalid input or failure, 2 usage.");
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "Log level: trace, debug, info, warn, error, off")
      ->transform(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}, CLI::ignore_case))
      ->envname("TESSERA_LOG_LEVEL");
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });
  // Commands (made after this) pass options they lack up to here, so
  // `tessera plugin --log-level info` works as well as `tessera --log-level info plugin`.
  app.fallthrough();
  spdlog::set_default_logger(spdlog::stderr_color_mt("tessera"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  int exit_code = tessera::cli::kExitOk;
  tessera::cli::add_catalog_command(app, exit_code);
  tessera::cli::add_mig_command(app, exit_code);
  tessera::cli::add_config_command(app, exit_code);
  tessera::cli::add_inventory_command(app, exit_code);
  tessera::cli::add_sim_command(app, exit_code);
  tessera::cli::add_plan_command(app, exit_code);
  tessera::cli::add_plugin_command(app, exit_code);
  tessera::cli::add_pods_command(app, exit_code);
  tessera::cli::add_exporter_command(app, exit_code);
  tessera::cli::add_node_command(app, exit_code);
  tessera::cli::add_mps_host_command(app, exit_code);
  tessera::cli::add_fleet_command(app, exit_code);
  tessera::cli::add_dra_command(app, exit_code);
  tessera::cli::add_alerts_command(app, exit_code);

  // Old spellings of renamed flags, rewritten (warned once each).
  std::vector<std::string> words = tessera::cli::rewrite_renamed_flags(std::vector<std::string>(argv, argv + argc), std::cerr);
  // `tessera help [COMMAND]`, `tessera version`, and a word that names no
  // command said as such, with the nearest names (CLI11 alone answers "A
  // subcommand is required" without naming the word).
  std::vector<char*> args;
  for (auto& w : words) args.push_back(w.data());
  char help_flag[] = "--help";
  if (const int at = command_word(argc, argv); at > 0) {
    const std::string word = argv[at];
    std::vector<std::string> names;
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
    if (word == "version") {
      if (at + 1 < int(words.size())) {
        const std::string& next = words[size_t(at) + 1];
        if ((next == "--help" || next == "-h") && at + 2 == int(words.size())) {
          std::cout << "Print tessera's version and exit\nUsage: tessera version\n";
          return tessera::cli::kExitOk;
        }
        std::cerr << "tessera version: takes no arguments (got '" << next << "')\n";
        return tessera::cli::kExitUsage;
      }
      std::cout << "tessera " TESSERA_VERSION << '\n';
      return tessera::cli::kExitOk;
    }
    if (word == "completion") {
      const std::string shell = at + 1 < int(words.size()) ? words[size_t(at) + 1] : "";
      if (shell == "--help" || shell == "-h") {
        std::cout << "Print a shell completion script: tessera completion bash|zsh|fish\n"
                     "  bash: source <(tessera completion bash)   (or save it under /etc/bash_completion.d)\n"
                     "  zsh:  source <(tessera completion zsh)\n"
                     "  fish: tessera completion fish | source\n";
        return tessera::cli::kExitOk;
      }
      if (auto script = tessera::cli::completion_script(app, shell)) {
        std::cout << *script;
        return tessera::cli::kExitOk;
      }
      std::cerr << "tessera completion: " << (shell.empty() ? "no shell named" : "unknown shell '" + shell + "'")
                << " (bash, zsh or fish): `source <(tessera completion bash)`\n";
      return tessera::cli::kExitUsage;
    }
    if (word == "help") {
      // `help mig` is `mig --help`; `help` alone, `--help`; `help nosuch`, a usage error.
      if (at + 1 < int(words.size()) && !words[size_t(at) + 1].starts_with("-") &&
          std::find(names.begin(), names.end(), words[size_t(at) + 1]) == names.end()) {
        const std::string& topic = words[size_t(at) + 1];
        std::cerr << "tessera help: unknown command '" << topic << "' (nearest: "
                  << tessera::join(tessera::nearest(topic, names, 3)) << "); run `tessera --help` for the list\n";
        return tessera::cli::kExitUsage;
      }
      args.erase(args.begin() + at);
      args.push_back(help_flag);
    } else if (std::find(names.begin(), names.end(), word) == names.end()) {
      std::cerr << "tessera: unknown command '" << word << "' (nearest: " << tessera::join(tessera::nearest(word, names, 3))
                << "); run `tessera --help` for the list\n";
      return tessera::cli::kExitUsage;
    }
  }

  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (!explain_usage_error(app, words)) app.exit(e);
    return tessera::cli::kExitUsage;
  }
  return exit_code;
}

namespace {

// Passes everything to `next`, counting it, and with `keep` keeps a copy
// (was anything written to stdout? what did stderr say?).
class TapBuf : public std::streambuf {
 public:
  TapBuf(std::streambuf* next, bool keep) : next_(next), keep_(keep) {}
  std::size_t count = 0;
  std::string text;

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    count += static_cast<std::size_t>(n);
    if (keep_) text.append(s, static_cast<std::size_t>(n));
    return next_->sputn(s, n);
  }
  int sync() override { return next_->pubsync(); }

 private:
  std::streambuf* next_;
  bool keep_;
};

}  // namespace

// With --json, a command that fails before it writes its JSON still writes one
// JSON object on stdout: {"error": {"command", "exit_code", "message"}}, the
// message being what it said on stderr (docs/cli.md, "JSON on failure").
int main(int argc, char** argv) {
  const bool json = std::any_of(argv + 1, argv + argc, [](const char* a) { return std::string_view(a) == "--json"; });
  if (!json) return tessera_main(argc, argv);
  TapBuf out(std::cout.rdbuf(), false);
  TapBuf err(std::cerr.rdbuf(), true);
  std::streambuf* const old_out = std::cout.rdbuf(&out);
  std::streambuf* const old_err = std::cerr.rdbuf(&err);
  const int code = tessera_main(argc, argv);
  std::cout.flush();
  std::cerr.flush();
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  if (code == tessera::cli::kExitOk || out.count > 0) return code;
  std::string command = "tessera";
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) command += std::string(" ") + argv[i];
  std::string message = err.text;
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const nlohmann::json error = {{"error", {{"command", command}, {"exit_code", code}, {"message", message}}}};
  std::cout << error.dump(2) << std::endl;
  return code;
}
