#include "cli/flags.hpp"

#include <ostream>
#include <set>

namespace tessera::cli {

const std::vector<RenamedFlag>& renamed_flags() {
  static const std::vector<RenamedFlag> table = {
      // -c names a config inside a file (mig, as mig-parted's -c); a file is -f.
      {"plugin", "-c", "--config-file"},
      {"plugin", "--config", "--config-file"},
      {"node", "-c", "--config-file"},
      {"node", "--config", "--config-file"},
      // -o is a file (alerts); plan writes a directory.
      {"plan", "-o", "--output-dir"},
      {"plan", "--output", "--output-dir"},
      // The DRA driver and the exporter say what the device plugin and the node agent say.
      {"dra", "--ignored-xids", "--ignore-xids"},
      {"dra", "--preload", "--quota-preload"},
      {"dra", "--ledger-root", "--quota-ledger-root"},
      {"dra", "--recovery", "--health-recovery"},
      {"exporter", "--ledger-root", "--quota-ledger-root"},
  };
  return table;
}

std::vector<std::string> rewrite_renamed_flags(const std::vector<std::string>& argv, std::ostream& err) {
  // The command path: the words before the first option (tessera's own --log-level VALUE skipped).
  std::string path;
  size_t first = argv.size();
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--log-level") {
      ++i;
      continue;
    }
    if (a.starts_with("--log-level=")) continue;
    if (a.empty() || a[0] == '-') {
      if (!path.empty()) {
        first = i;
        break;
      }
      continue;
    }
    if (path.empty() || path == "fleet") {
      path += (path.empty() ? "" : " ") + a;
      first = i + 1;
    } else {
      first = i;
      break;
    }
  }
  std::vector<std::string> out = argv;
  static std::set<std::string> warned;
  for (size_t i = first; i < out.size(); ++i) {
    std::string& a = out[i];
    if (a == "--") break;
    for (const auto& r : renamed_flags()) {
      if (path != r.command) continue;
      const std::string old_name = r.old_name;
      std::string rest;
      bool hit = false;
      if (a == old_name) {
        hit = true;
      } else if (a.starts_with(old_name + "=")) {
        hit = true;
        rest = a.substr(old_name.size());
      } else if (old_name.size() == 2 && old_name[1] != '-' && a.size() > 2 && a.starts_with(old_name) && a[2] != '-') {
        hit = true;  // -oVALUE
        rest = "=" + a.substr(2);
      }
      if (!hit) continue;
      if (warned.insert(path + " " + old_name).second)
        err << "tessera " << path << ": " << old_name << " is now " << r.new_name
            << " (the old spelling still works; docs/cli.md lists the flags)\n";
      a = std::string(r.new_name) + rest;
      break;
    }
  }
  return out;
}

}  // namespace tessera::cli
