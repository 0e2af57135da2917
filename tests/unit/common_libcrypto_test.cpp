// libcrypto is opened on first use, once, and hashes. (A missing library: common_libcrypto_missing_test,
// a binary of its own, since this one has the library loaded.)
#include <gtest/gtest.h>

#include "common/libcrypto.hpp"

namespace sandboxrun {
namespace {

TEST(LibCrypto, LoadsOnFirstUseAndDigests) {
  const LibCrypto& c = libcrypto();
  EXPECT_EQ(&c, &libcrypto());
  EVP_MD_CTX* ctx = c.EVP_MD_CTX_new();
  ASSERT_NE(ctx, nullptr);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EXPECT_EQ(c.EVP_DigestInit_ex(ctx, c.EVP_sha512(), nullptr), 1);
  EXPECT_EQ(c.EVP_DigestUpdate(ctx, "abc", 3), 1);
  EXPECT_EQ(c.EVP_DigestFinal_ex(ctx, md, &len), 1);
  c.EVP_MD_CTX_free(ctx);
  EXPECT_EQ(len, 64u);
  EXPECT_EQ(md[0], 0xddu);  // FIPS 180-2 SHA-512("abc") begins ddaf35a1
  EXPECT_EQ(md[1], 0xafu);
}

}  // namespace
}  // namespace sandboxrun
