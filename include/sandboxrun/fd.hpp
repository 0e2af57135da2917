// RAII owner of a file descriptor.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace sandboxrun {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};
// pipe2(O_CLOEXEC | extra_flags); throws Error on failure.
Pipe make_pipe(int extra_flags = 0);

// Reads `fd` to EOF, retrying on EINTR. Throws Error naming `what` (e.g. the path) when a read
// fails, or when there is more than `limit` bytes (with `hint` as the fix).
std::string read_fd(int fd, size_t limit, const std::string& what, const std::string& hint = {});
// Whole-file helpers; throw Error naming the path.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);
// write() until done, retrying on EINTR; returns false on error (errno set).
bool write_all(int fd, const void* data, size_t len) noexcept;

}  // namespace sandboxrun
