// The hash of the assessor's name tables (symbols, rule names): qualified names are short, and a
// 1,000-line file looks thousands of them up, so this reads 8 bytes at a time and mixes once per
// word (std::hash's murmur was ~4% of a whole `assess`). Transparent: tables keyed by
// std::string are searched with a string_view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sandboxrun::assess {

struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept {
    const char* p = s.data();
    size_t n = s.size();
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; ++i) w |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

}  // namespace sandboxrun::assess
