// Parent side of the seccomp user notifications: every call the profile denies with EPERM
// reaches the launcher, which records it (bounded) and answers EPERM. It lives in the monitor's
// poll loop and never blocks it.
#pragma once

#include <chrono>
#include <map>

#include "sandboxrun/fd.hpp"
#include "sandboxrun/launch.hpp"

namespace sandboxrun::launch {

class DeniedListener {
 public:
  explicit DeniedListener(DeniedReport& report) : report_(report) {}

  void attach(UniqueFd listener) { listener_ = std::move(listener); }
  // The fd to poll for POLLIN now, or -1 (none attached, or throttled until throttled_until()).
  int poll_fd(std::chrono::steady_clock::time_point now);
  std::chrono::steady_clock::time_point throttled_until() const { return window_start_ + kWindow; }
  bool throttled(std::chrono::steady_clock::time_point now) const {
    return listener_ && answered_in_window_ >= kPerWindow && now < throttled_until();
  }
  // Receives and answers one pending notification (after poll said POLLIN); closes the listener
  // on POLLHUP/error, when no filtered process is left.
  void handle(short revents);

 private:
  // A flood of denied calls costs the launcher (outside the sandbox's cgroup) one round trip
  // each: at most kPerWindow are answered per window; beyond that the callers simply wait.
  static constexpr std::chrono::milliseconds kWindow{10};
  static constexpr unsigned kPerWindow = 200;

  DeniedReport& report_;
  UniqueFd listener_;
  std::map<int, size_t> index_;  // syscall nr -> report_.syscalls index
  std::chrono::steady_clock::time_point window_start_{};
  unsigned answered_in_window_ = 0;
};

}  // namespace sandboxrun::launch
