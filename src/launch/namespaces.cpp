// Parent side: clone() into the new namespaces, and the id maps of a user namespace.
#include "namespaces.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

unsigned long namespace_flags() {
  // The user namespace comes in the same clone as the others, so that it owns them: mounting
  // proc, tmpfs and devpts inside needs the mount and pid namespaces to belong to it.
  return CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
}

namespace {

struct SavedIds {
  uid_t euid;
  gid_t egid;
};

// Back to the launcher's ids; a failure would leave the launcher running as the slot's uid, so
// it is fatal.
void restore_ids(const SavedIds& saved) noexcept {
  if (::syscall(SYS_setresuid, -1, saved.euid, -1) != 0 || ::syscall(SYS_setresgid, -1, saved.egid, -1) != 0)
    ::abort();
}

// The calling thread's effective uid and gid become `owner` and its effective capabilities stay
// (SECBIT_NO_SETUID_FIXUP for the switch alone): the clone still needs them, e.g. to write the
// cgroup's cgroup.procs for CLONE_INTO_CGROUP. Raw syscalls: credentials are per thread, and
// glibc's wrappers would switch every thread of the launcher. The real and saved uid stay 0,
// so restore_ids() may always go back; going back to euid 0 refills the effective set from the
// permitted one. On failure the ids are as they were.
SavedIds take_owner_ids(uid_t owner) {
  const SavedIds saved{::geteuid(), ::getegid()};
  const int bits = ::prctl(PR_GET_SECUREBITS);
  if (bits < 0 || ::prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP) != 0)
    throw_errno("keep capabilities across the switch to the id slot's owner (PR_SET_SECUREBITS)");
  if (::syscall(SYS_setresgid, -1, owner, -1) != 0 || ::syscall(SYS_setresuid, -1, owner, -1) != 0) {
    const int err = errno;
    restore_ids(saved);
    ::prctl(PR_SET_SECUREBITS, bits);
    throw Error("take the id slot's owner uid " + std::to_string(owner) + " for the clone", "", err);
  }
  if (::prctl(PR_SET_SECUREBITS, bits) != 0) {
    const int err = errno;
    restore_ids(saved);
    throw Error("restore the securebits after the switch to the id slot's owner", "", err);
  }
  return saved;
}

// Back to the launcher's own network namespace after a clone from a prepared one. Staying would
// open the launcher's later sockets inside a sandbox's namespace, so a failure is fatal.
void leave_netns(const UniqueFd& home) noexcept {
  if (home && ::setns(home.get(), CLONE_NEWNET) != 0) ::abort();
}

long do_clone(unsigned long flags, int cgroup_fd, int& pidfd) {
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
  return pid;
}

}  // namespace

CloneResult clone_sandbox(unsigned long flags, int cgroup_fd, long owner_uid, int netns_fd) {
  CloneResult r;
  int pidfd = -1;
  // A prepared network namespace is entered for the clone alone, per thread (setns), before the
  // switch to the slot's owner, which has no capability on the host. Not RAII: the child returns
  // through here too, and must stay in it.
  UniqueFd home;
  if (netns_fd >= 0) {
    home.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!home) throw_errno("open the launcher's network namespace (/proc/thread-self/ns/net)");
    if (::setns(netns_fd, CLONE_NEWNET) != 0) throw_errno("enter the prepared network namespace for the clone");
    flags &= ~static_cast<unsigned long>(CLONE_NEWNET);
  }
  std::optional<SavedIds> saved;
  if (owner_uid >= 0) {
    try {
      saved = take_owner_ids(static_cast<uid_t>(owner_uid));
    } catch (...) {
      leave_netns(home);
      throw;
    }
  }
  const long pid = do_clone(flags, cgroup_fd, pidfd);
  // The child keeps the owner's ids: it becomes the namespace's root at once (enter_id_slot),
  // and the launcher's ids are unmapped there.
  if (pid > 0 && saved) {
    const std::string base = "/proc/" + std::to_string(pid);
    r.uid_map.reset(::open((base + "/uid_map").c_str(), O_WRONLY | O_CLOEXEC));
    r.gid_map.reset(::open((base + "/gid_map").c_str(), O_WRONLY | O_CLOEXEC));
  }
  if (pid != 0) {
    const int err = errno;
    if (saved) restore_ids(*saved);
    leave_netns(home);
    errno = err;
  } else {
    (void)home.release();  // pid 1 closes every fd it does not need (close_foreign_fds) itself
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
