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

}  // namespace sandboxrun
