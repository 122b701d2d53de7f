// tessera: plan, apply, expose, isolate and measure shares of NVIDIA GPUs on
// Kubernetes. This is the command-line entry point.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
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
    app.exit(e);
    return tessera::cli::kExitUsage;
  }
  return exit_code;
}
