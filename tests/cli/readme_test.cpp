// The README's commands, as a user would type them: the runnable session runs
// as written (against a simulated node), and every command synopsis names
// options the command has.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/data.hpp"
#include "support/run.hpp"

namespace tessera {
namespace {

using testing::run;
const std::string kBin = TESSERA_BIN;
const std::string kReadme = testing::kSourceDir + "/README.md";

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) {
    if (w.rfind("#", 0) == 0) break;  // a comment
    out.push_back(w);
  }
  return out;
}

// Lines of ```sh blocks that start with `tessera `.
std::vector<std::string> session_lines() {
  std::ifstream in(kReadme);
  std::vector<std::string> out;
  bool in_block = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block && line.find("sh") != std::string::npos;
      continue;
    }
    if (in_block && line.rfind("tessera ", 0) == 0) out.push_back(line);
  }
  return out;
}

TEST(Readme, SessionRunsAsWritten) {
  auto lines = session_lines();
  ASSERT_GE(lines.size(), 5u) << "no `tessera ...` lines in README.md's sh blocks";
  testing::TempDir tmp;
  for (const auto& line : lines) {
    auto words = split(line);
    std::vector<std::string> argv{kBin};
    for (size_t i = 1; i < words.size(); ++i) {
      std::string w = words[i];
      // /tmp/tessera-* are the session's scratch paths: kept inside this test's directory.
      if (w.rfind("/tmp/tessera-", 0) == 0) w = tmp.path() + w.substr(4);
      // Paths relative to the repository root, where the README says to run them.
      else if (w.find('/') != std::string::npos && w[0] != '/' && std::filesystem::exists(testing::kSourceDir + "/" + w))
        w = testing::kSourceDir + "/" + w;
      argv.push_back(w);
    }
    auto r = run(argv, "", {"TESSERA_SIM="});
    EXPECT_EQ(r.exit_code, 0) << line << "\n" << r.out << r.err;
  }
}

// `tessera mig validate -f FILE [-c NAME] ...` in the README's tables: the command exists and
// has every option the synopsis names.
TEST(Readme, EverySynopsisNamesRealOptions) {
  std::ifstream in(kReadme);
  std::stringstream text;
  text << in.rdbuf();
  std::string readme = text.str();
  std::regex span("`(tessera(?: [^`]*)?)`");
  std::regex word("^[a-z][a-z-]*$");
  std::regex option("^\\[?(--?[a-zA-Z][a-zA-Z0-9-]*)");
  size_t checked = 0;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), span); it != std::sregex_iterator(); ++it) {
    std::string synopsis = (*it)[1];
    auto words = split(synopsis);
    std::vector<std::string> argv{kBin};
    size_t i = 1;
    for (; i < words.size() && std::regex_match(words[i], word); ++i) argv.push_back(words[i]);
    argv.push_back("--help");
    auto help = run(argv);
    EXPECT_EQ(help.exit_code, 0) << synopsis << "\n" << help.err;
    for (; i < words.size(); ++i) {
      std::smatch m;
      if (!std::regex_search(words[i], m, option)) continue;
      std::regex listed("(^|[ ,])" + m[1].str() + "([ ,=]|$)", std::regex::multiline);
      EXPECT_TRUE(std::regex_search(help.out, listed)) << synopsis << ": " << m[1] << " is not an option of it\n"
                                                       << help.out;
    }
    ++checked;
  }
  EXPECT_GE(checked, 10u);
}

}  // namespace
}  // namespace tessera
