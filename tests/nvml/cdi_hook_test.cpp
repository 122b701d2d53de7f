// tessera-cdi-hook run as a container runtime runs a CDI createContainer
// hook: the container's OCI state on stdin naming its bundle, whose
// config.json names the root filesystem. The root here is a directory of the
// test's own with a linker configuration and the simulated driver's
// libcuda.so.1 where a CDI spec mounts it; the cache is read back with the
// host's `ldconfig -p -C`, as `ldconfig -p` in the container reads it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/run.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::RunResult;
using testing::TempDir;

const std::string kHook = TESSERA_CDI_HOOK;
const std::string kLibcuda = TESSERA_SIM_CUDA;  // a real shared object, as the driver's would be
constexpr const char* kLibDir = "/usr/lib/x86_64-linux-gnu";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A bundle (config.json, root.path "rootfs") whose root has an image's
// linker configuration and the driver's libcuda.so.1 mounted where CDI puts it.
struct Bundle {
  TempDir tmp;
  std::string dir = tmp.path() + "/bundle";
  std::string root = dir + "/rootfs";

  Bundle() {
    fs::create_directories(root + "/etc/ld.so.conf.d");
    fs::create_directories(root + kLibDir);
    std::ofstream(root + "/etc/ld.so.conf") << "include /etc/ld.so.conf.d/*.conf\n";
    fs::copy_file(kLibcuda, root + kLibDir + "/libcuda.so.1");
    std::ofstream(dir + "/config.json") << R"({"ociVersion":"1.2.1","process":{"args":["sh"]},"root":{"path":"rootfs"}})";
  }
  std::string state() const { return R"({"ociVersion":"1.2.1","id":"c1","status":"creating","pid":7,"bundle":")" + dir + "\"}"; }
  RunResult hook(const std::vector<std::string>& args, const std::string& input = "") const {
    std::vector<std::string> argv{kHook};
    argv.insert(argv.end(), args.begin(), args.end());
    // A hook that refuses its command line exits before it reads the state:
    // writing it then must not kill the test (SIGPIPE).
    ::signal(SIGPIPE, SIG_IGN);
    return testing::run(argv, input.empty() ? state() : input);
  }
  // What `ldconfig -p` in the container would list.
  std::string cache() const { return testing::run({"/sbin/ldconfig", "-p", "-C", root + "/etc/ld.so.cache"}).out; }
};

TEST(CdiHook, UpdateLdcacheListsTheDriversLibrariesInTheContainersCache) {
  Bundle b;
  EXPECT_EQ(b.cache().find("libcuda.so.1"), std::string::npos) << "the image's cache before the hook";
  const auto r = b.hook({"update-ldcache", "--folder", kLibDir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(b.cache().find(std::string("libcuda.so.1 (libc6,x86-64) => ") + kLibDir + "/libcuda.so.1"), std::string::npos)
      << b.cache();
  EXPECT_NE(read_text(b.root + "/etc/ld.so.conf.d/00-tessera-cdi.conf").find(std::string(kLibDir) + "\n"),
            std::string::npos);
  // An absolute root.path works the same.
  std::ofstream(b.dir + "/config.json") << R"({"root":{"readonly":false,"path":")" + b.root + "\"}}";
  EXPECT_EQ(b.hook({"update-ldcache", "--folder", kLibDir}).exit_code, 0);
}

TEST(CdiHook, CreateSymlinksMakesLibcudaSoAndLeavesWhatIsThere) {
  Bundle b;
  const std::string link = std::string(kLibDir) + "/libcuda.so";
  auto r = b.hook({"create-symlinks", "--link", "libcuda.so.1::" + link});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fs::read_symlink(b.root + link), "libcuda.so.1");
  EXPECT_TRUE(fs::exists(b.root + link)) << "resolves inside the root";
  // The image's own file stays.
  fs::remove(b.root + link);
  std::ofstream(b.root + link) << "the image's";
  r = b.hook({"create-symlinks", "--link", "libcuda.so.1::" + link, "--link", "a::/new/dir/b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(b.root + link), "the image's");
  EXPECT_EQ(fs::read_symlink(b.root + "/new/dir/b"), "a") << "parents made";
}

// An image whose directories are symlinks out of its root cannot steer the
// hook onto the host: paths resolve inside the root (the hook chroot()s).
TEST(CdiHook, SymlinksInTheImageStayInsideItsRoot) {
  Bundle b;
  TempDir host;
  fs::create_directory_symlink(host.path(), b.root + "/escape");
  auto r = b.hook({"create-symlinks", "--link", "x::/escape/made"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(host.path() + "/made"))) << "made on the host";
  EXPECT_NE(r.err.find("0 of 1 links made"), std::string::npos) << r.err;
  fs::remove_all(b.root + "/etc/ld.so.conf.d");
  fs::create_directory_symlink(host.path(), b.root + "/etc/ld.so.conf.d");
  r = b.hook({"update-ldcache", "--folder", kLibDir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(host.path() + "/00-tessera-cdi.conf"));
}

// Bad input: a state or bundle it cannot use fails the container (exit 1); a
// wrong command line is exit 2; nothing is changed in the root.
TEST(CdiHook, BadInputIsRefusedAndChangesNothing) {
  Bundle b;
  const std::vector<std::pair<std::string, std::string>> states = {
      {"", "no usable \"bundle\""},
      {R"({"id":"c1"})", "no usable \"bundle\""},
      {R"({"bundle":"relative/path"})", "is not an absolute path"},
      {R"({"bundle":"/nonexistent-bundle"})", "cannot be opened"},
      {R"({"bundle":7})", "no usable \"bundle\""},
  };
  for (const auto& [state, why] : states) {
    const auto r = b.hook({"update-ldcache", "--folder", kLibDir}, state.empty() ? "not json" : state);
    EXPECT_EQ(r.exit_code, 1) << state;
    EXPECT_NE(r.err.find(why), std::string::npos) << state << ": " << r.err;
  }
  std::ofstream(b.dir + "/config.json") << R"({"root":{"readonly":true}})";
  auto r = b.hook({"update-ldcache", "--folder", kLibDir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has no usable root.path"), std::string::npos) << r.err;
  std::ofstream(b.dir + "/config.json") << R"({"root":{"path":"missing"}})";
  r = b.hook({"update-ldcache", "--folder", kLibDir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;

  const std::vector<std::pair<std::vector<std::string>, std::string>> lines = {
      {{}, "usage"},
      {{"frobnicate"}, "unknown command \"frobnicate\""},
      {{"update-ldcache"}, "needs --folder DIR"},
      {{"update-ldcache", "--folder", "usr/lib"}, "not an absolute path in the container"},
      {{"update-ldcache", "--folder", "/usr/../etc"}, "not an absolute path in the container"},
      {{"update-ldcache", "--link", "a::/b"}, "unknown argument \"--link\""},
      {{"update-ldcache", "--folder"}, "--folder needs a value"},
      {{"update-ldcache", "--folder", "/x", "--ldconfig", "ldconfig"}, "is not an absolute path"},
      {{"create-symlinks", "--link", "libcuda.so.1"}, "is not TARGET::LINK"},
      {{"create-symlinks", "--link", "::/x"}, "is not TARGET::LINK"},
      {{"create-symlinks", "--link", "a::relative"}, "is not TARGET::LINK"},
  };
  for (const auto& [args, why] : lines) {
    const auto res = b.hook(args);
    EXPECT_EQ(res.exit_code, 2) << why;
    EXPECT_NE(res.err.find(why), std::string::npos) << why << ": " << res.err;
  }
  EXPECT_FALSE(fs::exists(b.root + "/etc/ld.so.cache"));
  EXPECT_FALSE(fs::exists(b.root + "/etc/ld.so.conf.d/00-tessera-cdi.conf"));
  EXPECT_EQ(b.hook({"--help"}).exit_code, 0);
}

// A hook for any host: the runtime runs it in the host's namespaces, with
// the host's C library whatever its version, so it links none at all (no
// program interpreter, no dynamic section).
TEST(CdiHook, NeedsNoLibraryOfTheHost) {
  const auto r = testing::run({"/usr/bin/readelf", "--program-headers", "--dynamic", "--wide", kHook});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("LOAD"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("INTERP"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(NEEDED)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tessera
