// SHA-256 for digests of configs, code, caches, manifests and files; HMAC-SHA256 for the
// audit chain; SHA-512 for OCI digests that use it (sha512.hpp). Our own code rather than
// OpenSSL's: the binary needs nothing else from libcrypto, and linking it cost every start of
// the command ~2 MB of code and ~340 KB of relocated tables (83 copy-on-write page faults).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandboxrun {

// The 32 raw bytes of the digest.
std::string sha256_raw(std::string_view data);
// The digest as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);
// Lower-case hex of raw bytes.
std::string to_hex(std::string_view raw);

// Incremental SHA-256 (the CPU's SHA instructions where it has them).
class Sha256 {
 public:
  Sha256() noexcept;
  void update(std::string_view data) noexcept;
  // The 32 raw bytes of the digest of everything given; the object is spent afterwards.
  std::string final_raw() noexcept;

  using Compress = void (*)(uint32_t state[8], const unsigned char* blocks, size_t count);
  // With a given compression function (tests check the portable one on any CPU).
  explicit Sha256(Compress compress) noexcept;

 private:
  Compress compress_;
  uint32_t h_[8];
  unsigned char buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// HMAC-SHA256 (RFC 2104) with one key for many messages.
class HmacSha256 {
 public:
  explicit HmacSha256(std::string_view key) noexcept;
  void update(std::string_view data) noexcept { inner_.update(data); }
  // The 32 raw bytes of the MAC of everything given since construction or the last final_raw().
  std::string final_raw() noexcept;

 private:
  Sha256 inner_start_, outer_start_, inner_;  // the states after the padded key blocks
};

namespace detail {
// The portable compression function, whatever the CPU offers.
Sha256::Compress sha256_portable() noexcept;
}  // namespace detail

}  // namespace sandboxrun
