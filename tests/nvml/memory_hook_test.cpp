// tessera-memory-hook, the quota's driver backend, run as a container runtime
// runs a CDI createRuntime hook: the container's OCI state on stdin, on the
// host (and with --clear as its poststop hook). Underneath, the simulated NVML (its memory-limit rules are NVIDIA's,
// implemented in sim/nvml on their own); the driver's limit is read back
// through the production wrapper, as another process on the node would. The
// container's process is described by a proc tree and a cgroup v2 tree of
// the test's own (--proc-root, --cgroup-root), so a host with cgroup v1 runs
// the same cases.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim_node.hpp"

namespace tessera {
namespace {

using testing::RunResult;
using testing::SimNode;
using testing::TempDir;

const std::string kHook = TESSERA_MEMORY_HOOK;
constexpr uint64_t kGiB = 1ULL << 30;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// One container on a node: its process (pid 4242) in the cgroup
// /kubepods/pod-a/ctr-1, its ledger directory with the limits file.
struct Container {
  TempDir tmp;
  std::string proc = tmp.path() + "/proc";
  std::string cgroups = tmp.path() + "/cgroup";
  std::string cgroup = cgroups + "/kubepods/pod-a/ctr-1";
  std::string ledger = tmp.path() + "/ledgers/nvidia.com_gpu-0123456789abcdef";
  std::string limits = ledger + "/limits";
  std::string record = ledger + "/driver-limits";

  Container() {
    std::filesystem::create_directories(proc + "/4242");
    std::filesystem::create_directories(cgroup);
    std::filesystem::create_directories(ledger);
    write_text(cgroups + "/cgroup.controllers", "cpuset cpu io memory pids misc dmem\n");
    write_text(proc + "/4242/cgroup", "0::/kubepods/pod-a/ctr-1\n");
  }
  void set_limits(const std::vector<std::pair<std::string, uint64_t>>& devices) const {
    std::string text = "tessera-limits 1\nkey nvidia.com_gpu-0123456789abcdef\n";
    for (size_t k = 0; k < devices.size(); ++k)
      text += std::to_string(k) + " " + devices[k].first + " " + std::to_string(devices[k].second) + "\n";
    write_text(limits, text);
  }
  RunResult hook(const SimNode& node, const std::string& state = R"({"ociVersion":"1.2.1","id":"c1",)"
                                                                R"("status":"created","pid":4242,"bundle":"/b"})",
                 std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {kHook, "--limits", limits, "--nvml", testing::kSimLibrary, "--cgroup-root",
                                     cgroups, "--proc-root", proc};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::run(argv, state, {"TESSERA_SIM=" + node.dir(), testing::kLateSanitizerEnv});
  }
};

std::string uuid_of(const nvml::Session& s, uint32_t index) { return OK(OK(s.device(index)).uuid()); }

// The driver holds each whole GPU of the share to its quota in whole MiB (as NVIDIA's own
// hook sets NVIDIA_GPU_MEMORY_LIMIT, so both set one limit), read back, and the record says
// so; the hook leaves the cgroup's other GPUs alone.
TEST(MemoryHook, TheDriverHoldsTheContainersCgroupToEachWholeGpusQuota) {
  SimNode node("H100-SXM5-80GB", 3, {"--driver-version", "615.71.09"});
  auto session = node.open();
  Container c;
  c.set_limits({{uuid_of(session, 0), 10 * kGiB + 12345}, {uuid_of(session, 2), 20 * kGiB}});
  const auto r = c.hook(node);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (auto [index, bytes] : {std::pair{0u, 10 * kGiB}, {2u, 20 * kGiB}}) {
    auto got = OK(OK(session.device(index)).memory_limits(c.cgroup));
    ASSERT_TRUE(got) << "GPU " << index;
    EXPECT_EQ(got->hard, bytes);
    EXPECT_EQ(got->soft, 0u) << "a cap, not a reservation: a soft limit is reserved in every ancestor and outlives the cgroup";
  }
  EXPECT_EQ(OK(OK(session.device(1)).memory_limits(c.cgroup)), std::nullopt);
  EXPECT_EQ(read_text(c.record), "tessera-driver-limits 1\n" + uuid_of(session, 0) + " " + std::to_string(10 * kGiB) +
                                     " " + c.cgroup + "\n" + uuid_of(session, 2) + " " + std::to_string(20 * kGiB) +
                                     " " + c.cgroup + "\n");
  EXPECT_NE(r.err.find("the driver holds cgroup " + c.cgroup), std::string::npos) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(c.record.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

// Where the driver cannot hold a device, the library alone does, and the
// hook says why: a MIG device, a driver older than R615, cgroup v1, a driver
// that refuses (not root). The container still starts (exit 0), no record
// names the device, and a record left by an earlier container goes.
TEST(MemoryHook, WhatTheDriverCannotHoldIsLeftToTheLibraryAndSaid) {
  auto expect_library = [](const RunResult& r, const Container& c, const std::string& why) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("the quota library holds"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(c.record)) << why;
  };
  {  // an older driver
    SimNode node("H100-SXM5-80GB", 1);
    auto session = node.open();
    Container c;
    c.set_limits({{uuid_of(session, 0), kGiB}});
    write_text(c.record, "tessera-driver-limits 1\n");  // an earlier container's
    expect_library(c.hook(node), c, "nvmlDeviceSetMemoryLimits_v1: Not Supported");
  }
  {  // cgroup v1: no unified line in /proc/<pid>/cgroup
    SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09"});
    auto session = node.open();
    Container c;
    c.set_limits({{uuid_of(session, 0), kGiB}});
    // As a v1 kernel lists it (with "0::/" though no unified hierarchy is mounted at the root).
    std::filesystem::remove(c.cgroups + "/cgroup.controllers");
    write_text(c.proc + "/4242/cgroup", "12:cpu,memory:/kubepods/pod-a/ctr-1\n11:pids:/kubepods/pod-a/ctr-1\n0::/\n");
    expect_library(c.hook(node), c, "cgroup v1), the container's memory cgroup /kubepods/pod-a/ctr-1");
    EXPECT_EQ(OK(OK(session.device(0)).memory_limits(c.cgroup)), std::nullopt);
  }
  {  // not allowed to set limits
    SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09", "--unprivileged"});
    auto session = node.open();
    Container c;
    c.set_limits({{uuid_of(session, 0), kGiB}});
    expect_library(c.hook(node), c, "nvmlDeviceSetMemoryLimits_v1: Insufficient Permissions");
  }
  {  // a MIG device: not even asked
    SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09", "--mig"});
    auto session = node.open();
    auto gpu = OK(session.device(0));
    auto gi = OK(gpu.create_gpu_instance(OK(gpu.gpu_instance_profile(0)).id));
    (void)OK(gi.create_compute_instance(0));
    const std::string mig = OK(OK(gpu.mig_devices()).at(0).uuid());
    Container c;
    c.set_limits({{mig, kGiB}});
    expect_library(c.hook(node), c, "no memory limits for MIG devices");
  }
  {  // NVML is not there at all
    SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09"});
    Container c;
    c.set_limits({{"GPU-11111111-2222-3333-4444-555555555555", kGiB}});
    const auto r = c.hook(node, R"({"id":"c1","pid":4242})", {"--nvml", "/nonexistent/libnvidia-ml.so.1"});
    expect_library(r, c, "NVML cannot be loaded");
  }
}

// A cgroup path the driver would be asked to limit must name the
// container's own directory: one with ".." in it, or one that is not there,
// is never handed to the driver.
TEST(MemoryHook, ACgroupPathThatLeavesItsTreeIsNeverLimited) {
  SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09"});
  auto session = node.open();
  Container c;
  c.set_limits({{uuid_of(session, 0), kGiB}});
  write_text(c.proc + "/4242/cgroup", "0::/kubepods/pod-a/ctr-1/../../..\n");
  auto r = c.hook(node);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("not one a limit can name"), std::string::npos) << r.err;
  EXPECT_EQ(OK(OK(session.device(0)).memory_limits(c.cgroups)), std::nullopt);
  write_text(c.proc + "/4242/cgroup", "0::/kubepods/pod-a/gone\n");
  r = c.hook(node);
  EXPECT_NE(r.err.find("cgroup directory is missing"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(c.record));
  // The root cgroup (what a createContainer hook sees of pid 1 in the
  // container's cgroup namespace, or a host process): refused, never capped.
  write_text(c.proc + "/4242/cgroup", "0::/\n");
  r = c.hook(node);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("in the root cgroup"), std::string::npos) << r.err;
  EXPECT_EQ(OK(OK(session.device(0)).memory_limits(c.cgroups)), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(c.record));
}

// --clear, the poststop hook: every limit the container's own record names
// is cleared (NVML's "no limit", soft 0 and hard NVML_DEVICE_MEMORY_LIMIT_MAX),
// also once its cgroup is gone, and its record goes. A later container of
// the same share (a restart: its record replaced driver-limits) keeps its
// limits when the earlier one's poststop runs; with no record of its own a
// container's poststop changes nothing and says so.
TEST(MemoryHook, ClearAtPoststopRemovesOnlyThisContainersLimitsEvenAfterItsCgroupIsGone) {
  SimNode node("H100-SXM5-80GB", 2, {"--driver-version", "615.71.09"});
  auto session = node.open();
  Container c;
  c.set_limits({{uuid_of(session, 0), 10 * kGiB}, {uuid_of(session, 1), 10 * kGiB}});
  ASSERT_EQ(c.hook(node).exit_code, 0);
  ASSERT_TRUE(OK(OK(session.device(1)).memory_limits(c.cgroup)));
  EXPECT_EQ(read_text(c.record + ".c1"), read_text(c.record));
  EXPECT_NE(read_text(c.ledger + "/memory-hook.log").find("the driver holds cgroup " + c.cgroup), std::string::npos);
  // The share's next container (c2, its own cgroup) starts before c1's
  // poststop runs, as a restart does.
  const std::string second = c.cgroups + "/kubepods/pod-a/ctr-2";
  std::filesystem::create_directories(second);
  std::filesystem::create_directories(c.proc + "/4343");
  write_text(c.proc + "/4343/cgroup", "0::/kubepods/pod-a/ctr-2\n");
  ASSERT_EQ(c.hook(node, R"({"id":"c2","status":"created","pid":4343})").exit_code, 0);
  std::filesystem::remove(c.cgroup);  // the runtime removed c1's cgroup before its poststop
  auto r = c.hook(node, R"({"ociVersion":"1.2.1","id":"c1","status":"stopped","bundle":"/b"})", {"--clear"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("the driver no longer limits cgroup " + c.cgroup), std::string::npos) << r.err;
  for (uint32_t g : {0u, 1u}) {
    EXPECT_EQ(OK(OK(session.device(g)).memory_limits(c.cgroup)), std::nullopt) << g;
    EXPECT_TRUE(OK(OK(session.device(g)).memory_limits(second))) << "c2's limit on GPU " << g << " stays";
  }
  EXPECT_FALSE(std::filesystem::exists(c.record + ".c1"));
  EXPECT_NE(read_text(c.record).find(second), std::string::npos) << "driver-limits is c2's: " << read_text(c.record);
  EXPECT_NE(read_text(c.ledger + "/memory-hook.log").find("no longer limits"), std::string::npos) << "appended at poststop";
  r = c.hook(node, R"({"id":"c1"})", {"--clear"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no driver-limits record of container c1"), std::string::npos) << r.err;
  // c2's own poststop as CRI-O's crun gives it, "pid": 0 for the process
  // that is gone: its limits and driver-limits go.
  r = c.hook(node, R"({"ociVersion":"1.0.0","id":"c2","pid":0,"status":"stopped","bundle":"/b"})", {"--clear"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(OK(OK(session.device(0)).memory_limits(second)), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(c.record));
  EXPECT_FALSE(std::filesystem::exists(c.record + ".c2"));
}

// Bad input fails the container's creation (exit 1) with a message that
// says what is wrong, and asks the driver for nothing: an OCI state that is
// not one, a limits file that is missing, a symlink or malformed.
TEST(MemoryHook, BadInputFailsTheContainerAndChangesNothing) {
  SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09"});
  auto session = node.open();
  const std::string uuid = uuid_of(session, 0);
  Container c;
  c.set_limits({{uuid, kGiB}});
  const std::vector<std::pair<std::string, std::string>> states = {
      {"", "not a JSON object"},
      {"[4242]", "not a JSON object"},
      {R"({"id":"c1"})", "no \"pid\""},
      {R"({"pid":4242})", "no \"id\""},
      {R"({"id":"c1","pid":"4242"})", "not a positive integer"},
      {R"({"id":"c1","pid":-1})", "not a positive integer"},
      {R"({"id":"c1","pid":0})", "no \"pid\""},  // createRuntime needs one; 0 is crun's "gone"
      {R"({"id":"c1","pid":00})", "not a positive integer"},
      {R"({"id":"c1","pid":0,"pid":0})", "twice"},
      {R"({"id":"c1","pid":99999999999})", "not a positive integer"},
      {R"({"id":"c1","pid":4242,"pid":4243})", "twice"},
      {R"({"id":"c1","id":"c2","pid":4242})", "twice"},
      {R"({"id":"../../etc","pid":4242})", "not a container id"},
      {R"({"id":".hidden","pid":4242})", "not a container id"},
      {R"({"id":"a\/b","pid":4242})", "not a container id"},
      {R"({"id":7,"pid":4242})", "not a container id"},
      {R"({"id":"c1","pid":4242} trailing)", "follows the object"},
      {R"({"id":"c1","pid":4242,"annotations":{"a":"b})", "not closed"},
      {R"({"id":"c1","pid":4242,"x":"\q"})", "unknown escape"},
      {R"({"id":"c1","pid":4242,"x":)" + std::string(100, '[') + std::string(100, ']') + "}", "deeper than 64"},
      {std::string(2 << 20, ' '), "over 1 MiB"},
  };
  for (const auto& [state, why] : states) {
    const auto r = c.hook(node, state);
    EXPECT_EQ(r.exit_code, 1) << state.substr(0, 60);
    EXPECT_NE(r.err.find(why), std::string::npos) << state.substr(0, 60) << ": " << r.err;
  }
  // Escaped keys and nested objects are skipped whole; "pid" is found.
  EXPECT_EQ(c.hook(node, R"({"a\"pid":1,"annotations":{"pid":"x","k":[1,{"pid":2}]},"pid":4242,"id":"c1"})").exit_code, 0);
  EXPECT_NVML_OK(OK(session.device(0)).set_memory_limits(c.cgroup, 0, ~0ULL));
  std::filesystem::remove(c.record);
  std::filesystem::remove(c.record + ".c1");

  const std::string good = R"({"id":"c1","pid":4242})";
  write_text(c.limits, "tessera-limits 1\nkey k\n0 " + uuid + " lots\n");
  auto r = c.hook(node, good);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not valid: line 3"), std::string::npos) << r.err;
  std::filesystem::remove(c.limits);
  std::filesystem::create_symlink("/etc/passwd", c.limits);
  r = c.hook(node, good);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot be opened"), std::string::npos) << r.err;
  std::filesystem::remove(c.limits);
  r = c.hook(node, good);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot be opened"), std::string::npos) << r.err;
  EXPECT_EQ(OK(OK(session.device(0)).memory_limits(c.cgroup)), std::nullopt) << "nothing asked of the driver";
  EXPECT_FALSE(std::filesystem::exists(c.record));

  // The command line.
  r = testing::run({kHook});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--limits FILE is required"), std::string::npos) << r.err;
  r = testing::run({kHook, "--limits", c.limits, "--bogus", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown argument \"--bogus\""), std::string::npos) << r.err;
  r = testing::run({kHook, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("createRuntime hook"), std::string::npos) << r.out;
}

// Through a real runtime: Debian's runc creates a container from a bundle
// whose config names the hook as the CDI spec does (createRuntime, then
// poststop with --clear), in a cgroup of the test's own. The hook must have
// seen the container's process as the host does and named its own cgroup:
// on a cgroup v2 host the simulated driver then caps that cgroup (and the
// poststop clears it); on cgroup v1 the log names the container's memory
// cgroup and the library keeps the quota. Needs root, as runc does.
std::vector<std::string> shared_objects(const std::string& program) {
  std::vector<std::string> out{program};
  const auto r = testing::run({"/usr/bin/ldd", program});
  std::istringstream lines(r.out);
  for (std::string word; lines >> word;)
    if (word.starts_with("/")) out.push_back(word);
  return out;
}

TEST(MemoryHook, RealRuncRunsItAtCreateRuntimeOnTheContainersOwnCgroup) {
  ASSERT_EQ(::geteuid(), 0u) << "runs Debian's runc, which needs root (./x test runs as root)";
  const std::string runc = "/usr/sbin/runc";
  ASSERT_TRUE(std::filesystem::exists(runc)) << "runc is missing: scripts/setup.sh --e2e installs Debian's";
  SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09"});
  auto session = node.open();
  Container c;
  c.set_limits({{uuid_of(session, 0), 4 * kGiB}});
  const std::string bundle = c.tmp.path() + "/bundle", rootfs = bundle + "/rootfs", state = c.tmp.path() + "/runc";
  for (const auto& file : shared_objects("/bin/sleep")) {
    std::filesystem::create_directories(rootfs + std::filesystem::path(file).parent_path().string());
    std::filesystem::copy_file(std::filesystem::canonical(file), rootfs + file);
    std::filesystem::permissions(rootfs + file, std::filesystem::perms::owner_all);
  }
  for (const char* d : {"/proc", "/dev", "/sys", "/tmp"}) std::filesystem::create_directories(rootfs + d);
  auto spec_made = testing::run({runc, "spec", "--bundle", bundle});
  ASSERT_EQ(spec_made.exit_code, 0) << spec_made.err;
  nlohmann::json config;
  {
    std::ifstream in(bundle + "/config.json");
    config = nlohmann::json::parse(in);
  }
  const std::string id = "tessera-hook-" + std::to_string(::getpid());
  const std::string cgroup_path = "/" + id;
  config["process"]["terminal"] = false;
  config["process"]["args"] = {"/bin/sleep", "600"};
  config["root"] = {{"path", "rootfs"}, {"readonly", true}};
  config["linux"]["cgroupsPath"] = cgroup_path;
  const std::vector<std::string> env{"TESSERA_SIM=" + node.dir(), testing::kLateSanitizerEnv};
  // As sharing::memory_hooks writes them into the CDI spec.
  config["hooks"]["createRuntime"] = {{{"path", kHook},
                                       {"args", {"tessera-memory-hook", "--limits", c.limits, "--nvml", testing::kSimLibrary}},
                                       {"env", env}}};
  config["hooks"]["poststop"] = {{{"path", kHook},
                                  {"args", {"tessera-memory-hook", "--limits", c.limits, "--clear", "--nvml",
                                            testing::kSimLibrary}},
                                  {"env", env}}};
  std::ofstream(bundle + "/config.json") << config.dump(2);
  auto sh = [&](const std::string& command) { return testing::run({"/bin/sh", "-c", command}); };
  // The container's own stdio: /dev/null and files, so that no pipe of ours stays open in it.
  const std::string runc_cmd = runc + " --root " + state;
  auto created = sh(runc_cmd + " create --bundle " + bundle + " " + id + " </dev/null >" + c.tmp.path() +
                    "/runc.out 2>" + c.tmp.path() + "/runc.err");
  struct Delete {
    std::function<void()> f;
    ~Delete() { f(); }
  } cleanup{[&] { sh(runc_cmd + " delete --force " + id + " >/dev/null 2>&1"); }};
  ASSERT_EQ(created.exit_code, 0) << read_text(c.tmp.path() + "/runc.err");
  const std::string log = read_text(c.ledger + "/memory-hook.log");
  const bool v2 = std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers");
  if (v2) {
    const std::string cgroup = "/sys/fs/cgroup" + cgroup_path;
    EXPECT_NE(log.find("the driver holds cgroup " + cgroup + " to " + std::to_string(4 * kGiB)), std::string::npos)
        << log;
    auto got = OK(OK(session.device(0)).memory_limits(cgroup));
    ASSERT_TRUE(got) << log;
    EXPECT_EQ(got->hard, 4 * kGiB);
  } else {
    EXPECT_NE(log.find("the quota library holds " + std::to_string(4 * kGiB) + " bytes"), std::string::npos) << log;
    EXPECT_NE(log.find("the container's memory cgroup " + cgroup_path), std::string::npos)
        << "the hook must name the container's own cgroup, as the host sees it: " << log;
    EXPECT_FALSE(std::filesystem::exists(c.record)) << "cgroup v1: no driver limit recorded";
  }
  auto deleted = sh(runc_cmd + " delete --force " + id + " 2>&1");
  EXPECT_EQ(deleted.exit_code, 0) << deleted.out;
  const std::string after = read_text(c.ledger + "/memory-hook.log");
  if (v2) {
    EXPECT_NE(after.find("the driver no longer limits cgroup /sys/fs/cgroup" + cgroup_path), std::string::npos) << after;
    EXPECT_EQ(OK(OK(session.device(0)).memory_limits("/sys/fs/cgroup" + cgroup_path)), std::nullopt);
  } else {
    EXPECT_NE(after.find("no driver-limits record of container " + id), std::string::npos)
        << "the poststop hook ran with the container's id: " << after;
  }
}

// The hook is a program for any host: it needs glibc only.
TEST(MemoryHook, NeedsOnlyTheCLibrary) {
  const auto r = testing::run({"/usr/bin/ldd", kHook});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("libc.so.6"), std::string::npos) << r.out;
  for (const char* lib : {"libstdc++", "libgcc_s", "libm.so", "libasan", "libubsan"})
    EXPECT_EQ(r.out.find(lib), std::string::npos) << lib << " in\n" << r.out;
}

}  // namespace
}  // namespace tessera
