// SHA-256 of an open file, streamed (large files: stored objects, installed packages).
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "common/sha256.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

std::string sha256_fd_hex(int fd, const std::string& shown, uint64_t* bytes) {
  Sha256 d;
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read " + shown);
    if (n == 0) break;
    if (bytes) *bytes += static_cast<uint64_t>(n);
    d.update(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  return hex_of(d.finish());
}

}  // namespace sandboxrun
