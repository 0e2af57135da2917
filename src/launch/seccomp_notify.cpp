#include "seccomp_notify.hpp"

#include <linux/seccomp.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <cerrno>

#include "sandboxrun/seccomp.hpp"

namespace sandboxrun::launch {

int DeniedListener::poll_fd(std::chrono::steady_clock::time_point now) {
  if (!listener_) return -1;
  if (now >= window_start_ + kWindow) {
    window_start_ = now;
    answered_in_window_ = 0;
  }
  return answered_in_window_ < kPerWindow ? listener_.get() : -1;
}

void DeniedListener::handle(short revents) {
  if (!listener_) return;
  if (!(revents & POLLIN)) {
    if (revents & (POLLHUP | POLLERR | POLLNVAL)) listener_.reset();
    return;
  }
  seccomp_notif req{};
  if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
    // ENOENT: the caller was killed meanwhile; anything else: the listener is unusable, and the
    // callers get ENOSYS from the kernel once it is closed.
    if (errno != ENOENT && errno != EINTR) listener_.reset();
    return;
  }
  seccomp_notif_resp resp{};
  resp.id = req.id;
  resp.error = -EPERM;
  // ENOENT here too only means the caller is gone; nothing to undo.
  ::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_SEND, &resp);
  ++answered_in_window_;

  const int nr = req.data.nr;
  auto it = index_.find(nr);
  if (it == index_.end()) {
    if (report_.syscalls.size() >= DeniedReport::kMaxNames) {
      ++report_.other_count;
      return;
    }
    it = index_.emplace(nr, report_.syscalls.size()).first;
    report_.syscalls.push_back(DeniedSyscall{syscall_name(nr), 0, {}});
  }
  DeniedSyscall& d = report_.syscalls[it->second];
  ++d.count;
  if (d.first_args.size() < DeniedReport::kMaxDetails)
    d.first_args.push_back({req.data.args[0], req.data.args[1], req.data.args[2]});
}

}  // namespace sandboxrun::launch
