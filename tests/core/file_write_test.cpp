#include "core/file_write.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "support/run.hpp"

namespace tessera {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr)
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
  if (d) ::closedir(d);
  return out;
}

TEST(ReplaceFile, WritesWholeContentWithItsModeAndLeavesNoAsideFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state";
  for (Flush flush : {Flush::no, Flush::durably}) {
    ASSERT_TRUE(replace_file(path, "first\n", 0600, flush));
    ASSERT_TRUE(replace_file(path, "second\n", 0640, flush));
    EXPECT_EQ(slurp(path), "second\n");
    struct stat st{};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"state"});
  }
}

TEST(ReplaceFile, ReplacesASymlinkInsteadOfFollowingIt) {
  testing::TempDir dir;
  const std::string target = dir.write("target", "untouched");
  const std::string path = dir.path() + "/link";
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  ASSERT_TRUE(replace_file_durably(path, "new"));
  EXPECT_EQ(slurp(target), "untouched");
  struct stat st{};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(slurp(path), "new");
}

TEST(ReplaceFile, AFailedWriteNamesTheFileAndLeavesTheOldOne) {
  testing::TempDir dir;
  const std::string path = dir.write("state", "old");
  const std::string missing = dir.path() + "/no-such-dir/state";
  auto r = replace_file(missing, "new", 0644, Flush::durably);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot create " + missing + ".new."), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("No such file or directory"), std::string::npos) << r.error().message;
  // A directory where the file should be: the rename fails, the aside file goes.
  const std::string blocked = dir.path() + "/blocked";
  ASSERT_EQ(::mkdir(blocked.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((blocked + "/x").c_str(), 0755), 0);
  r = replace_file(blocked, "new", 0644, Flush::no);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("cannot rename into place " + blocked), std::string::npos) << r.error().message;
  EXPECT_EQ(slurp(path), "old");
  auto names = entries(dir.path());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"blocked", "state"}));
}

TEST(ReplaceFile, ConcurrentWritersOfOnePathEachLandWhole) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state";
  std::vector<std::thread> writers;
  std::vector<std::string> contents;
  for (int t = 0; t < 4; ++t) contents.push_back(std::string(64 * 1024, static_cast<char>('a' + t)));
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k)
        if (!replace_file(path, contents[t], 0644, Flush::no)) ++failures;
    });
  for (auto& w : writers) w.join();
  EXPECT_EQ(failures, 0);
  const std::string now = slurp(path);
  EXPECT_NE(std::find(contents.begin(), contents.end(), now), contents.end()) << "a mixed or torn file";
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"state"});
}

}  // namespace
}  // namespace tessera
