#include "common/crc32c.hpp"

#include <array>
#include <cstring>

#include "common/cpu_features.hpp"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace sandboxrun {

namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPoly & (0u - (c & 1)));
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}
constexpr auto kTables = make_tables();

uint32_t update_portable(uint32_t c, const unsigned char* p, size_t n) noexcept {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w = 0;
    std::memcpy(&w, p, 8);
    w ^= c;  // little-endian: the CRC meets the first four bytes
    c = kTables[7][w & 0xff] ^ kTables[6][(w >> 8) & 0xff] ^ kTables[5][(w >> 16) & 0xff] ^
        kTables[4][(w >> 24) & 0xff] ^ kTables[3][(w >> 32) & 0xff] ^ kTables[2][(w >> 40) & 0xff] ^
        kTables[1][(w >> 48) & 0xff] ^ kTables[0][w >> 56];
  }
  for (; n > 0; ++p, --n) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xff];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t update_sse42(uint32_t c, const unsigned char* p, size_t n) noexcept {
  uint64_t c64 = c;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w = 0;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = static_cast<uint32_t>(c64);
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(c, *p);
  return c;
}
#endif

}  // namespace

uint32_t crc32c(std::string_view data) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__x86_64__)
  // The feature glibc found at start-up: no cpuid of our own (a trap to the hypervisor in a VM).
  if (CPU_FEATURE_ACTIVE(SSE4_2)) return ~update_sse42(~0u, p, data.size());
#endif
  return ~update_portable(~0u, p, data.size());
}

namespace detail {
uint32_t crc32c_portable(std::string_view data) noexcept {
  return ~update_portable(~0u, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}
}  // namespace detail

}  // namespace sandboxrun
