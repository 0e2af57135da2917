// Child side: from (namespace) root to an unprivileged user with nothing left to regain.
// Order matters: the bounding set needs CAP_SETPCAP, so it goes before the uid change; the
// remaining sets are cleared after it; no_new_privs makes setuid binaries and file caps inert.
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "child_plan.hpp"

namespace sandboxrun::launch {

namespace {
// Open files a sandboxed program may have (soft and hard limit; a lower inherited one stays).
constexpr rlim_t kMaxOpenFiles = 4096;
}  // namespace

bool drop_privileges(const ChildPlan& plan) {
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (cap_drop_bound(static_cast<cap_value_t>(cap)) != 0 && errno != EINVAL) {
      report_error(plan, "drop bounding capability", errno, "PR_CAPBSET_DROP");
      return false;
    }
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    report_error(plan, "clear ambient capabilities", errno, "PR_CAP_AMBIENT");
    return false;
  }
  // In a user namespace set up by an unprivileged caller, setgroups is denied (and there are no
  // supplementary groups to drop); with a root launcher's id slot, clear them.
  if (plan.id_slot) {
    if (::syscall(SYS_setgroups, 0, nullptr) != 0) {
      report_error(plan, "setgroups", errno, "supplementary groups");
      return false;
    }
  }
  // Raw syscalls, not glibc's set*id wrappers: those signal every thread glibc believes exists
  // and wait on their descriptors, and this process was cloned from a multi-threaded launcher
  // (a thread caught mid-creation at the clone leaves pid 1 waiting forever).
  if (::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0) {
    report_error(plan, "setresgid", errno, "sandbox gid");
    return false;
  }
  if (::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0) {
    report_error(plan, "setresuid", errno, "sandbox uid");
    return false;
  }
  if (cap_set_proc(plan.empty_caps) != 0) {
    report_error(plan, "clear capabilities", errno, "capset");
    return false;
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    report_error(plan, "no_new_privs", errno, "PR_SET_NO_NEW_PRIVS");
    return false;
  }
  // Counted per user (and user namespace): the sandbox user's processes and threads are the run's.
  if (plan.max_processes) {
    rlimit nproc{plan.max_processes, plan.max_processes};
    if (::setrlimit(RLIMIT_NPROC, &nproc) != 0) {
      report_error(plan, "limit processes", errno, "RLIMIT_NPROC");
      return false;
    }
  }
  rlimit no_core{0, 0};
  if (::setrlimit(RLIMIT_CORE, &no_core) != 0) {
    report_error(plan, "disable core dumps", errno, "RLIMIT_CORE");
    return false;
  }
  // Every socket may queue one buffer past the cgroup's TCP limit (the kernel's forward-progress
  // allowance, ~87 KB on loopback), so open files bound what a run can pin outside mem_limit:
  // 4,096 is ~180 MB of socket pairs where the launcher's 20,000 was ~870 MB.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_max > kMaxOpenFiles) {
    files.rlim_max = kMaxOpenFiles;
    files.rlim_cur = files.rlim_cur < kMaxOpenFiles ? files.rlim_cur : kMaxOpenFiles;
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0) {
      report_error(plan, "limit open files", errno, "RLIMIT_NOFILE");
      return false;
    }
  }
  return true;
}

}  // namespace sandboxrun::launch
