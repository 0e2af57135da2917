// SHA-256 of an open file, streamed through OpenSSL (large files: stored objects, installed
// packages), as lower-case hex.
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "common/sha256.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

std::string sha256_fd_hex(int fd, const std::string& shown, uint64_t* bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("cannot start a SHA-256 digest");
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read " + shown);
    if (n == 0) break;
    if (bytes) *bytes += static_cast<uint64_t>(n);
    if (EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n)) != 1)
      throw Error("SHA-256 of " + shown + " failed");
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) throw Error("SHA-256 of " + shown + " failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
}

}  // namespace sandboxrun
