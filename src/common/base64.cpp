#include "common/base64.hpp"

#include <algorithm>

#include "common/libcrypto.hpp"

namespace sandboxrun {

namespace {

bool alphabet(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

// EVP_*Block take an int length: longer input goes in pieces of whole blocks.
constexpr size_t kChunk = size_t{3} << 28;  // a multiple of 3 (and of 4 after encoding)

}  // namespace

std::string base64_encode(std::string_view data) {
  std::string out;
  out.reserve(4 * ((data.size() + 2) / 3));
  for (size_t at = 0; at < data.size(); at += kChunk) {
    const std::string_view part = data.substr(at, kChunk);
    std::string piece(4 * ((part.size() + 2) / 3) + 1, '\0');
    const int n = libcrypto().EVP_EncodeBlock(reinterpret_cast<unsigned char*>(piece.data()),
                                              reinterpret_cast<const unsigned char*>(part.data()),
                                              static_cast<int>(part.size()));
    out.append(piece.data(), n > 0 ? static_cast<size_t>(n) : 0);
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  const size_t pad = text.size() >= 2 && text.back() == '=' ? (text[text.size() - 2] == '=' ? 2 : 1) : 0;
  if (!std::all_of(text.begin(), text.end() - static_cast<std::ptrdiff_t>(pad), alphabet)) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  const size_t chunk = kChunk / 3 * 4;
  for (size_t at = 0; at < text.size(); at += chunk) {
    const std::string_view part = text.substr(at, chunk);
    std::string piece(part.size() / 4 * 3, '\0');
    const int n = libcrypto().EVP_DecodeBlock(reinterpret_cast<unsigned char*>(piece.data()),
                                              reinterpret_cast<const unsigned char*>(part.data()),
                                              static_cast<int>(part.size()));
    if (n < 0) return std::nullopt;
    out.append(piece.data(), static_cast<size_t>(n));
  }
  out.resize(out.size() - pad);  // EVP_DecodeBlock counts the padding as zero bytes
  return out;
}

}  // namespace sandboxrun
