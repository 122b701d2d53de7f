#include "cli/completion.hpp"

#include <CLI/CLI.hpp>

#include <sstream>
#include <vector>

namespace tessera::cli {
namespace {

struct Command {
  std::string path;  // "fleet plan"
  std::vector<std::string> subcommands;
  std::vector<std::string> flags;  // --long and -s spellings shown in --help
  std::vector<std::pair<std::string, std::string>> options;  // (long name, description), for fish
};

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

void walk(CLI::App* app, const std::string& path, std::vector<Command>& out) {
  Command c;
  c.path = path;
  for (const CLI::Option* o : app->get_options([](const CLI::Option* o) { return !o->get_group().empty(); })) {
    for (const auto& l : o->get_lnames()) {
      c.flags.push_back("--" + l);
      c.options.push_back({l, first_line(o->get_description())});
    }
    for (const auto& s : o->get_snames()) c.flags.push_back("-" + s);
  }
  auto subs = app->get_subcommands([](CLI::App*) { return true; });
  for (auto* sub : subs) c.subcommands.push_back(sub->get_name());
  out.push_back(c);
  for (auto* sub : subs) walk(sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// Single-quoted for a shell ('\'' for a quote).
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string bash(const std::vector<Command>& commands) {
  std::ostringstream out;
  out << "# tessera completion for bash: source <(tessera completion bash)\n"
         "_tessera() {\n"
         "  local cur=${COMP_WORDS[COMP_CWORD]} path= i w\n"
         "  # The command path: the words before the cursor that are commands, not options or values.\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    w=${COMP_WORDS[i]}\n"
         "    [[ $w == -* ]] && continue\n"
         "    case \"${path:+$path }$w\" in\n";
  for (const auto& c : commands)
    if (!c.path.empty()) out << "      " << shell_quote(c.path) << ") path=\"${path:+$path }$w\" ;;\n";
  out << "    esac\n"
         "  done\n"
         "  local words\n"
         "  case $path in\n";
  for (const auto& c : commands)
    out << "    " << (c.path.empty() ? "''" : shell_quote(c.path)) << ") words=" << shell_quote(joined(c.subcommands) + " " + joined(c.flags))
        << " ;;\n";
  out << "  esac\n"
         "  if [[ $cur != -* && -n $path ]]; then compopt -o default 2>/dev/null; fi\n"
         "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         "}\n"
         "complete -F _tessera tessera\n";
  return out.str();
}

std::string fish(const std::vector<Command>& commands) {
  std::ostringstream out;
  out << "# tessera completion for fish: tessera completion fish | source\n"
         "complete -c tessera -f\n";
  for (const auto& c : commands) {
    // The condition: the command path typed so far is exactly c.path.
    std::string cond;
    if (c.path.empty()) {
      cond = "__fish_use_subcommand";
    } else {
      std::istringstream words(c.path);
      for (std::string w; words >> w;) cond += (cond.empty() ? "" : "; and ") + std::string("__fish_seen_subcommand_from ") + w;
      if (!c.subcommands.empty())
        cond += "; and not __fish_seen_subcommand_from " + joined(c.subcommands);
    }
    for (const auto& sub : c.subcommands) out << "complete -c tessera -n " << shell_quote(cond) << " -a " << shell_quote(sub) << "\n";
    for (const auto& [name, description] : c.options)
      out << "complete -c tessera -n " << shell_quote(cond) << " -l " << name << " -d " << shell_quote(description) << "\n";
  }
  return out.str();
}

}  // namespace

std::optional<std::string> completion_script(CLI::App& app, const std::string& shell) {
  std::vector<Command> commands;
  walk(&app, "", commands);
  if (shell == "bash") return bash(commands);
  if (shell == "zsh")
    return "# tessera completion for zsh: source <(tessera completion zsh)\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           bash(commands);
  if (shell == "fish") return fish(commands);
  return std::nullopt;
}

}  // namespace tessera::cli
