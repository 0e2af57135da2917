// For the cgroup benchmark and tests: a child that only waits, cloned the launcher's way, so that
// both measure and check the placement the launcher really uses.
#pragma once

#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "sandboxrun/cgroup.hpp"

namespace sandboxrun::cgroup_detail {

// A paused child cloned inside `into` (with CLONE_INTO_CGROUP where it has an fd): its pid, or
// -1 with errno set.
inline pid_t clone_paused(const CloneIntoCgroup& into) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  if (into.clone_into_fd() >= 0) {
    args.flags = CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(into.clone_into_fd());
  }
  const long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return static_cast<pid_t>(pid);
}

}  // namespace sandboxrun::cgroup_detail
