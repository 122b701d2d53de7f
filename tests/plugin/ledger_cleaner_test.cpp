// Removing quota ledgers no container holds: by the kubelet's pod-resources
// and the directory names the plugin made, never by what a container wrote.
#include "plugin/ledger_cleaner.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "plugin/pod_fixture.hpp"
#include "sharing/allocate.hpp"
#include "sharing/cdi.hpp"

namespace tessera::plugin {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::AllocatedNode;

// A ledger directory as Allocate leaves it, last changed `age` ago.
std::string make_ledger_dir(const std::string& root, const std::string& key, std::chrono::seconds age) {
  const std::string dir = root + "/" + key;
  fs::create_directories(dir);
  std::ofstream(dir + "/ledger") << "ledger";
  std::ofstream(dir + "/limits") << "limits";
  const auto when = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() - age);
  const utimbuf times{when, when};
  EXPECT_EQ(::utime(dir.c_str(), &times), 0);
  return dir;
}


TEST(LedgerCleaner, KeysAreTheLedgerKeysOfEveryContainersResources) {
  const std::vector<PodDevices> pods{
      {"ml", "llm-0", {{"server", {{"nvidia.com/gpu", {"GPU-0::1", "GPU-0::0"}}}}, {"sidecar", {}}}},
      {"default", "embed", {{"main", {{"nvidia.com/gpu", {"GPU-1::2"}}, {"example.com/other", {"x"}}}}}}};
  const auto keys = held_ledger_keys(pods);
  const std::vector<std::string> two{"GPU-0::0", "GPU-0::1"}, one{"GPU-1::2"}, other{"x"};
  EXPECT_EQ(keys, (std::set<std::string>{sharing::ledger_key("nvidia.com/gpu", two),
                                         sharing::ledger_key("nvidia.com/gpu", one),
                                         sharing::ledger_key("example.com/other", other)}));
  for (const auto& k : keys) EXPECT_TRUE(is_ledger_key(k)) << k;
  for (const char* not_a_key : {"ld.so.preload", "lib", "x-0123456789abcdeF", "x0123456789abcdef", "-0123456789abcdef",
                                "a/b-0123456789abcdef", ".", ".."})
    EXPECT_FALSE(is_ledger_key(not_a_key)) << not_a_key;
}

TEST(LedgerCleaner, RemovesOnlyOldLedgersNoContainerHolds) {
  tessera::testing::TempDir root;
  const std::vector<std::string> a{"GPU-0::0"}, b{"GPU-0::1"}, c{"GPU-0::2"};
  const std::string held = sharing::ledger_key("nvidia.com/gpu", a);
  const std::string stale = sharing::ledger_key("nvidia.com/gpu", b);
  const std::string young = sharing::ledger_key("nvidia.com/gpu", c);
  make_ledger_dir(root.path(), held, 3600s);
  const std::string stale_dir = make_ledger_dir(root.path(), stale, 3600s);
  make_ledger_dir(root.path(), young, 10s);  // just allocated: the kubelet may not list it yet
  std::ofstream(root.path() + "/ld.so.preload") << "/usr/local/tessera/lib/libtessera-cuda.so\n";
  fs::create_directories(root.path() + "/not-a-ledger");
  // Inside the stale directory, links a container of an older layout could
  // have planted: removed as links, their targets untouched.
  tessera::testing::TempDir outside;
  const std::string precious = outside.path() + "/precious";
  std::ofstream(precious) << "keep";
  fs::create_symlink(precious, stale_dir + "/to-a-file");
  fs::create_directory_symlink(outside.path(), stale_dir + "/to-a-directory");
  fs::create_directories(stale_dir + "/nested/deeper");
  std::ofstream(stale_dir + "/nested/deeper/file") << "x";
  const auto when = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() - 3600s);
  const utimbuf times{when, when};
  ASSERT_EQ(::utime(stale_dir.c_str(), &times), 0);

  const auto sweep = remove_stale_ledgers(root.path(), {held}, std::chrono::system_clock::now(), 600s);
  EXPECT_EQ(sweep.removed, std::vector<std::string>{stale});
  EXPECT_EQ(sweep.young, std::vector<std::string>{young});
  EXPECT_TRUE(sweep.errors.empty()) << sweep.errors.front();
  EXPECT_FALSE(fs::exists(stale_dir));
  EXPECT_TRUE(fs::exists(root.path() + "/" + held + "/ledger")) << "a held ledger is never removed, however old";
  EXPECT_TRUE(fs::exists(root.path() + "/" + young + "/ledger"));
  EXPECT_TRUE(fs::exists(root.path() + "/ld.so.preload"));
  EXPECT_TRUE(fs::exists(root.path() + "/not-a-ledger"));
  std::ifstream kept(precious);
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "keep");
  EXPECT_TRUE(fs::exists(outside.path()));

  // A missing root is nothing to do.
  EXPECT_TRUE(remove_stale_ledgers(root.path() + "/absent", {}, std::chrono::system_clock::now(), 0s).errors.empty());
}

// A removed ledger takes its memory hook's CDI spec with it; a held one's,
// and any other file in the spec directory, stay.
// pod-resources omits non-restartable init containers: a ledger no listed
// container holds is kept while a live process holds its slot lock (an
// open-file-description lock on the ledger, as the quota library takes), and
// removed once the lock is gone.
TEST(LedgerCleaner, KeepsALedgerALiveProcessHolds) {
  tessera::testing::TempDir root;
  const std::vector<std::string> ids{"GPU-0::3"};
  const std::string key = sharing::ledger_key("nvidia.com/gpu", ids);
  const std::string dir = make_ledger_dir(root.path(), key, 3600s);
  const int fd = ::open((dir + "/ledger").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  struct flock slot {};
  slot.l_type = F_WRLCK;
  slot.l_whence = SEEK_SET;
  slot.l_start = 5;  // slot 5's byte
  slot.l_len = 1;
  ASSERT_EQ(::fcntl(fd, F_OFD_SETLK, &slot), 0);
  const auto now = std::chrono::system_clock::now();
  auto kept = remove_stale_ledgers(root.path(), {}, now, 600s);
  EXPECT_EQ(kept.in_use, std::vector<std::string>{key});
  EXPECT_TRUE(kept.removed.empty());
  EXPECT_TRUE(fs::exists(dir + "/ledger"));
  ::close(fd);  // the process is gone: the kernel drops its lock
  auto swept = remove_stale_ledgers(root.path(), {}, now, 600s);
  EXPECT_EQ(swept.removed, std::vector<std::string>{key});
  EXPECT_TRUE(swept.in_use.empty());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(LedgerCleaner, ARemovedLedgerTakesItsMemoryHookSpec) {
  tessera::testing::TempDir root, specs;
  std::vector<std::string> a{"GPU-0000::0"}, b{"GPU-0000::1"};
  const std::string held = sharing::ledger_key("nvidia.com/gpu", a);
  const std::string stale = sharing::ledger_key("nvidia.com/gpu", b);
  make_ledger_dir(root.path(), held, 3600s);
  make_ledger_dir(root.path(), stale, 3600s);
  for (const auto& key : {held, stale}) std::ofstream(specs.path() + "/" + sharing::quota_cdi_file(key)) << "{}";
  std::ofstream(specs.path() + "/k8s.device-plugin.nvidia.com-gpu.json") << "{}";
  const auto sweep = remove_stale_ledgers(root.path(), {held}, std::chrono::system_clock::now(), 600s, specs.path());
  EXPECT_EQ(sweep.removed, std::vector<std::string>{stale});
  EXPECT_TRUE(sweep.errors.empty()) << sweep.errors.front();
  EXPECT_FALSE(fs::exists(specs.path() + "/tessera.dev-quota_" + stale + ".json"));
  EXPECT_TRUE(fs::exists(specs.path() + "/tessera.dev-quota_" + held + ".json"));
  EXPECT_TRUE(fs::exists(specs.path() + "/k8s.device-plugin.nvidia.com-gpu.json"));
}

// What a container writes into its own ledger (here: another container's key
// and devices in its header) changes nothing: only names and pod-resources count.
TEST(LedgerCleaner, NothingAContainerWritesMakesItActOnAnother) {
  tessera::testing::TempDir root;
  const std::vector<std::string> mine{"GPU-0::0"}, theirs{"GPU-0::1"};
  const std::string my_key = sharing::ledger_key("nvidia.com/gpu", mine);
  const std::string their_key = sharing::ledger_key("nvidia.com/gpu", theirs);
  const std::string my_dir = make_ledger_dir(root.path(), my_key, 3600s);
  make_ledger_dir(root.path(), their_key, 3600s);
  std::ofstream(my_dir + "/ledger") << "key " << their_key << "\nremove me instead\n";
  const auto sweep = remove_stale_ledgers(root.path(), {my_key, their_key}, std::chrono::system_clock::now(), 0s);
  EXPECT_TRUE(sweep.removed.empty());
  EXPECT_TRUE(fs::exists(root.path() + "/" + their_key + "/ledger"));
}

// Through the kubelet's pod-resources: the allocated containers' ledgers stay,
// the others go; with pod-resources unreachable nothing is removed.
TEST(LedgerCleaner, SweepsByWhatPodResourcesLists) {
  AllocatedNode node;
  tessera::testing::TempDir root;
  const std::vector<std::string> gpu{"GPU-0000"}, migs{"MIG-a", "MIG-b"}, gone{"MIG-c"};
  const std::string held1 = sharing::ledger_key("nvidia.com/gpu", gpu);
  const std::string held2 = sharing::ledger_key("nvidia.com/mig-1g.20gb", migs);
  const std::string stale = sharing::ledger_key("nvidia.com/mig-1g.20gb", gone);
  for (const auto& k : {held1, held2, stale}) make_ledger_dir(root.path(), k, 3600s);

  auto refused = sweep_ledgers(root.path(), node.dir.path() + "/no-such.sock", 1s, 0s);
  EXPECT_FALSE(refused);
  EXPECT_TRUE(fs::exists(root.path() + "/" + stale)) << "no pod-resources, no removal";

  auto sweep = sweep_ledgers(root.path(), node.pod_resources, 5s, 600s);
  ASSERT_TRUE(sweep) << sweep.error().message;
  EXPECT_EQ(sweep->removed, std::vector<std::string>{stale});
  EXPECT_TRUE(fs::exists(root.path() + "/" + held1));
  EXPECT_TRUE(fs::exists(root.path() + "/" + held2));

  // The background sweeper does the same at its start.
  make_ledger_dir(root.path(), stale, 3600s);
  {
    LedgerSweeper sweeper({root.path(), node.pod_resources, 3600s, 600s, 5000ms, ""});
    for (int i = 0; i < 500 && fs::exists(root.path() + "/" + stale); ++i) std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(fs::exists(root.path() + "/" + stale));
  EXPECT_TRUE(fs::exists(root.path() + "/" + held1));
}

}  // namespace
}  // namespace tessera::plugin
