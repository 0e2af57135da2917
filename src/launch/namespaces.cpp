// Parent side: clone() into the new namespaces, and the id maps of a user namespace.
#include "namespaces.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

unsigned long namespace_flags() {
  // The user namespace comes in the same clone as the others, so that it owns them: mounting
  // proc, tmpfs and devpts inside needs the mount and pid namespaces to belong to it.
  return CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
}

CloneResult clone_sandbox(unsigned long flags, int cgroup_fd) {
  CloneResult r;
  int pidfd = -1;
  clone_args args{};
  args.flags = flags | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
  }
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0 && errno == ENOSYS && cgroup_fd < 0) {
    // Kernels before 5.3: plain clone, fork-like (no function, child continues here).
    pid = ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, 0);
    pidfd = -1;
  }
  if (pid < 0) {
    int err = errno;
    std::string hint = "check `sandboxrun doctor`";
    if (err == EPERM || err == ENOSPC || err == EUSERS)
      hint = "namespaces are restricted on this host (user.max_*_namespaces, "
             "kernel.unprivileged_userns_clone, or a container runtime's seccomp policy); run as root or enable "
             "unprivileged user namespaces";
    throw Error("clone into new namespaces", hint, err);
  }
  r.pid = static_cast<pid_t>(pid);
  r.pidfd = UniqueFd(pidfd);
  r.clone_into_cgroup = cgroup_fd >= 0;
  return r;
}

void write_id_maps(pid_t pid, uid_t inside_uid, gid_t inside_gid, uid_t outside_uid, gid_t outside_gid) {
  std::string base = "/proc/" + std::to_string(pid);
  // setgroups must be denied before an unprivileged writer may set gid_map.
  write_file(base + "/setgroups", "deny");
  write_file(base + "/uid_map", std::to_string(inside_uid) + " " + std::to_string(outside_uid) + " 1\n");
  write_file(base + "/gid_map", std::to_string(inside_gid) + " " + std::to_string(outside_gid) + " 1\n");
}

}  // namespace sandboxrun::launch
