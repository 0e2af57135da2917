// Text that quotes what a sandbox chose (a host it asked for, a file name, a symlink target) on
// its way to a terminal, the audit log or JSON: control bytes, backslashes and anything that is
// not valid UTF-8 become \xNN, so the program can neither forge lines of the launcher's own
// output nor make two names read alike. Bounded: past `max` bytes it ends with "...".
#pragma once

#include <string>
#include <string_view>

#include "common/utf8.hpp"

namespace sandboxrun {

enum class Printable { ascii, utf8 };  // utf8: valid multi-byte sequences are kept

inline std::string printable(std::string_view in, size_t max = std::string::npos, Printable keep = Printable::ascii) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  for (size_t i = 0; i < in.size();) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (const size_t n = c >= 0x80 && keep == Printable::utf8 ? utf8_len(p + i, in.size() - i) : 0; n > 0) {
      out.append(in.substr(i, n));
      i += n;
      continue;
    }
    out += "\\x";
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
    ++i;
  }
  return out;
}

// True when `s` is valid UTF-8 (what JSON can carry without replacing bytes).
inline bool valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_len(p + i, s.size() - i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// The length of `s` without a multi-byte sequence cut off at its end (at most 3 bytes), for
// text that a byte limit may have cut in the middle of a character.
inline size_t utf8_complete_prefix(std::string_view s) noexcept {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if (c < 0x80) return s.size();                      // ASCII: nothing was cut
    if ((c & 0xC0) == 0xC0) {                            // a lead byte: is its sequence whole?
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      return need > back ? s.size() - back : s.size();
    }
  }
  return s.size();
}

}  // namespace sandboxrun
