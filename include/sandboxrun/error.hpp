// Error values in the style of crun: what failed, on what, the errno, and a hint for the user.
#pragma once

#include <stdexcept>
#include <string>

namespace sandboxrun {

// Exit statuses of `sandboxrun run` (see README "Exit status").
namespace exit_code {
inline constexpr int timeout = 124;
inline constexpr int setup_failed = 125;
inline constexpr int blocked = 126;
inline constexpr int file_missing = 127;
inline constexpr int usage = 2;
}  // namespace exit_code

class Error : public std::runtime_error {
 public:
  // `what` says what failed and on what (a path, a key); `hint` what the user can do about it.
  explicit Error(std::string what, std::string hint = {}, int err = 0);

  int sys_errno() const noexcept { return errno_; }
  const std::string& hint() const noexcept { return hint_; }
  // One line for the user: "what: strerror (hint)".
  std::string describe() const;

 private:
  int errno_;
  std::string hint_;
};

// Throws Error carrying the current errno: "<what>: <strerror(errno)>".
[[noreturn]] void throw_errno(const std::string& what, const std::string& hint = {});
[[noreturn]] void throw_errno(int err, const std::string& what, const std::string& hint = {});

}  // namespace sandboxrun
