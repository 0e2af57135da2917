// Runs in the child between clone() and execve(): no allocation, no locks, only syscalls.
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "sandboxrun/seccomp.hpp"

namespace sandboxrun {

int install_seccomp_program(const sock_fprog& prog) noexcept {
  if (prog.len == 0 || prog.filter == nullptr) return -EINVAL;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0) return 0;
  if (errno != ENOSYS) return -errno;
  // Kernels before 3.17 have no seccomp(2); prctl is the older door to the same filter mode.
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0) return 0;
  return -errno;
}

int install_seccomp_listener(const sock_fprog& prog) noexcept {
  if (prog.len == 0 || prog.filter == nullptr) return -EINVAL;
  long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  return fd >= 0 ? static_cast<int>(fd) : -errno;
}

}  // namespace sandboxrun
