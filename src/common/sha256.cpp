#include "common/sha256.hpp"

#include <openssl/evp.h>

#include "sandboxrun/error.hpp"

namespace sandboxrun {

std::string sha256_hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  unsigned char raw[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_Digest(data.data(), data.size(), raw, &len, EVP_sha256(), nullptr) != 1 || len != 32)
    throw Error("SHA-256 computation failed in OpenSSL", "check the OpenSSL installation");
  std::string out(64, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kHex[raw[i] >> 4];
    out[2 * i + 1] = kHex[raw[i] & 0xf];
  }
  return out;
}

}  // namespace sandboxrun
