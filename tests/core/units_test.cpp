#include "core/units.hpp"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(Units, ParsesBinaryAndDecimalSizes) {
  EXPECT_EQ(*parse_bytes("14GiB"), 14 * kGiB);
  EXPECT_EQ(*parse_bytes("32.5GiB"), 32 * kGiB + kGiB / 2);
  EXPECT_EQ(*parse_bytes("512Mi"), 512 * kMiB);
  EXPECT_EQ(*parse_bytes("80GB"), 80'000'000'000u);
  EXPECT_EQ(*parse_bytes("1024"), 1024u);
  EXPECT_EQ(*parse_bytes(" 2 GiB "), 2 * kGiB);
}

// Where a person writes the size: a bare number is refused with the units
// to choose from; with a unit (B included) or as 0 it reads as parse_bytes.
TEST(Units, ASizeByHandNeedsAUnit) {
  auto bare = parse_size("40");
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().message, "'40' has no unit: write 40GiB, 40MiB or 40B (a bare number would be 40 bytes)");
  EXPECT_FALSE(parse_size(" 2.5 "));
  EXPECT_EQ(*parse_size("40B"), 40u);
  EXPECT_EQ(*parse_size("40GiB"), 40 * kGiB);
  EXPECT_EQ(*parse_size("0"), 0u);
  EXPECT_NE(parse_size("-1GiB").error().message.find("it is negative"), std::string::npos);
}

TEST(Units, RejectsBadSizes) {
  for (const char* bad : {"", "-1GiB", "GiB", "12XB", "1e400GiB", "12GiB extra", "1..2GiB"}) {
    auto r = parse_bytes(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) { EXPECT_NE(r.error().message.find("is not a byte size"), std::string::npos); }
  }
}

TEST(Units, Formats) {
  EXPECT_EQ(format_bytes(80 * kGiB), "80 GiB");
  EXPECT_EQ(format_bytes(1536 * kMiB), "1.5 GiB");
  EXPECT_EQ(format_bytes(512), "512 B");
}

}  // namespace
}  // namespace tessera
