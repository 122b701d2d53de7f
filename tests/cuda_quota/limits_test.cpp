// The limits file's format (src/cuda_quota/env.h): what the device plugin
// writes and the quota library reads, with one parser that accepts exactly
// the format and says which line is wrong otherwise.
#include "cuda_quota/driver_limits.hpp"
#include "cuda_quota/limits.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace tessera::quota {
namespace {

constexpr const char* kGpu = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kMig = "MIG-66666666-7777-8888-9999-000000000000";

Limits two_devices() {
  Limits l;
  l.device_count = 2;
  std::snprintf(l.key, sizeof l.key, "%s", "nvidia.com_gpu-0123456789abcdef");
  std::snprintf(l.devices[0].uuid, sizeof l.devices[0].uuid, "%s", kGpu);
  l.devices[0].quota = 21346123776;
  std::snprintf(l.devices[1].uuid, sizeof l.devices[1].uuid, "%s", kMig);
  l.devices[1].quota = 1;
  l.devices[1].context = 268435456;
  return l;
}

std::string text_of(const Limits& l) {
  char out[kLimitsMaxBytes + 1];
  const std::size_t n = format_limits(l, out, sizeof out);
  EXPECT_GT(n, 0u);
  return std::string(out, n);
}

TEST(Limits, WhatThePluginWritesTheLibraryReadsBack) {
  const std::string text = text_of(two_devices());
  EXPECT_EQ(text, std::string("tessera-limits 1\nkey nvidia.com_gpu-0123456789abcdef\n0 ") + kGpu +
                      " 21346123776\n1 " + kMig + " 1 context=268435456\n");
  Limits back;
  char why[256] = {};
  ASSERT_TRUE(parse_limits(text.data(), text.size(), back, why, sizeof why)) << why;
  EXPECT_EQ(back.device_count, 2u);
  EXPECT_STREQ(back.key, "nvidia.com_gpu-0123456789abcdef");
  EXPECT_STREQ(back.devices[1].uuid, kMig);
  EXPECT_EQ(back.devices[0].quota, 21346123776u);
  EXPECT_EQ(back.devices[0].context, 0u);
  EXPECT_EQ(back.devices[1].context, 268435456u);
  // Comments anywhere after the first line; UUIDs with dashes anywhere, any case.
  const std::string commented = "tessera-limits 1\n# written by the plugin\nkey k\n0 GPU-ABCDEF0123456789abcdef0123456789 0\n";
  ASSERT_TRUE(parse_limits(commented.data(), commented.size(), back, why, sizeof why)) << why;
  EXPECT_EQ(back.devices[0].quota, 0u);
}

TEST(Limits, SixteenDevicesAtMost) {
  Limits l;
  l.device_count = kMaxDevices;
  std::snprintf(l.key, sizeof l.key, "k");
  for (auto& d : l.devices) {
    std::snprintf(d.uuid, sizeof d.uuid, "%s", kGpu);
    d.quota = ~0ULL;
  }
  const std::string text = text_of(l);
  Limits back;
  char why[256];
  ASSERT_TRUE(parse_limits(text.data(), text.size(), back, why, sizeof why)) << why;
  EXPECT_EQ(back.devices[15].quota, ~0ULL);
  const std::string more = text + "16 " + kGpu + " 1\n";
  EXPECT_FALSE(parse_limits(more.data(), more.size(), back, why, sizeof why));
  EXPECT_STREQ(why, "line 19 names more than 16 devices");
  l.device_count = kMaxDevices + 1;
  char out[kLimitsMaxBytes];
  EXPECT_EQ(format_limits(l, out, sizeof out), 0u);
}

TEST(Limits, EveryDeviationIsRefusedWithItsLine) {
  const std::string head = "tessera-limits 1\nkey k\n";
  const std::string dev = std::string("0 ") + kGpu + " 1024";
  const struct {
    std::string text;
    const char* why;
  } cases[] = {
      {"", "it is empty"},
      {head, "it names no device"},
      {"tessera-limits 1\n" + dev + "\n", "it has no \"key\" line"},
      {"tessera-limits 10\nkey k\n" + dev + "\n", "line 1 names a format version other than 1"},
      {"tessera limits 1\n", "line 1 is not \"tessera-limits 1\": not a tessera limits file"},
      {head + dev, "its last line does not end with a newline"},
      {head + dev + "\nkey k\n", "line 4 gives the key a second time"},
      {"tessera-limits 1\nkey a/b\n" + dev + "\n", "line 2 has a key that is not 1-127 of [A-Za-z0-9._-]"},
      {"tessera-limits 1\nkey " + std::string(128, 'k') + "\n" + dev + "\n", "line 2 has a key that is not"},
      {head + "\n" + dev + "\n", "line 3 is empty"},
      {head + "quota 1\n", "line 3 is neither \"key <key>\" nor \"<k> <uuid> <bytes>\""},
      {head + dev + " \n", "line 3 ends with a space"},
      {head + "00 " + kGpu + " 1\n", "line 3 does not start with a device index"},
      {head + "1 " + kGpu + " 1\n", "line 3 is out of order"},
      {head + "0  " + kGpu + " 1\n", "line 3 has no GPU or MIG UUID after its index"},
      {head + "0 GPU-12:34 1\n", "line 3 has no GPU or MIG UUID"},
      {head + "0 GPU- 1\n", "line 3 has no GPU or MIG UUID"},
      {head + "0 gpu-11111111-2222-3333-4444-555555555555 1\n", "line 3 has no GPU or MIG UUID"},
      {head + "0 " + kGpu + "\n", "line 3 has no plain decimal number of bytes"},
      {head + "0 " + kGpu + " -1\n", "line 3 has no plain decimal number of bytes"},
      {head + "0 " + kGpu + " 0x10\n", "line 3 has no plain decimal number of bytes"},
      {head + "0 " + kGpu + " 18446744073709551616\n", "line 3 has no plain decimal number of bytes"},
      {head + dev + " ctx=1\n", "line 3 has something after its bytes other than \"context=<bytes>\""},
      {head + dev + " context=\n", "line 3 has something after its bytes"},
      {head + dev + " context=1 x\n", "line 3 has more fields"},
      {head + dev + "\x07\n", "line 3 holds a control or non-ASCII character"},
      {head + dev + "\xc3\xa9\n", "line 3 holds a control or non-ASCII character"},
      {std::string("tessera-limits 1\n\0key k\n", 24) + dev + "\n", "it holds a NUL byte"},
      {head + dev + "\n" + std::string(kLimitsMaxBytes, '#') + "\n", "more than a limits file can be (4096)"},
  };
  for (const auto& c : cases) {
    Limits out;
    char why[256] = {};
    EXPECT_FALSE(parse_limits(c.text.data(), c.text.size(), out, why, sizeof why)) << c.text;
    EXPECT_NE(std::string(why).find(c.why), std::string::npos) << "got: " << why << "\nwant: " << c.why;
  }
}

TEST(Limits, TheWriterRefusesWhatTheReaderWould) {
  Limits l = two_devices();
  std::snprintf(l.key, sizeof l.key, "not a key");
  char out[kLimitsMaxBytes];
  EXPECT_EQ(format_limits(l, out, sizeof out), 0u);
  l = two_devices();
  std::snprintf(l.devices[1].uuid, sizeof l.devices[1].uuid, "MIG 1");
  EXPECT_EQ(format_limits(l, out, sizeof out), 0u);
  l = two_devices();
  EXPECT_EQ(format_limits(l, out, 16), 0u) << "does not fit";
  l.device_count = 0;
  EXPECT_EQ(format_limits(l, out, sizeof out), 0u);
}

// ------------------------------------------------------------------ the memory hook's record

TEST(DriverLimitsRecord, RoundTripsAndFindsItsDevices) {
  DriverLimits in;
  in.count = 2;
  std::snprintf(in.devices[0].uuid, sizeof in.devices[0].uuid, "%s", kGpu);
  in.devices[0].bytes = 1073741824;
  std::snprintf(in.devices[0].cgroup, sizeof in.devices[0].cgroup, "/sys/fs/cgroup/kubepods/pod-a/c1");
  std::snprintf(in.devices[1].uuid, sizeof in.devices[1].uuid, "GPU-aaaaaaaa-2222-3333-4444-555555555555");
  in.devices[1].bytes = 5;
  std::snprintf(in.devices[1].cgroup, sizeof in.devices[1].cgroup, "/sys/fs/cgroup/x");
  char text[kDriverLimitsMaxBytes];
  const std::size_t n = format_driver_limits(in, text, sizeof text);
  ASSERT_GT(n, 0u);
  EXPECT_EQ(std::string(text, n), std::string("tessera-driver-limits 1\n") + kGpu +
                                      " 1073741824 /sys/fs/cgroup/kubepods/pod-a/c1\n"
                                      "GPU-aaaaaaaa-2222-3333-4444-555555555555 5 /sys/fs/cgroup/x\n");
  DriverLimits out;
  char why[256] = {};
  ASSERT_TRUE(parse_driver_limits(text, n, out, why, sizeof why)) << why;
  ASSERT_EQ(out.count, 2u);
  ASSERT_NE(find_driver_limit(out, kGpu), nullptr);
  EXPECT_EQ(find_driver_limit(out, kGpu)->bytes, 1073741824u);
  EXPECT_EQ(std::string(find_driver_limit(out, kGpu)->cgroup), "/sys/fs/cgroup/kubepods/pod-a/c1");
  EXPECT_EQ(find_driver_limit(out, "GPU-ffffffff-2222-3333-4444-555555555555"), nullptr);
  std::snprintf(in.devices[1].cgroup, sizeof in.devices[1].cgroup, "/sys/fs/cgroup/../etc");
  EXPECT_EQ(format_driver_limits(in, text, sizeof text), 0u) << "an entry that is not valid is never written";
}

TEST(DriverLimitsRecord, BadRecordsAreRefusedWithTheLine) {
  const std::string head = "tessera-driver-limits 1\n";
  const std::string good = std::string(kGpu) + " 1024 /sys/fs/cgroup/a\n";
  const std::pair<std::string, const char*> cases[] = {
      {"", "it is empty"},
      {head + std::string(kGpu) + " 1024 /a", "its last line does not end with a newline"},
      {head + std::string("x\0y\n", 4), "it holds a NUL byte"},
      {"tessera-driver-limits 2\n", "line 1 is not \"tessera-driver-limits 1\""},
      {head + "nonsense\n", "line 2 is not \"<uuid> <bytes> <cgroup>\""},
      {head + "CPU-1111 1024 /a\n", "line 2 does not start with a GPU or MIG UUID"},
      {head + std::string(kGpu) + " 01024 /a\n", "line 2 has no plain decimal number of bytes after its UUID"},
      {head + std::string(kGpu) + " 99999999999999999999 /a\n",
       "line 2 has no plain decimal number of bytes after its UUID"},
      {head + std::string(kGpu) + " 1024 relative\n", "line 2 has no absolute cgroup directory after its bytes"},
      {head + std::string(kGpu) + " 1024 /a/../b\n", "line 2 has no absolute cgroup directory after its bytes"},
      {head + std::string(kGpu) + " 1024 /a b\n", "line 2 has no absolute cgroup directory after its bytes"},
      {head + good + good, "line 3 names a device a second time"},
      {head + std::string(kDriverLimitsMaxBytes, 'x') + "\n", "it is larger than a driver-limits record can be"},
  };
  for (const auto& [text, expected] : cases) {
    DriverLimits out;
    char why[256] = {};
    EXPECT_FALSE(parse_driver_limits(text.data(), text.size(), out, why, sizeof why)) << text.substr(0, 80);
    EXPECT_EQ(std::string(why), expected) << text.substr(0, 80);
  }
  EXPECT_TRUE(valid_cgroup_path("/sys/fs/cgroup/kubepods.slice/cri-containerd-1.scope", 52));
  EXPECT_FALSE(valid_cgroup_path("/sys/./fs", 9));
}

}  // namespace
}  // namespace tessera::quota
