// What compiled profiles do on the real kernel: each probe runs in a forked child that sets
// no_new_privs, installs the program, makes one attempt and reports through a pipe; the
// parent sees the result, or the signal that killed the child.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ipc.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asm/unistd.h>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/seccomp.hpp"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

namespace sandboxrun {
namespace {

const std::string kPolicies = std::string(SANDBOXRUN_SOURCE_DIR) + "/policies";
const std::string kDockerProfile = SANDBOXRUN_DOCKER_PROFILE;

// Profiles are compiled with this errno as their default, so a denial by the default action
// can never be mistaken for the kernel's own answer (EPERM, EFAULT ...) to the probe.
constexpr int kMarker = 4000;

struct Outcome {
  bool reported = false;  // the probe ran to the end and wrote its result
  long value = 0;
  int err = 0;
  int signal = 0;  // signal that ended the child, 0 if it exited
  int install_rc = 0;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "{reported=" << o.reported << " value=" << o.value << " errno=" << o.err << " signal=" << o.signal
            << " install_rc=" << o.install_rc << "}";
}

using ProbeFn = long (*)();

// Forks; the child confines itself with `prog` (if any) and runs `probe`.
Outcome run_probe(const SeccompProgram* prog, ProbeFn probe) {
  Pipe p = make_pipe();
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork", {}, errno);
  if (pid == 0) {
    struct {
      long value, err, install_rc;
    } msg{0, 0, 0};
    if (prog != nullptr) {
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(120);
      msg.install_rc = install_seccomp_program(prog->fprog());
      if (msg.install_rc != 0) {
        write_all(p.write.get(), &msg, sizeof msg);
        _exit(121);
      }
    }
    errno = 0;
    msg.value = probe();
    msg.err = errno;
    write_all(p.write.get(), &msg, sizeof msg);
    _exit(0);
  }
  p.write.reset();
  struct {
    long value, err, install_rc;
  } msg{};
  size_t got = 0;
  while (got < sizeof msg) {
    const ssize_t n = read(p.read.get(), reinterpret_cast<char*>(&msg) + got, sizeof msg - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  Outcome o;
  o.reported = got == sizeof msg && msg.install_rc == 0;
  o.value = msg.value;
  o.err = static_cast<int>(msg.err);
  o.install_rc = static_cast<int>(msg.install_rc);
  o.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return o;
}

SeccompProgram compile_marked(const std::string& path) {
  nlohmann::json doc = nlohmann::json::parse(read_file(path));
  doc["defaultErrnoRet"] = kMarker;
  return compile_seccomp_profile_text(doc.dump(), path + " (marked)", SeccompContext{});
}

// Probes. Arguments are chosen so that an unconfined run would fail harmlessly (EFAULT,
// EBADF, EINVAL) or act only on the probing child, never on the host.
long clone_with(unsigned long flags) {
  const long r = syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, 0);
  if (r == 0) _exit(0);  // the unconfined case: a new child in the new namespace
  if (r > 0) waitpid(static_cast<pid_t>(r), nullptr, 0);
  return r;
}

struct Probe {
  const char* name;
  ProbeFn fn;
};

const std::vector<Probe> kDeniedEverywhere = {
    {"io_uring_setup", [] { return syscall(__NR_io_uring_setup, 1, nullptr); }},
    {"io_uring_enter", [] { return syscall(__NR_io_uring_enter, -1, 0, 0, 0, nullptr, 0); }},
    {"io_uring_register", [] { return syscall(__NR_io_uring_register, -1, 0, nullptr, 0); }},
    {"userfaultfd", [] { return syscall(SYS_userfaultfd, O_CLOEXEC); }},
    {"bpf", [] { return syscall(SYS_bpf, 0xffff, nullptr, 0); }},
    {"perf_event_open", [] { return syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); }},
    {"keyctl", [] { return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0); }},
    {"add_key", [] { return syscall(SYS_add_key, nullptr, nullptr, nullptr, 0, KEY_SPEC_PROCESS_KEYRING); }},
    {"request_key", [] { return syscall(SYS_request_key, nullptr, nullptr, nullptr, 0); }},
    {"kexec_load", [] { return syscall(SYS_kexec_load, 0, 0, nullptr, 0xdead0000UL); }},
    {"kexec_file_load", [] { return syscall(SYS_kexec_file_load, -1, -1, 0, nullptr, 0xdead0000UL); }},
    {"init_module", [] { return syscall(SYS_init_module, nullptr, 0, nullptr); }},
    {"finit_module", [] { return syscall(SYS_finit_module, -1, nullptr, 0); }},
    {"delete_module", [] { return syscall(SYS_delete_module, nullptr, 0); }},
    {"mount", [] { return syscall(SYS_mount, nullptr, nullptr, nullptr, 0, nullptr); }},
    {"umount2", [] { return syscall(SYS_umount2, nullptr, 0); }},
    {"pivot_root", [] { return syscall(SYS_pivot_root, nullptr, nullptr); }},
    {"move_mount", [] { return syscall(__NR_move_mount, -1, nullptr, -1, nullptr, 0); }},
    {"open_tree", [] { return syscall(__NR_open_tree, -1, nullptr, 0); }},
    {"fsopen", [] { return syscall(__NR_fsopen, nullptr, 0); }},
    {"fsconfig", [] { return syscall(__NR_fsconfig, -1, 0, nullptr, nullptr, 0); }},
    {"fsmount", [] { return syscall(__NR_fsmount, -1, 0, 0); }},
    {"fspick", [] { return syscall(__NR_fspick, -1, nullptr, 0); }},
    {"mount_setattr", [] { return syscall(__NR_mount_setattr, -1, nullptr, 0, nullptr, 0); }},
    {"unshare_user", [] { return syscall(SYS_unshare, CLONE_NEWUSER); }},
    {"unshare_none", [] { return syscall(SYS_unshare, 0); }},
    {"setns", [] { return syscall(SYS_setns, -1, 0); }},
    {"clone_newns", [] { return clone_with(CLONE_NEWNS); }},
    {"clone_newuts", [] { return clone_with(CLONE_NEWUTS); }},
    {"clone_newipc", [] { return clone_with(CLONE_NEWIPC); }},
    {"clone_newuser", [] { return clone_with(CLONE_NEWUSER); }},
    {"clone_newpid", [] { return clone_with(CLONE_NEWPID); }},
    {"clone_newnet", [] { return clone_with(CLONE_NEWNET); }},
    {"clone_newcgroup", [] { return clone_with(CLONE_NEWCGROUP); }},
    {"clone_newuser_high_bits", [] { return clone_with(CLONE_NEWUSER | (1UL << 32)); }},
    {"ptrace", [] { return syscall(SYS_ptrace, PTRACE_TRACEME, 0, nullptr, nullptr); }},
    {"process_vm_readv", [] { return syscall(SYS_process_vm_readv, getpid(), nullptr, 0, nullptr, 0, 0); }},
    {"process_vm_writev", [] { return syscall(SYS_process_vm_writev, getpid(), nullptr, 0, nullptr, 0, 0); }},
    {"socket_af_alg", [] { return syscall(SYS_socket, AF_ALG, SOCK_SEQPACKET, 0); }},
    {"socket_af_vsock", [] { return syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0); }},
    // The kernel truncates the family to int: 0x1_00000026 is AF_ALG.
    {"socket_af_alg_high_bits", [] { return syscall(SYS_socket, (1UL << 32) | AF_ALG, SOCK_SEQPACKET, 0); }},
    {"socket_af_packet", [] { return syscall(SYS_socket, AF_PACKET, SOCK_RAW, 0); }},
    {"personality_read_implies_exec", [] { return syscall(SYS_personality, READ_IMPLIES_EXEC); }},
    {"personality_addr_no_randomize", [] { return syscall(SYS_personality, ADDR_NO_RANDOMIZE); }},
    {"kcmp", [] { return syscall(SYS_kcmp, getpid(), getpid(), 0, 0, 0); }},
    {"pidfd_getfd", [] { return syscall(__NR_pidfd_getfd, -1, 0, 0); }},
    {"process_madvise", [] { return syscall(__NR_process_madvise, -1, nullptr, 0, 0, 0); }},
    {"open_by_handle_at", [] { return syscall(SYS_open_by_handle_at, -1, nullptr, 0); }},
    {"fanotify_init", [] { return syscall(SYS_fanotify_init, 0xffffffffUL, 0); }},
    {"chroot", [] { return syscall(SYS_chroot, nullptr); }},
    {"sethostname", [] { return syscall(SYS_sethostname, nullptr, 0); }},
    {"setdomainname", [] { return syscall(SYS_setdomainname, nullptr, 0); }},
    {"reboot", [] { return syscall(SYS_reboot, 0, 0, 0, nullptr); }},
    {"swapon", [] { return syscall(SYS_swapon, nullptr, 0); }},
    {"swapoff", [] { return syscall(SYS_swapoff, nullptr); }},
    {"acct", [] { return syscall(SYS_acct, nullptr); }},
    {"syslog", [] { return syscall(SYS_syslog, 0xffff, nullptr, 0); }},
    {"quotactl", [] { return syscall(SYS_quotactl, 0, nullptr, 0, nullptr); }},
    {"settimeofday", [] { return syscall(SYS_settimeofday, nullptr, nullptr); }},
    {"clock_settime", [] { return syscall(SYS_clock_settime, 0xffff, nullptr); }},
    {"vhangup", [] { return syscall(SYS_vhangup); }},
#if defined(__x86_64__)
    {"iopl", [] { return syscall(SYS_iopl, 4); }},
    {"ioperm", [] { return syscall(SYS_ioperm, 0, 0, 0); }},
    {"modify_ldt", [] { return syscall(SYS_modify_ldt, 0xff, nullptr, 0); }},
#endif
};

// The untrusted profile's extra denials.
const std::vector<Probe> kDeniedUntrusted = {
    {"socket_netlink_audit", [] { return syscall(SYS_socket, AF_NETLINK, SOCK_RAW, NETLINK_AUDIT); }},
    {"socket_netlink_route_high_bits",
     [] { return syscall(SYS_socket, AF_NETLINK, SOCK_RAW, (1UL << 32) | NETLINK_ROUTE); }},
    {"socketpair_inet", [] { return syscall(SYS_socketpair, AF_INET, SOCK_STREAM, 0, nullptr); }},
    {"personality_linux32", [] { return syscall(SYS_personality, PER_LINUX32); }},
    {"io_setup", [] { return syscall(SYS_io_setup, 0, nullptr); }},
    {"msgget", [] { return syscall(SYS_msgget, IPC_PRIVATE, 0); }},
    {"mq_open", [] { return syscall(SYS_mq_open, nullptr, 0, 0, nullptr); }},
    {"vmsplice", [] { return syscall(SYS_vmsplice, -1, nullptr, 0, 0); }},
    {"seccomp", [] { return syscall(SYS_seccomp, 0xffff, 0, nullptr); }},
    {"get_robust_list", [] { return syscall(SYS_get_robust_list, 0, nullptr, nullptr); }},
    {"name_to_handle_at", [] { return syscall(SYS_name_to_handle_at, -1, nullptr, nullptr, nullptr, 0); }},
};

int waited_status(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

void* thread_main(void* arg) { return arg; }

// Returns 0 when the thing worked; otherwise -1 with errno set by the failing call.
const std::vector<Probe> kAllowedEverywhere = {
    {"getpid", [] { return getpid() > 0 ? 0L : -1L; }},
    {"fork",
     [] {
       const pid_t pid = fork();
       if (pid == 0) _exit(7);
       if (pid < 0) return -1L;
       const int st = waited_status(pid);
       return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0L : -1L;
     }},
    {"clone_plain", [] { return clone_with(0) > 0 ? 0L : -1L; }},
    {"pthread_create",
     [] {
       pthread_t t;
       int x = 0;
       void* out = nullptr;
       if (int rc = pthread_create(&t, nullptr, thread_main, &x); rc != 0) {
         errno = rc;
         return -1L;
       }
       pthread_join(t, &out);
       return out == &x ? 0L : -1L;
     }},
    {"socketpair",
     [] {
       int sv[2];
       if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1L;
       return (write(sv[0], "x", 1) == 1 && close(sv[0]) == 0 && close(sv[1]) == 0) ? 0L : -1L;
     }},
    {"socket_unix", [] { const int fd = socket(AF_UNIX, SOCK_STREAM, 0); return fd >= 0 ? close(fd) : -1L; }},
    {"socket_inet", [] { const int fd = socket(AF_INET, SOCK_DGRAM, 0); return fd >= 0 ? close(fd) : -1L; }},
    {"socket_inet6",
     [] {
       const int fd = socket(AF_INET6, SOCK_STREAM, 0);
       return fd >= 0 || errno == EAFNOSUPPORT ? 0L : -1L;  // a kernel without IPv6 answers for itself
     }},
    {"socket_netlink_route",
     [] { const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE); return fd >= 0 ? close(fd) : -1L; }},
    {"openpty",
     [] {
       int master = -1, slave = -1;
       if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return -1L;
       winsize ws{};
       const long r = ioctl(slave, TIOCGWINSZ, &ws);
       close(master);
       close(slave);
       return r;
     }},
    {"ioctl_fionread",
     [] {
       int fds[2];
       if (pipe(fds) != 0) return -1L;
       int n = -1;
       const long r = ioctl(fds[0], FIONREAD, &n);
       return r == 0 && n == 0 ? 0L : -1L;
     }},
    {"mmap",
     [] {
       void* p = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
       if (p == MAP_FAILED) return -1L;
       static_cast<char*>(p)[4096] = 1;
       return static_cast<long>(munmap(p, 1 << 20));
     }},
    {"eventfd", [] { const int fd = eventfd(0, EFD_CLOEXEC); return fd >= 0 ? close(fd) : -1L; }},
    {"memfd_create",
     [] {
       const int fd = memfd_create("probe", MFD_CLOEXEC);
       if (fd < 0) return -1L;
       return ftruncate(fd, 4096) == 0 ? close(fd) : -1L;
     }},
    {"epoll",
     [] {
       const int ep = epoll_create1(EPOLL_CLOEXEC);
       const int ev = eventfd(1, EFD_CLOEXEC);
       if (ep < 0 || ev < 0) return -1L;
       epoll_event e{};
       e.events = EPOLLIN;
       if (epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0) return -1L;
       epoll_event out{};
       return epoll_wait(ep, &out, 1, 0) == 1 ? 0L : -1L;
     }},
    {"poll",
     [] {
       pollfd p{STDIN_FILENO, POLLIN, 0};
       return poll(&p, 1, 0) >= 0 ? 0L : -1L;
     }},
    {"personality_query", [] { return personality(0xffffffff) >= 0 ? 0L : -1L; }},
    {"execve",
     [] {
       const pid_t pid = fork();
       if (pid == 0) {
         execl("/bin/true", "true", static_cast<char*>(nullptr));
         _exit(99);
       }
       const int st = waited_status(pid);
       return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0L : -1L;
     }},
};

struct ProfileCase {
  const char* name;
  const char* file;
  bool untrusted;
};

void PrintTo(const ProfileCase& c, std::ostream* os) { *os << c.name; }

class OurProfiles : public ::testing::TestWithParam<ProfileCase> {
 protected:
  void SetUp() override { prog_ = compile_marked(kPolicies + "/" + GetParam().file); }
  SeccompProgram prog_;
};

TEST_P(OurProfiles, DeniesDangerousSurfaces) {
  std::vector<Probe> probes = kDeniedEverywhere;
  if (GetParam().untrusted) probes.insert(probes.end(), kDeniedUntrusted.begin(), kDeniedUntrusted.end());
  for (const Probe& p : probes) {
    const Outcome o = run_probe(&prog_, p.fn);
    EXPECT_TRUE(o.reported && o.value == -1 && o.err == kMarker) << p.name << ": " << o;
  }
}

TEST_P(OurProfiles, AllowsOrdinaryThings) {
  std::vector<Probe> probes = kAllowedEverywhere;
  if (!GetParam().untrusted) probes.insert(probes.end(), kDeniedUntrusted.begin(), kDeniedUntrusted.end());
  for (const Probe& p : probes) {
    const Outcome o = run_probe(&prog_, p.fn);
    // For the untrusted-only probes the default profile leaves the answer to the kernel.
    EXPECT_TRUE(o.reported && o.err != kMarker) << p.name << ": " << o;
  }
  for (const Probe& p : kAllowedEverywhere) {
    const Outcome o = run_probe(&prog_, p.fn);
    EXPECT_TRUE(o.reported && o.value == 0) << p.name << ": " << o << " " << strerror(o.err);
  }
}

TEST_P(OurProfiles, Clone3AnswersEnosysSoGlibcFallsBack) {
  const Outcome o = run_probe(&prog_, [] { return syscall(__NR_clone3, nullptr, 0); });
  EXPECT_TRUE(o.reported && o.value == -1 && o.err == ENOSYS) << o;
}

TEST_P(OurProfiles, TerminalInjectionIoctlsKill) {
  const std::vector<Probe> probes = {
      {"TIOCSTI", [] { char c = 'x'; return syscall(SYS_ioctl, -1, TIOCSTI, &c); }},
      {"TIOCSTI_high_bits", [] { char c = 'x'; return syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSTI, &c); }},
      {"TIOCSTI_all_high_bits", [] { char c = 'x'; return syscall(SYS_ioctl, -1, 0xffffffff00000000UL | TIOCSTI, &c); }},
      {"TIOCLINUX", [] { char c = 0; return syscall(SYS_ioctl, -1, TIOCLINUX, &c); }},
      {"TIOCLINUX_high_bits", [] { char c = 0; return syscall(SYS_ioctl, -1, (1UL << 40) | TIOCLINUX, &c); }},
  };
  for (const Probe& p : probes) {
    const Outcome o = run_probe(&prog_, p.fn);
    EXPECT_TRUE(!o.reported && o.signal == SIGSYS) << p.name << ": " << o;
  }
  // Neighbouring commands, and TIOCSTI's number in the high half only, are not caught.
  for (unsigned long cmd : {0x5411UL, 0x5413UL, 0x541BUL, 0x541DUL, 0x541200000000UL}) {
    static unsigned long current;
    current = cmd;
    const Outcome o = run_probe(&prog_, [] { return syscall(SYS_ioctl, -1, current, nullptr); });
    EXPECT_TRUE(o.reported && o.value == -1 && o.err == EBADF) << std::hex << cmd << ": " << o;
  }
}

TEST_P(OurProfiles, ShippedDefaultErrnoIsEperm) {
  const SeccompProgram shipped = compile_seccomp_profile(kPolicies + "/" + GetParam().file, SeccompContext{});
  const Outcome o = run_probe(&shipped, [] { return syscall(SYS_kexec_load, 0, 0, nullptr, 0xdead0000UL); });
  EXPECT_TRUE(o.reported && o.value == -1 && o.err == EPERM) << o;
}

INSTANTIATE_TEST_SUITE_P(Policies, OurProfiles,
                         ::testing::Values(ProfileCase{"default", "default.json", false},
                                           ProfileCase{"untrusted", "untrusted.json", true}),
                         [](const ::testing::TestParamInfo<ProfileCase>& p) { return std::string(p.param.name); });

// Foreign syscall ABIs, for every profile including Docker's (sandboxrun never compiles in
// i386 or x32 even though Docker's archMap lists them).
class ForeignAbi : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { prog_ = compile_seccomp_profile(GetParam(), SeccompContext{}); }
  SeccompProgram prog_;
};

// Runs `fn` in a second thread and returns its result after joining it: a bad-arch action
// that killed only the thread (libseccomp's default, SCMP_ACT_KILL_THREAD) would let the
// process report; only SCMP_ACT_KILL_PROCESS stops it.
long in_second_thread(ProbeFn fn) {
  struct Box {
    ProbeFn fn;
    long result;
  } box{fn, -1};
  pthread_t t;
  if (pthread_create(&t, nullptr, [](void* arg) -> void* {
        auto* b = static_cast<Box*>(arg);
        b->result = b->fn();
        return nullptr;
      }, &box) != 0)
    return -1;
  pthread_join(t, nullptr);
  return box.result;
}

#if defined(__x86_64__)
long int80_getpid() {
  long ret;
  // i386 getpid is 20; int $0x80 enters the kernel through the 32-bit ABI.
  asm volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
  return ret;
}

TEST_P(ForeignAbi, I386SyscallKillsTheProcess) {
  const Outcome bare = run_probe(nullptr, int80_getpid);
  if (!bare.reported || bare.value <= 0)
    GTEST_SKIP() << "this kernel has no i386 syscall ABI (ia32 emulation off): " << bare;
  const Outcome o = run_probe(&prog_, [] { return in_second_thread(int80_getpid); });
  EXPECT_TRUE(!o.reported && o.signal == SIGSYS) << o;
}

TEST_P(ForeignAbi, X32SyscallKillsTheProcess) {
  // Same audit arch as x86_64; libseccomp's native filter sends nr >= 0x40000000 to bad-arch.
  const Outcome o = run_probe(&prog_, [] {
    return in_second_thread([] { return syscall(__X32_SYSCALL_BIT | __NR_getpid); });
  });
  EXPECT_TRUE(!o.reported && o.signal == SIGSYS) << o;
}
#endif

TEST_P(ForeignAbi, NativeSyscallStillWorks) {
  const Outcome o = run_probe(&prog_, [] { return syscall(SYS_getppid) > 0 ? 0L : -1L; });
  EXPECT_TRUE(o.reported && o.value == 0) << o;
}

INSTANTIATE_TEST_SUITE_P(Profiles, ForeignAbi,
                         ::testing::Values(kPolicies + "/default.json", kPolicies + "/untrusted.json", kDockerProfile),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.index == 0 ? std::string("default") : p.index == 1 ? "untrusted" : "docker";
                         });

// The podman/Docker default profile as Debian ships it (containers-common): its own decisions
// are what a run gets. It spells errnos both ways (errnoRet and podman's errno names) and returns
// ENOSYS (defaultErrnoRet 38) for what it does not list.
TEST(DockerProfile, AppliesTheProfilesOwnDecisions) {
  const SeccompProgram prog = compile_seccomp_profile(kDockerProfile, SeccompContext{});
  for (const Probe& p : kAllowedEverywhere) {
    const Outcome o = run_probe(&prog, p.fn);
    EXPECT_TRUE(o.reported && o.value == 0) << p.name << ": " << o;
  }
  // Denied with an explicit EPERM entry (excludes CAP_SYS_MODULE / CAP_SYS_ADMIN / CAP_SYS_BOOT).
  const std::vector<Probe> denied = {
      {"kexec_load", [] { return syscall(SYS_kexec_load, 0, 0, nullptr, 0xdead0000UL); }},
      {"init_module", [] { return syscall(SYS_init_module, nullptr, 0, nullptr); }},
      {"bpf", [] { return syscall(SYS_bpf, 0xffff, nullptr, 0); }},
  };
  for (const Probe& p : denied) {
    const Outcome o = run_probe(&prog, p.fn);
    EXPECT_TRUE(o.reported && o.value == -1 && o.err == EPERM) << p.name << ": " << o;
  }
  // Not listed at all: the profile's defaultErrnoRet.
  const Outcome uring = run_probe(&prog, [] { return syscall(__NR_io_uring_setup, 1, nullptr); });
  EXPECT_TRUE(uring.reported && uring.value == -1 && uring.err == ENOSYS) << uring;
}

TEST(SeccompInstall, RejectsEmptyProgram) {
  const sock_fprog empty{0, nullptr};
  EXPECT_EQ(install_seccomp_program(empty), -EINVAL);
}

// Ordinary Python under each profile: the workloads the untrusted profile promises to keep.
const char* const kPythonWorkload = R"PY(
import asyncio, mmap, multiprocessing as mp, os, pty, random, select, signal, socket, sqlite3
import subprocess, sys, tempfile, threading, time

def square(x):
    return x * x

def main():
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).stdout == b"1\n"
    for method in ("fork", "spawn"):
        ctx = mp.get_context(method)
        lock = ctx.Lock()             # a POSIX semaphore in /dev/shm
        with lock, ctx.Pool(2) as pool:
            assert pool.map(square, range(4)) == [0, 1, 4, 9]
    async def tick():
        r, w = socket.socketpair()
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(w, b"x")
        assert await loop.sock_recv(r, 1) == b"x"
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        assert await proc.wait() == 0
    asyncio.run(tick())
    with tempfile.TemporaryDirectory() as d:  # removed after: the test runs on the host's /tmp
        db = sqlite3.connect(os.path.join(d, "t.db"))
        db.execute("create table t (x)"); db.execute("insert into t values (1)"); db.commit()
        assert db.execute("select x from t").fetchone() == (1,)
        db.close()
    got = []
    signal.signal(signal.SIGUSR1, lambda *a: got.append(1)); os.kill(os.getpid(), signal.SIGUSR1)
    assert got
    master, slave = pty.openpty(); os.write(master, b"hi\n"); assert os.read(slave, 3) == b"hi\n"
    m = mmap.mmap(-1, 4096); m[0:1] = b"z"; assert m[0:1] == b"z"
    r, w = os.pipe(); os.write(w, b"y")
    assert select.select([r], [], [], 1)[0] == [r]
    p = select.poll(); p.register(r, select.POLLIN); assert p.poll(1000)
    e = select.epoll(); e.register(r, select.EPOLLIN); assert e.poll(1)
    efd = os.eventfd(0); os.eventfd_write(efd, 3); assert os.eventfd_read(efd) == 3
    mfd = os.memfd_create("x"); os.write(mfd, b"abc")
    time.sleep(0.01); random.random(); os.urandom(8); time.monotonic()
    print("python-ok")

if __name__ == "__main__":
    main()
)PY";

class PythonUnderProfile : public ::testing::TestWithParam<std::string> {};

TEST_P(PythonUnderProfile, OrdinaryWorkloadRuns) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3 on this host";
  const SeccompProgram prog = compile_seccomp_profile(GetParam(), SeccompContext{});
  // A file, not -c: multiprocessing's spawn method re-imports the main module by path.
  char script[] = "/tmp/sandboxrun-test-seccomp-XXXXXX.py";
  const int fd = mkstemps(script, 3);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(write_all(fd, kPythonWorkload, strlen(kPythonWorkload)));
  close(fd);
  Pipe out = make_pipe();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out.write.get(), STDOUT_FILENO);
    dup2(out.write.get(), STDERR_FILENO);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || install_seccomp_program(prog.fprog()) != 0) _exit(121);
    execl("/usr/bin/python3", "python3", "-I", script, static_cast<char*>(nullptr));
    _exit(122);
  }
  out.write.reset();
  std::string output;
  char buf[4096];
  for (ssize_t n; (n = read(out.read.get(), buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  const int st = waited_status(pid);
  unlink(script);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << output;
  EXPECT_NE(output.find("python-ok"), std::string::npos) << output;
}

INSTANTIATE_TEST_SUITE_P(Profiles, PythonUnderProfile,
                         ::testing::Values(kPolicies + "/default.json", kPolicies + "/untrusted.json", kDockerProfile),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.index == 0 ? std::string("default") : p.index == 1 ? "untrusted" : "docker";
                         });

}  // namespace
}  // namespace sandboxrun
