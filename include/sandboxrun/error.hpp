// Error values in the style of crun: what failed, on what, the errno, and a hint for the user.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace sandboxrun {

// Exit statuses of `sandboxrun run` (see README "Exit status").
namespace exit_code {
inline constexpr int timeout = 124;
inline constexpr int setup_failed = 125;
inline constexpr int blocked = 126;
inline constexpr int file_missing = 127;
inline constexpr int usage = 2;
}  // namespace exit_code

// What kind of failure an Error is, so that a caller (a service) can act on it without parsing
// its text: retry later, fix a file, build an image, page someone.
enum class ErrorKind : uint8_t {
  other,   // none of the below
  usage,   // the request itself is wrong: an option, an input path, a run id
  config,  // a configuration file is missing or wrong (sandbox.yaml, security.yaml, audit.yaml, a profile)
  image,   // the image is missing or cannot be used
  limits,  // the trust level's limits cannot be enforced on this host (no usable cgroup)
  audit,   // the audit log cannot record the run, so nothing runs
  deps,    // the dependency phase failed
  host,    // the host refused a step of the sandbox's set-up (namespaces, mounts, ids, seccomp)
  interrupted,  // the launcher got SIGINT, SIGTERM or SIGHUP (Ctrl-C): the sandbox was killed
};
const char* to_string(ErrorKind kind) noexcept;  // "other", "usage", "config", ...

class Error : public std::runtime_error {
 public:
  // `what` says what failed and on what (a path, a key); `hint` what the user can do about it.
  explicit Error(std::string what, std::string hint = {}, int err = 0);

  int sys_errno() const noexcept { return errno_; }
  const std::string& hint() const noexcept { return hint_; }
  ErrorKind kind() const noexcept { return kind_; }
  // Marks the error as `kind` unless it already has a kind of its own (the innermost knows best):
  //   throw Error("no image named x", "build it").as(ErrorKind::image);
  Error&& as(ErrorKind kind) && noexcept {
    if (kind_ == ErrorKind::other) kind_ = kind;
    return std::move(*this);
  }
  // One line for the user: "what: strerror (hint)".
  std::string describe() const;

 private:
  int errno_;
  std::string hint_;
  ErrorKind kind_ = ErrorKind::other;
};

// Throws Error carrying the current errno: "<what>: <strerror(errno)>".
[[noreturn]] void throw_errno(const std::string& what, const std::string& hint = {});
[[noreturn]] void throw_errno(int err, const std::string& what, const std::string& hint = {});

}  // namespace sandboxrun
