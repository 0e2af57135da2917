// Our own SHA-256, HMAC-SHA256 and SHA-512: FIPS 180-4 and RFC 4231 vectors, and OpenSSL's
// answer for every tail length around the one- and two-block padding boundaries, for a long
// input, for inputs fed in pieces of every size, from both the CPU-instruction path (where
// the CPU has one) and the portable one.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/sha256.hpp"
#include "common/sha512.hpp"

namespace sandboxrun {
namespace {

std::string openssl_hex(const std::string& s, const EVP_MD* md = EVP_sha256()) {
  unsigned char raw[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EXPECT_EQ(EVP_Digest(s.data(), s.size(), raw, &len, md, nullptr), 1);
  return to_hex({reinterpret_cast<const char*>(raw), len});
}

std::string openssl_hmac_hex(const std::string& key, const std::string& s) {
  unsigned char raw[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EXPECT_NE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(s.data()),
                 s.size(), raw, &len),
            nullptr);
  return to_hex({reinterpret_cast<const char*>(raw), len});
}

std::string portable_hex(const std::string& s) {
  Sha256 h(detail::sha256_portable());
  h.update(s);
  return to_hex(h.final_raw());
}

std::string sha512_hex(const std::string& s) {
  Sha512 h;
  h.update(s);
  return to_hex(h.final_raw());
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 % 251);
  return s;
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
    EXPECT_EQ(portable_hex(s), openssl_hex(s)) << n;
  }
  const std::string big = pattern(3 << 20);
  EXPECT_EQ(sha256_hex(big), openssl_hex(big));
  EXPECT_EQ(portable_hex(big), openssl_hex(big));
}

TEST(Sha256, IncrementalInPiecesOfEverySize) {
  const std::string data = pattern(1000);
  for (size_t piece = 1; piece <= 130; ++piece) {
    Sha256 h;
    for (size_t i = 0; i < data.size(); i += piece) h.update(std::string_view(data).substr(i, piece));
    EXPECT_EQ(to_hex(h.final_raw()), openssl_hex(data)) << piece;
  }
}

TEST(HmacSha256, Rfc4231VectorsAndOpenSsl) {
  HmacSha256 one(std::string(20, '\x0b'));
  one.update("Hi There");
  EXPECT_EQ(to_hex(one.final_raw()), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  HmacSha256 two("Jefe");
  two.update("what do ya want ");
  two.update("for nothing?");
  EXPECT_EQ(to_hex(two.final_raw()), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than a block is hashed first (RFC 4231 case 6).
  HmacSha256 six(std::string(131, '\xaa'));
  six.update("Test Using Larger Than Block-Size Key - Hash Key First");
  EXPECT_EQ(to_hex(six.final_raw()), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // One key, many messages: each MAC starts afresh.
  HmacSha256 mac("audit-key");
  for (size_t n : {0, 1, 55, 56, 63, 64, 65, 200, 5000}) {
    const std::string msg = pattern(n);
    mac.update(msg);
    EXPECT_EQ(to_hex(mac.final_raw()), openssl_hmac_hex("audit-key", msg)) << n;
  }
}

TEST(Sha512, KnownVectorsAndOpenSsl) {
  EXPECT_EQ(sha512_hex("abc"),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
            "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
  std::string s;
  for (int n = 0; n < 300; ++n, s += static_cast<char>('a' + n % 26)) EXPECT_EQ(sha512_hex(s), openssl_hex(s, EVP_sha512())) << n;
  const std::string data = pattern(1 << 20);
  Sha512 h;
  for (size_t i = 0; i < data.size(); i += 1000) h.update(std::string_view(data).substr(i, 1000));
  EXPECT_EQ(to_hex(h.final_raw()), openssl_hex(data, EVP_sha512()));
}

}  // namespace
}  // namespace sandboxrun
