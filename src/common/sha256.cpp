// SHA-256 (FIPS 180-4) of a byte string, without OpenSSL: initialising libcrypto's providers
// costs more than hashing a config or a cached rules file, on every start of the command.
// The CPU's SHA instructions where it has them: the rules file and its cache entry (~120 KB)
// are hashed on every `assess`, which took ~0.3 ms of a 2.3 ms start in portable code.
#include "common/sha256.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/cpu_features.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sandboxrun {

namespace {

alignas(16) constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

using Compress = Sha256::Compress;

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compress_portable(uint32_t h[8], const unsigned char* p, size_t blocks) {
  for (; blocks > 0; --blocks, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    const uint32_t v[8] = {a, b, c, d, e, f, g, hh};
    for (int i = 0; i < 8; ++i) h[i] += v[i];
  }
}

#if defined(__x86_64__)
// The SHA extensions (Intel since Goldmont/Ice Lake, AMD since Zen): four rounds per
// instruction pair, ~5x the portable code. The state is kept as ABEF/CDGH, as the
// instructions want it; message words are scheduled four at a time in a ring of four.
__attribute__((target("sha,sse4.1,ssse3"))) void compress_sha_ni(uint32_t h[8], const unsigned char* p,
                                                                   size_t blocks) {
  const __m128i kByteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[0])), 0xB1);  // CDAB
  __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[4])), 0x1B);  // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);     // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);          // CDGH
  for (; blocks > 0; --blocks, p += 64) {
    const __m128i abef = state0, cdgh = state1;
    __m128i m[4];
    for (int i = 0; i < 4; ++i)
      m[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)), kByteSwap);
    for (int g = 0; g < 16; ++g) {
      __m128i x = _mm_add_epi32(m[g & 3], _mm_load_si128(reinterpret_cast<const __m128i*>(&kK[4 * g])));
      state1 = _mm_sha256rnds2_epu32(state1, state0, x);
      state0 = _mm_sha256rnds2_epu32(state0, state1, _mm_shuffle_epi32(x, 0x0E));
      if (g < 12) {  // words 4g+16 .. 4g+19 replace words 4g .. 4g+3 in the ring
        x = _mm_sha256msg1_epu32(m[g & 3], m[(g + 1) & 3]);
        x = _mm_add_epi32(x, _mm_alignr_epi8(m[(g + 3) & 3], m[(g + 2) & 3], 4));
        m[g & 3] = _mm_sha256msg2_epu32(x, m[(g + 3) & 3]);
      }
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);                 // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);              // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);           // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);              // HGFE
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[0]), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[4]), state1);
}
#endif

// Two cpuid leaves, asked once (libgcc's __builtin_cpu_supports probes a dozen: in a VM each
// cpuid is a trap to the hypervisor).
Compress best_compress() {
#if defined(__x86_64__)
  // The features glibc found at start-up: a CPUID instruction of our own traps to the
  // hypervisor in a VM (~20 us of a 1.5 ms `assess` on the development VM).
  if (CPU_FEATURE_ACTIVE(SSSE3) && CPU_FEATURE_ACTIVE(SSE4_1) && CPU_FEATURE_ACTIVE(SHA)) return compress_sha_ni;
#endif
  return compress_portable;
}

std::string digest(std::string_view data, Compress compress) {
  Sha256 d(compress);
  d.update(data);
  return d.finish();
}

}  // namespace

Sha256::Sha256() : Sha256(best()) {}

Sha256::Sha256(Compress compress) : compress_(compress) {}

Sha256::Compress Sha256::best() {
  static const Compress compress = best_compress();
  return compress;
}

void Sha256::update(std::string_view data) {
  if (data.empty()) return;  // its data() may be null, which memcpy must not get
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  total_ += n;
  if (buffered_) {
    const size_t take = std::min(n, sizeof buf_ - buffered_);
    std::memcpy(buf_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < sizeof buf_) return;
    compress_(h_, buf_, 1);
    buffered_ = 0;
  }
  compress_(h_, p, n / 64);
  std::memcpy(buf_, p + n / 64 * 64, n % 64);
  buffered_ = n % 64;
}

std::string Sha256::finish() {
  // The tail, a 0x80 byte, zeros, and the length in bits (big-endian) in one or two blocks.
  unsigned char tail[128] = {};
  std::memcpy(tail, buf_, buffered_);
  tail[buffered_] = 0x80;
  const size_t tail_len = buffered_ + 9 <= 64 ? 64 : 128;
  const uint64_t bits = total_ * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  compress_(h_, tail, tail_len / 64);
  std::string out(32, '\0');
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<char>(h_[i] >> (24 - 8 * j));
  return out;
}

std::string sha256_raw(std::string_view data) { return digest(data, Sha256::best()); }

std::string detail::sha256_raw_portable(std::string_view data) { return digest(data, compress_portable); }

void hex_into(std::string_view raw, char* out) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto b = static_cast<unsigned char>(raw[i]);
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 0xf];
  }
}

std::string hex_of(std::string_view raw) {
  std::string out(2 * raw.size(), '0');
  hex_into(raw, out.data());
  return out;
}

std::string sha256_hex(std::string_view data) { return hex_of(sha256_raw(data)); }

}  // namespace sandboxrun
