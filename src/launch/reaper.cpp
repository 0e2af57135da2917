// The sandbox's pid 1. It finishes the setup (mounts, network, privileges), starts the payload,
// and then only reaps: when the payload exits it reports the payload's wait status to the
// launcher and exits, which makes the kernel kill everything left in the pid namespace.
// It is non-dumpable, so the payload cannot open /proc/1/exe (runc CVE-2019-5736), /proc/1/mem
// or /proc/1/environ; the launcher's argv and environment strings are wiped as well.
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "child_plan.hpp"
#include "fd_passing.hpp"
#include "id_slots_child.hpp"
#include "release.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/seccomp.hpp"

namespace sandboxrun::launch {

namespace {

// Leaves only 0-2 and the `n` fds of `keep` open (in any order; -1 and 0-2 are ignored). Sorts
// `keep` in place: raw syscalls and no allocation, for pid 1 and the payload before its execve.
void close_all_except(int* keep, size_t n) {
  for (size_t i = 1; i < n; ++i)
    for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; --j) std::swap(keep[j - 1], keep[j]);
  unsigned from = 3;
  for (size_t i = 0; i < n; ++i) {
    if (keep[i] < 3) continue;
    const auto k = static_cast<unsigned>(keep[i]);
    if (k > from) ::syscall(SYS_close_range, from, k - 1, 0u);
    if (k + 1 > from) from = k + 1;
  }
  ::syscall(SYS_close_range, from, ~0u, 0u);
}

// Leaves only 0-2, `keep` and `also` (-1: none) open.
void close_all_but(int keep, int also = -1) {
  int fds[] = {keep, also};
  close_all_except(fds, 2);
}

// Closes every fd above 2 that the clone inherited but the plan's own. The clone is fork-like and
// the launcher has threads: a sandbox made on one thread while another run's pipes are open
// inherits them too (O_CLOEXEC acts only at execve), and would hold that run's EOF until its own
// payload starts. With more fds than fit, nothing is closed here (exec_payload still closes them).
void close_foreign_fds(const ChildPlan& plan) {
  const int own[] = {plan.go_event,     plan.sync_read,      plan.error_write,     plan.status_write,
                     plan.control_write, plan.notify_write,   plan.stdin_fd,        plan.stdout_write,
                     plan.stderr_write,  plan.root_tree.get(), plan.test_bind_tree.get()};
  constexpr size_t kMax = 64;
  constexpr size_t kOwn = sizeof own / sizeof own[0];
  if (kOwn + plan.bind_trees.size() > kMax) return;
  int keep[kMax];
  size_t n = 0;
  for (int fd : own) keep[n++] = fd;
  for (const auto& t : plan.bind_trees) keep[n++] = t.get();
  close_all_except(keep, n);
}

// Loads the filter with a new listener and hands the listener to the launcher; the payload keeps
// no copy (else it could answer its own denials). sendmsg and close are allowed by any profile
// the notify program is built from (see SeccompProgram::notify_instructions).
int install_with_listener(const ChildPlan& plan) {
  int listener = install_seccomp_listener(plan.seccomp);
  if (listener < 0) return listener;
  bool sent = send_fd(plan.notify_write, listener, 'N');
  int err = errno;
  ::close(listener);
  ::close(plan.notify_write);
  return sent ? 0 : -err;
}

// What the payload's clone gets: it shares pid 1's memory until its execve.
struct PayloadStart {
  const ChildPlan* plan;
  const Release* release;
};

[[noreturn]] void exec_payload(const ChildPlan& plan, const Release& rel) {
  // The signal mask (empty) and dispositions (all defaults) are pid 1's (child_main), copied at
  // the clone.
  if (::dup2(plan.stdin_fd, 0) < 0 || ::dup2(plan.stdout_write, 1) < 0 || ::dup2(plan.stderr_write, 2) < 0) {
    report_error(plan, "redirect stdio", errno, "dup2");
    ::_exit(125);
  }
  close_all_but(plan.error_write, plan.notify_write);  // O_CLOEXEC: closed by a successful execve
  if (::chdir(plan.workdir.c_str()) != 0) {
    report_error(plan, "chdir to workdir", errno, plan.workdir.c_str());
    ::_exit(125);
  }
  // Last step before execve: from here on every syscall is filtered.
  if (int rc = plan.notify_write >= 0 ? install_with_listener(plan) : install_seccomp_program(plan.seccomp); rc != 0) {
    report_error(plan, "load seccomp filter", -rc, "seccomp(SECCOMP_SET_MODE_FILTER)");
    ::_exit(125);
  }
  ::execve(rel.argv[0], rel.argv, rel.envp);
  report_error(plan, "execve", errno, rel.argv[0]);
  ::_exit(125);
}

int payload_main(void* arg) {
  const auto* start = static_cast<const PayloadStart*>(arg);
  exec_payload(*start->plan, *start->release);
}

[[noreturn]] void reap(const ChildPlan& plan, pid_t payload) {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      ::_exit(125);  // no children left without having seen the payload: cannot happen
    }
    if (pid == payload) {
      write_all(plan.status_write, &status, sizeof status);
      ::_exit(0);
    }
  }
}

}  // namespace

void child_main(const ChildPlan& plan) {
  // Die with the launcher; pid 1 dying takes the whole sandbox with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Every signal back to its default before any is unblocked: a handler of the launcher's
  // process must never run here, and one ignored there (SIG_IGN survives execve) must not reach
  // the program. Done here, while the launcher syncs run_start, and not in the payload after the
  // launcher's word: that was 62 system calls on the way to the program.
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  close_foreign_fds(plan);

  // The first release is an eventfd: a socket write wakes its reader on the writer's CPU (a
  // "sync" wakeup, for a writer about to sleep), but the launcher goes on working (before_exec)
  // while we set up, and the two would share one CPU. The socket readable first is EOF: the
  // launcher gave up before the start.
  pollfd wait_for[2] = {{plan.go_event, POLLIN, 0}, {plan.sync_read, POLLIN, 0}};
  while (::poll(wait_for, 2, -1) < 0)
    if (errno != EINTR) ::_exit(125);
  if (!(wait_for[0].revents & POLLIN)) ::_exit(125);
  if (!enter_id_slot(plan)) ::_exit(125);

  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    report_error(plan, "make pid 1 non-dumpable", errno, "PR_SET_DUMPABLE");
    ::_exit(125);
  }
  // The cgroup namespace is created only now, after the launcher placed us in our cgroup, so
  // that the sandbox sees its own cgroup as the root.
  if (::unshare(CLONE_NEWCGROUP) != 0) {
    report_error(plan, "unshare cgroup namespace", errno, "CLONE_NEWCGROUP");
    ::_exit(125);
  }
  if (::setsid() < 0) {
    report_error(plan, "setsid", errno, "leave the controlling terminal");
    ::_exit(125);
  }
  if (!run_mount_plan(plan)) ::_exit(125);
  if (::sethostname(plan.hostname.data(), plan.hostname.size()) != 0) {
    // Refused by a container's seccomp profile (podman's default, some pods'): the UTS namespace
    // is still the sandbox's own, only the host's name shows in it. Said, not fatal.
    if (errno != EPERM) {
      report_error(plan, "sethostname", errno, plan.hostname.c_str());
      ::_exit(125);
    }
    report_degradation(plan, "hostname not set (sethostname refused, e.g. by a container's seccomp profile): "
                             "the sandbox shows the host's name", errno);
  }
  if (!setup_network(plan)) ::_exit(125);
  // Set up as far as a run that is not known yet allows: now wait for the release with what
  // only the run knows (release.hpp), finish the setup, and wait for the launcher's word that
  // the payload may start (its run_start record is durable). EOF means the launcher died (it
  // holds the write end open while it lives), at any point.
  Release rel;
  if (!read_release(plan, rel)) ::_exit(125);
  if (!place_script(plan, rel)) ::_exit(125);
  if (!apply_landlock(plan)) ::_exit(125);
  if (plan.wipe_begin && plan.wipe_end > plan.wipe_begin)
    std::memset(plan.wipe_begin, 0, static_cast<size_t>(plan.wipe_end - plan.wipe_begin));
  if (!drop_privileges(plan)) ::_exit(125);
  // A credential change clears the parent-death signal: set it again.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  char start = 0;
  ssize_t got;
  while ((got = ::read(plan.sync_read, &start, 1)) < 0 && errno == EINTR) {}
  if (got != 1 || start != kStartPayload) ::_exit(125);

  // The payload shares pid 1's memory until its execve (CLONE_VM | CLONE_VFORK, as posix_spawn
  // does): a fork would copy the launcher's address space, which pid 1 still has, only for
  // execve to drop it again. pid 1 is suspended meanwhile, and the payload makes only system
  // calls, on the stack the launcher prepared. glibc's clone() runs no atfork handlers: this
  // process was cloned from a possibly multi-threaded launcher, and their locks could be held.
  const auto top = reinterpret_cast<uintptr_t>(plan.payload_stack.get() + plan.payload_stack_size) & ~uintptr_t{15};
  PayloadStart payload_start{&plan, &rel};
  const pid_t payload =
      ::clone(payload_main, reinterpret_cast<void*>(top), CLONE_VM | CLONE_VFORK | SIGCHLD, &payload_start);
  if (payload < 0) {
    report_error(plan, "start payload", errno, "clone");
    ::_exit(125);
  }
  // pid 1 keeps only the status pipe.
  close_all_but(plan.status_write);
  ::close(0);
  ::close(1);
  ::close(2);
  reap(plan, payload);
}

}  // namespace sandboxrun::launch
