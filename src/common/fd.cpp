#include "sandboxrun/fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "sandboxrun/error.hpp"

namespace sandboxrun {

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Pipe make_pipe(int extra_flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0) throw_errno("pipe2");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::string read_fd(int fd, size_t limit, const std::string& what, const std::string& hint) {
  std::string out;
  char buf[65536];
  for (;;) {
    // Never more than one byte past the limit: that byte is how an over-long input shows.
    const size_t room = limit - out.size();
    const ssize_t n = ::read(fd, buf, room < sizeof buf ? room + 1 : sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read " + what);
    }
    if (n == 0) return out;
    if (static_cast<size_t>(n) > room)
      throw Error(what + " is larger than the " + std::to_string(limit) + " bytes allowed", hint);
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("cannot open " + path);
  return read_fd(fd.get(), SIZE_MAX, path);
}

void write_file(const std::string& path, const std::string& content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) throw_errno("cannot open " + path + " for writing");
  if (!write_all(fd.get(), content.data(), content.size())) throw_errno("cannot write " + path);
}

bool write_all(int fd, const void* data, size_t len) noexcept {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace sandboxrun
