// ASCII case folding for protocol and source text (header names, host names, codec names,
// identifiers): locale-free, bytes >= 0x80 unchanged.
#pragma once

#include <string>
#include <string_view>

namespace sandboxrun {

constexpr char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

}  // namespace sandboxrun
