// CRC-32C, the cache entries' check: the published check values, and the CPU-instruction path
// (where the CPU has one) equal to the portable one for every length around the 8-byte steps
// and for a long input.
#include <gtest/gtest.h>

#include <string>

#include "common/crc32c.hpp"

namespace sandboxrun {
namespace {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) appendix B.4 and the catalogue's check value for "123456789".
  EXPECT_EQ(crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(detail::crc32c_portable("123456789"), 0xe3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending), 0x46dd794eu);
  EXPECT_EQ(detail::crc32c_portable(ascending), 0x46dd794eu);
}

TEST(Crc32c, BothPathsAgreeOnEveryLengthAndOffset) {
  std::string data;
  uint32_t x = 12345;
  for (int i = 0; i < 200000; ++i) {
    x = x * 1103515245 + 12345;
    data += static_cast<char>(x >> 16);
  }
  for (size_t off = 0; off < 9; ++off)
    for (size_t len = 0; len < 80; ++len) {
      const std::string_view s(data.data() + off, len);
      ASSERT_EQ(crc32c(s), detail::crc32c_portable(s)) << "offset " << off << ", length " << len;
    }
  EXPECT_EQ(crc32c(data), detail::crc32c_portable(data));
}

TEST(Crc32c, EveryFlippedBitOfAnEntryIsSeen) {
  std::string data(4096, 'a');
  const uint32_t clean = crc32c(data);
  for (size_t bit = 0; bit < data.size() * 8; bit += 7) {
    data[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    EXPECT_NE(crc32c(data), clean) << "bit " << bit;
    data[bit / 8] ^= static_cast<char>(1 << (bit % 8));
  }
}

}  // namespace
}  // namespace sandboxrun
