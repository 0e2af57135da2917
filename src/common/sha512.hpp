// Incremental SHA-512 (FIPS 180-4): OCI image layouts may name blobs by it. Portable code; it
// only runs when an image uses such digests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandboxrun {

class Sha512 {
 public:
  Sha512() noexcept;
  void update(std::string_view data) noexcept;
  // The 64 raw bytes of the digest of everything given; the object is spent afterwards.
  std::string final_raw() noexcept;

 private:
  void compress(const unsigned char* blocks, size_t count) noexcept;
  uint64_t h_[8];
  unsigned char buf_[128];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes (inputs beyond 2^61 bytes are not a concern here)
};

}  // namespace sandboxrun
