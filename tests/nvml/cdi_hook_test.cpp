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

// An image built for a newer CUDA than the host's driver carries CUDA's
// forward-compatible driver in /usr/local/cuda/compat (the cuda-compat
// package: libcuda.so.<version> and libcuda.so.1). enable-cuda-compat lists
// its folder before the driver's, so that update-ldcache's cache (which the
// spec runs next) finds the compat libcuda.so.1 first; only where its major
// version is newer than the host's, there is one of it, and the image has a
// linker cache (NVIDIA's rule).
struct CompatBundle : Bundle {
  std::string compat = root + "/usr/local/cuda-13.0/compat";
  explicit CompatBundle(const std::string& version) {
    fs::create_directories(compat);
    fs::create_directory_symlink("cuda-13.0", root + "/usr/local/cuda");  // as CUDA's packages make it
    fs::copy_file(kLibcuda, compat + "/libcuda.so." + version);
    fs::copy_file(kLibcuda, compat + "/libcuda.so.1");
    std::ofstream(root + "/etc/ld.so.cache");  // the image's cache, as any glibc image has one
  }
  // The folder of the first libcuda.so.1 in the container's cache.
  std::string first_libcuda() const {
    const std::string c = cache(), key = "libcuda.so.1 (libc6,x86-64) => ";
    const auto at = c.find(key);
    if (at == std::string::npos) return "none";
    const auto path = c.substr(at + key.size(), c.find('\n', at) - at - key.size());
    return path.substr(0, path.rfind('/'));
  }
  std::string conf() const { return root + "/etc/ld.so.conf.d/00-compat-tessera.conf"; }
};

TEST(CdiHook, EnableCudaCompatPutsANewerForwardCompatibleDriverFirst) {
  CompatBundle b("590.10.01");
  auto r = b.hook({"enable-cuda-compat", "--host-driver-version=550.90.07"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(b.conf()).substr(read_text(b.conf()).find('\n') + 1), "/usr/local/cuda-13.0/compat\n")
      << "the folder as the link resolves inside the root";
  r = b.hook({"update-ldcache", "--folder", kLibDir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(b.first_libcuda(), "/usr/local/cuda-13.0/compat") << b.cache();
  EXPECT_NE(b.cache().find(std::string("=> ") + kLibDir + "/libcuda.so.1"), std::string::npos) << "the driver's stays listed";
  // The spec's form of the option (two words) as well.
  fs::remove(b.conf());
  EXPECT_EQ(b.hook({"enable-cuda-compat", "--host-driver-version", "550.90.07"}).exit_code, 0);
  EXPECT_TRUE(fs::exists(b.conf()));
}

TEST(CdiHook, EnableCudaCompatLeavesTheHostsDriverWhereTheImageIsNotNewer) {
  {
    CompatBundle b("590.10.01");  // the same major as the host's: the host's driver serves it
    ASSERT_EQ(b.hook({"enable-cuda-compat", "--host-driver-version=590.48.01"}).exit_code, 0);
    EXPECT_FALSE(fs::exists(b.conf()));
    ASSERT_EQ(b.hook({"update-ldcache", "--folder", kLibDir}).exit_code, 0);
    EXPECT_EQ(b.first_libcuda(), kLibDir) << b.cache();
  }
  {
    CompatBundle b("535.104.05");  // older than the host's
    EXPECT_EQ(b.hook({"enable-cuda-compat", "--host-driver-version=550.90.07"}).exit_code, 0);
    EXPECT_FALSE(fs::exists(b.conf()));
  }
  {
    CompatBundle b("590.10.01");  // two compat drivers: which one is meant is unknown
    fs::copy_file(kLibcuda, b.compat + "/libcuda.so.595.1.1");
    const auto r = b.hook({"enable-cuda-compat", "--host-driver-version=550.90.07"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.err.find("holds 2 libcuda.so.<version> files"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(b.conf()));
  }
  {
    CompatBundle b("590.10.01");  // no linker cache in the image
    fs::remove(b.root + "/etc/ld.so.cache");
    EXPECT_EQ(b.hook({"enable-cuda-compat", "--host-driver-version=550.90.07"}).exit_code, 0);
    EXPECT_FALSE(fs::exists(b.conf()));
  }
  {
    Bundle b;  // no forward compatibility at all
    EXPECT_EQ(b.hook({"enable-cuda-compat", "--host-driver-version=550.90.07"}).exit_code, 0);
    EXPECT_FALSE(fs::exists(b.root + "/etc/ld.so.conf.d/00-compat-tessera.conf"));
  }
}

// Without a configuration that includes ld.so.conf.d (a minimal image), the
// driver's folders go on ldconfig's command line, so the cache still lists them.
TEST(CdiHook, UpdateLdcacheWithoutTheImagesConfigurationNamesTheFolders) {
  Bundle b;
  fs::remove(b.root + "/etc/ld.so.conf");
  ASSERT_EQ(b.hook({"update-ldcache", "--folder", kLibDir}).exit_code, 0);
  EXPECT_NE(b.cache().find(std::string("=> ") + kLibDir + "/libcuda.so.1"), std::string::npos) << b.cache();
}

// disable-device-node-modification, run as runc runs it: in the container's
// own mount namespace (here one of the test's, made by unshare), where it
// mounts a read-only copy of the host's parameters with ModifyDeviceFiles 0
// over the container's /proc/driver/nvidia/params. The host's file and the
// test's namespace are untouched.
struct ParamsBundle : Bundle {
  std::string host = tmp.path() + "/host-params";
  std::string target = root + "/proc/driver/nvidia/params";
  ParamsBundle() {
    std::ofstream(host) << "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileMode: 438\n";
    fs::create_directories(root + "/proc/driver/nvidia");
    std::ofstream(target) << "as the container's procfs shows it\n";
    std::ofstream(tmp.path() + "/state") << state();
  }
  // Runs the hook in a new mount namespace, then reports what the container
  // would see there: the file, whether it is a mount point, and whether root can write it.
  RunResult masked(const std::vector<std::string>& extra = {}) const {
    std::string args;
    for (const auto& a : extra) args += " '" + a + "'";
    const std::string script = "'" + kHook + "' disable-device-node-modification --params '" + host + "'" + args + " < '" +
                               tmp.path() + "/state' || exit $?; echo ---; cat '" + target + "'; echo ---; grep -c ' " +
                               target + " ' /proc/self/mountinfo; (echo x >> '" + target +
                               "') 2>/dev/null && echo writable || echo read-only";
    return testing::run({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script});
  }
};

TEST(CdiHook, DisableDeviceNodeModificationMountsTheParametersWithModificationOff) {
  ParamsBundle b;
  const auto r = b.masked();
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.out, "---\nResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\nDeviceFileMode: 438\n---\n1\nread-only\n") << r.err;
  EXPECT_EQ(read_text(b.host), "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileMode: 438\n");
  EXPECT_EQ(read_text(b.target), "as the container's procfs shows it\n") << "changed outside the container's namespace";
}

TEST(CdiHook, DisableDeviceNodeModificationChangesNothingItNeedNot) {
  ParamsBundle b;
  std::ofstream(b.host) << "ModifyDeviceFiles: 0\n";  // already off on the host
  auto r = b.masked();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "---\nas the container's procfs shows it\n---\n0\nwritable\n");
  fs::remove(b.host);  // no driver parameters on the host
  r = b.masked();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no driver parameters to change"), std::string::npos) << r.err;
  // The container's procfs shows no driver: nothing to mount over.
  std::ofstream(b.host) << "ModifyDeviceFiles: 1\n";
  fs::remove_all(b.root + "/proc/driver");
  const auto none = b.hook({"disable-device-node-modification", "--params", b.host});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.err.find("the container sees no /proc/driver/nvidia/params"), std::string::npos) << none.err;
}

// An image whose /proc/driver/nvidia/params is a link elsewhere (a real
// procfs never is) cannot have the copy mounted over another file.
TEST(CdiHook, DisableDeviceNodeModificationFollowsNoLinkOutOfTheContainer) {
  ParamsBundle b;
  TempDir host;
  std::ofstream(host.path() + "/victim") << "the host's\n";
  fs::remove_all(b.root + "/proc/driver/nvidia");
  fs::create_directory_symlink(host.path(), b.root + "/proc/driver/nvidia");
  std::ofstream(host.path() + "/params") << "the host's\n";
  const auto r = b.masked();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("leads to " + host.path() + "/params: not mounted over"), std::string::npos) << r.err;
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
      {{"enable-cuda-compat"}, "needs --host-driver-version VERSION"},
      {{"enable-cuda-compat", "--host-driver-version=r550"}, "is not a driver version"},
      {{"enable-cuda-compat", "--host-driver-version", "550.90.07; rm"}, "is not a driver version"},
      {{"enable-cuda-compat", "--folder", "/x"}, "unknown argument \"--folder\""},
      {{"disable-device-node-modification", "--params", "params"}, "is not an absolute path"},
      {{"disable-device-node-modification", "--params"}, "--params needs a value"},
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
