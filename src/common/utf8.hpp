// UTF-8 validation shared by the audit log's canonical JSON and the assessor's "is this Python
// source" check: the rules of nlohmann's decoder, which are CPython's too (no overlong forms,
// surrogates or code points above U+10FFFF).
#pragma once

#include <cstddef>

namespace sandboxrun {

inline bool utf8_continuation(unsigned char c) noexcept { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting with the non-ASCII byte at p[0], of which `avail`
// bytes are readable, or 0 when it is invalid.
inline size_t utf8_len(const unsigned char* p, size_t avail) noexcept {
  const unsigned char c = p[0];
  if (c >= 0xC2 && c <= 0xDF) return avail >= 2 && utf8_continuation(p[1]) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF)
    return avail >= 3 && utf8_continuation(p[1]) && utf8_continuation(p[2]) && !(c == 0xE0 && p[1] < 0xA0) &&
                   !(c == 0xED && p[1] > 0x9F)
               ? 3
               : 0;
  if (c >= 0xF0 && c <= 0xF4)
    return avail >= 4 && utf8_continuation(p[1]) && utf8_continuation(p[2]) && utf8_continuation(p[3]) &&
                   !(c == 0xF0 && p[1] < 0x90) && !(c == 0xF4 && p[1] > 0x8F)
               ? 4
               : 0;
  return 0;
}

}  // namespace sandboxrun
