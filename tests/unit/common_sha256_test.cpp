// The one in-memory SHA-256: FIPS 180-4 vectors, and OpenSSL's answer for every tail length
// around the one- and two-block padding boundaries and for a long input, from both the
// CPU-instruction path (where the CPU has one) and the portable one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "common/libcrypto.hpp"
#include "common/sha256.hpp"

namespace sandboxrun {
namespace {

std::string openssl_hex(const std::string& s) {
  const LibCrypto& c = libcrypto();  // opened at run time, as the product opens it
  unsigned char raw[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_MD_CTX* ctx = c.EVP_MD_CTX_new();
  EXPECT_EQ(c.EVP_DigestInit_ex(ctx, c.EVP_sha256(), nullptr), 1);
  EXPECT_EQ(c.EVP_DigestUpdate(ctx, s.data(), s.size()), 1);
  EXPECT_EQ(c.EVP_DigestFinal_ex(ctx, raw, &len), 1);
  c.EVP_MD_CTX_free(ctx);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[raw[i] >> 4];
    out += kHex[raw[i] & 0xf];
  }
  return out;
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_raw("abc").size(), 32u);
  EXPECT_EQ(static_cast<unsigned char>(sha256_raw("abc")[0]), 0xbau);
}

TEST(Sha256, AgreesWithOpenSsl) {
  std::string s;
  for (int n = 0; n < 200; ++n, s += static_cast<char>('a' + n % 26)) {
    EXPECT_EQ(sha256_hex(s), openssl_hex(s)) << n;
    EXPECT_EQ(sha256_raw(s), detail::sha256_raw_portable(s)) << n;
  }
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  EXPECT_EQ(sha256_hex(big), openssl_hex(big));
  EXPECT_EQ(sha256_raw(big), detail::sha256_raw_portable(big));
}

// Hex of any raw digest, two digits a byte: SHA-512's 64 bytes too (image digests).
TEST(Sha256, HexOfAnyLength) {
  EXPECT_EQ(hex_of(std::string("\x00\xff\x1a", 3)), "00ff1a");
  const std::string h = hex_of(std::string(64, '\xab'));
  EXPECT_EQ(h.size(), 128u);
  EXPECT_EQ(h.find_first_not_of("ab"), std::string::npos);
}

// Fed in pieces of every size around the block length, the digest is OpenSSL's for the whole.
TEST(Sha256, IncrementalAgreesWithOpenSsl) {
  std::string data(5000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + (i >> 5));
  const std::string want = openssl_hex(data);
  for (size_t piece : {1u, 3u, 55u, 63u, 64u, 65u, 127u, 128u, 1000u, 4999u, 5000u}) {
    Sha256 d;
    d.update({});
    for (size_t at = 0; at < data.size(); at += piece) d.update(std::string_view(data).substr(at, piece));
    EXPECT_EQ(hex_of(d.finish()), want) << piece;
  }
}

}  // namespace
}  // namespace sandboxrun

namespace sandboxrun {

// The streamed digest of a file agrees with the in-memory one, across the read buffer's size,
// and counts what it read.
TEST(Sha256, FileDigestAgreesWithTheInMemoryOne) {
  std::string data(3 * (1 << 20) + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 9));
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
  ASSERT_EQ(std::fflush(f), 0);
  const int fd = ::fileno(f);
  ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
  uint64_t bytes = 5;
  EXPECT_EQ(sha256_fd_hex(fd, "the test file", &bytes), sha256_hex(data));
  EXPECT_EQ(bytes, 5 + data.size());
  std::fclose(f);
}

}  // namespace sandboxrun
