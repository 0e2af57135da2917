// SHA-256 (FIPS 180-4) of an in-memory byte string or a stream (configs, code, caches,
// manifests, stored objects, cached files). Image blobs and the audit chain's HMAC use OpenSSL,
// opened when needed (libcrypto.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sandboxrun {

// The 32 raw bytes of the digest.
std::string sha256_raw(std::string_view data);
// The digest as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

// Incremental form: update() any number of times, then finish() once.
class Sha256 {
 public:
  using Compress = void (*)(uint32_t h[8], const unsigned char* p, size_t blocks);
  Sha256();
  explicit Sha256(Compress compress);  // a given block function (tests: the portable one)
  void update(std::string_view data);
  std::string finish();  // the 32 raw bytes
  static Compress best();  // the CPU's SHA instructions where it has them

 private:
  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char buf_[64] = {};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
  Compress compress_;
};

// Lower-case hex of a raw digest (two digits a byte).
std::string hex_of(std::string_view raw);
// The same into `out` (2 * raw.size() chars, no terminator), for callers that keep it in place.
void hex_into(std::string_view raw, char* out) noexcept;

// The digest of what is left to read from `fd`, as hex; `shown` names the file in errors;
// `bytes`, when given, grows by the bytes read.
std::string sha256_fd_hex(int fd, const std::string& shown, uint64_t* bytes = nullptr);

namespace detail {
// sha256_raw without the CPU's SHA instructions, so tests can check both paths on one machine.
std::string sha256_raw_portable(std::string_view data);
}  // namespace detail

}  // namespace sandboxrun
