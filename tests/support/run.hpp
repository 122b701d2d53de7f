// Runs a program the way a user would and captures what it says.
#pragma once

#include <string>
#include <vector>

namespace tessera::testing {

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] is a path) with optional standard input and extra
// environment entries ("NAME=value").
RunResult run(const std::vector<std::string>& argv, const std::string& input = "",
              const std::vector<std::string>& env = {});

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace tessera::testing
