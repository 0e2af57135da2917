// Escape attempts drawn from the threat model, run as hostile code inside real sandboxes, at
// every trust level (each level has its own seccomp profile).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"

using sandboxrun::testing::run_binary;
using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;

namespace {

// Prelude: a libc handle and a helper that reports errno names.
const char* kPrelude = R"(
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
res = {}
def sys_(name, nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    res[name] = 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
)";

class Escape : public ::testing::TestWithParam<std::string> {
 protected:
  // The assessor rightly blocks this code and would force the untrusted profile; this config
  // keeps the requested level for every verdict, so each level's own profile is attacked.
  std::vector<std::string> args() {
    if (config_.empty())
      config_ = sandboxrun::testing::write_config(
          dir_, "", "verdicts:\n  low: keep\n  medium: keep\n  high: keep\n  blocked: keep\n");
    return {"--config", config_, "--trust", GetParam()};
  }
  void check_level(const nlohmann::json& result) { EXPECT_EQ(result.value("trust", ""), GetParam()) << result.dump(); }
  TempDir dir_;
  std::string config_;
  nlohmann::json attempt(const std::string& body) {
    auto r = run_python(std::string(kPrelude) + body + "\nprint(json.dumps(res))\n", args());
    check_level(r.result);
    EXPECT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
    auto j = nlohmann::json::parse(r.stdout_text(), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.stdout_text() << r.result.value("stderr", "");
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
  // Runs code expected to be killed by the kernel (SIGSYS) before it can print.
  nlohmann::json killed(const std::string& body) {
    auto r = run_python(std::string(kPrelude) + body + "\nprint('survived')\n", args());
    check_level(r.result);
    return r.result;
  }
};

}  // namespace

TEST_P(Escape, KernelAttackSurfacesAreDenied) {
  auto j = attempt(R"(
sys_('io_uring_setup', 425, 1, 0)
sys_('userfaultfd', 323, 0)
sys_('bpf', 321, 0, 0, 0)
sys_('perf_event_open', 298, 0, 0, -1, -1, 0)
sys_('keyctl', 250, 0, 0)
sys_('add_key', 248, 0, 0, 0, 0, 0)
sys_('request_key', 249, 0, 0, 0, 0)
sys_('kexec_load', 246, 0, 0, 0, 0)
sys_('init_module', 175, 0, 0, 0)
sys_('finit_module', 313, 0, 0, 0)
sys_('delete_module', 176, 0, 0)
sys_('ptrace_attach_pid1', 101, 16, 1, 0, 0)
sys_('process_vm_readv', 310, 1, 0, 0, 0, 0, 0)
)");
  for (const char* k : {"io_uring_setup", "userfaultfd", "bpf", "perf_event_open", "keyctl", "add_key",
                        "request_key", "kexec_load", "init_module", "finit_module", "delete_module",
                        "ptrace_attach_pid1", "process_vm_readv"})
    EXPECT_EQ(j[k], "EPERM") << k;
}

TEST_P(Escape, NamespacesAndMountsCannotBeCreated) {
  auto j = attempt(R"(
sys_('unshare_user', 272, 0x10000000)
sys_('unshare_mount', 272, 0x00020000)
sys_('setns', 308, 0, 0)
sys_('clone_newuser', 56, 0x10000000 | 17, 0, 0, 0, 0)
sys_('clone3', 435, 0, 0)
sys_('mount', 165, 0, 0, 0, 0, 0)
sys_('umount2', 166, 0, 0)
sys_('pivot_root', 155, 0, 0)
sys_('open_tree', 428, -100, 0, 0)
sys_('fsopen', 430, 0, 0)
sys_('move_mount', 429, 0, 0, 0, 0, 0)
sys_('chroot', 161, 0)
)");
  for (const char* k : {"unshare_user", "unshare_mount", "setns", "clone_newuser", "mount", "umount2",
                        "pivot_root", "open_tree", "fsopen", "move_mount"})
    EXPECT_EQ(j[k], "EPERM") << k;
  EXPECT_EQ(j["clone3"], "ENOSYS") << "clone3 must answer ENOSYS so that glibc falls back to clone";
  EXPECT_NE(j["chroot"], "ok");
}

TEST_P(Escape, PrivilegesCannotBeRegained) {
  auto j = attempt(R"(
for name, fn, arg in (('setuid0', libc.setuid, 0), ('setgid0', libc.setgid, 0)):
    res[name] = 'ok' if fn(arg) == 0 else errno.errorcode[ctypes.get_errno()]
import subprocess
p = subprocess.run(['/usr/bin/su', '-c', 'id -u', 'root'], capture_output=True, text=True, stdin=subprocess.DEVNULL)
res['su_stdout'] = p.stdout.strip()
res['mknod'] = 'ok'
try:
    os.mknod('/tmp/sda', 0o600 | 0o060000, os.makedev(8, 0))
except OSError as e:
    res['mknod'] = errno.errorcode[e.errno]
)");
  EXPECT_EQ(j["setuid0"], "EPERM");
  EXPECT_EQ(j["setgid0"], "EPERM");
  EXPECT_NE(j["su_stdout"], "0") << "a setuid binary gave root";
  EXPECT_EQ(j["mknod"], "EPERM");
}

TEST_P(Escape, LauncherIsUnreachableThroughProc) {
  auto j = attempt(R"(
for what, path, mode in (('exe_write', '/proc/1/exe', 'wb'), ('exe_read', '/proc/1/exe', 'rb'),
                         ('mem', '/proc/1/mem', 'rb'), ('root', '/proc/1/root/etc/hostname', 'rb'),
                         ('cwd', '/proc/1/cwd', 'rb')):
    try:
        open(path, mode).close(); res[what] = 'opened'
    except OSError as e:
        res[what] = errno.errorcode[e.errno]
try:
    res['exe_link'] = os.readlink('/proc/1/exe')
except OSError as e:
    res['exe_link'] = errno.errorcode[e.errno]
import signal
try:
    os.kill(1, signal.SIGKILL); res['kill_pid1'] = 'sent'
except OSError as e:
    res['kill_pid1'] = errno.errorcode[e.errno]
res['fds'] = sorted(int(f) for f in os.listdir('/proc/self/fd'))
)");
  for (const char* k : {"exe_write", "exe_read", "mem", "root", "cwd", "exe_link"})
    EXPECT_EQ(j[k], "EACCES") << k;
  // Signals from inside to the namespace's init are dropped; the run still ends normally.
  EXPECT_EQ(j["fds"], nlohmann::json::parse("[0,1,2,3]")) << "only stdio and listdir's own fd may be open";
}

TEST_P(Escape, TerminalInjectionIsDenied) {
  // Each attempt runs in a child: a profile may answer EPERM or kill the attempt outright.
  auto j = attempt(R"(
import pty, termios, signal
m, s = pty.openpty()
def try_ioctl(cmd):
    pid = os.fork()
    if pid == 0:
        r = libc.ioctl(s, ctypes.c_ulong(cmd), ctypes.c_char_p(b'x'))
        os._exit(0 if r >= 0 else 10 + ctypes.get_errno())
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        return 'killed' if os.WTERMSIG(st) == signal.SIGSYS else 'signal %d' % os.WTERMSIG(st)
    code = os.WEXITSTATUS(st)
    return 'ok' if code == 0 else errno.errorcode[code - 10]
for name, cmd in (('tiocsti', termios.TIOCSTI), ('tiocsti_high_bits', termios.TIOCSTI | (1 << 32)),
                  ('tioclinux', 0x541C), ('tiocgwinsz', termios.TIOCGWINSZ)):
    res[name] = try_ioctl(cmd)
)");
  for (const char* k : {"tiocsti", "tiocsti_high_bits", "tioclinux"})
    EXPECT_TRUE(j[k] == "EPERM" || j[k] == "killed") << k << ": " << j[k]
        << (std::string(k) == "tiocsti_high_bits" ? " (the filter must compare only the low 32 bits)" : "");
  EXPECT_EQ(j["tiocgwinsz"], "ok") << "ordinary tty ioctls must keep working";
}

TEST_P(Escape, DangerousSocketFamiliesAreDenied) {
  auto j = attempt(R"(
import socket
for name, fam in (('af_alg', 38), ('af_vsock', 40), ('af_packet', 17)):
    try:
        socket.socket(fam, socket.SOCK_SEQPACKET if fam == 38 else socket.SOCK_STREAM).close(); res[name] = 'ok'
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
)");
  EXPECT_EQ(j["af_alg"], "EPERM");
  EXPECT_EQ(j["af_vsock"], "EPERM");
  EXPECT_NE(j["af_packet"], "ok");
}

namespace {

// What `int 0x80` (getpid in the i386 table) does on this host outside any sandbox: 0 when the
// call returns, else the signal that ended the process. Kernels without the i386 entry (booted
// with ia32_emulation=0, some microVM and gVisor kernels) end it with SIGSEGV themselves.
int host_int80_signal() {
#if defined(__x86_64__)
  const pid_t pid = ::fork();
  if (pid == 0) {
    long ret = 20;
    asm volatile("int $0x80" : "+a"(ret) : : "memory");
    ::_exit(ret > 0 ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
#else
  return -1;
#endif
}

}  // namespace

TEST_P(Escape, Legacy32BitSyscallAbiKillsTheProcess) {
  // The protection: no i386 system call runs inside. Where the host has the entry, the profile's
  // kill (SIGSYS) is what stops it; where the host refuses the call itself, its refusal must
  // still end the program before it goes on.
  const int host = host_int80_signal();
  ASSERT_TRUE(host == 0 || host == SIGSEGV) << "int 0x80 outside the sandbox: signal " << host;
  // mov eax, 20 (getpid in the i386 table); int 0x80; ret
  auto r = killed(R"(
import mmap
code = bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3])
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
)");
  EXPECT_EQ(r["status"], "signaled") << r.dump();
  if (host == 0)
    EXPECT_EQ(r.value("signal", 0), SIGSYS) << "expected SIGSYS";
  else  // this host has no i386 entry: its own SIGSEGV ends the program, as it does outside
    EXPECT_TRUE(r.value("signal", 0) == SIGSYS || r.value("signal", 0) == SIGSEGV) << r.dump();
  EXPECT_EQ(r["stdout"], "");
}

TEST_P(Escape, X32SyscallAbiKillsTheProcess) {
  auto r = killed("libc.syscall(ctypes.c_long(0x40000000 | 39))\n");
  EXPECT_EQ(r["status"], "signaled") << r.dump();
  EXPECT_EQ(r.value("signal", 0), 31) << "expected SIGSYS";
}

INSTANTIATE_TEST_SUITE_P(TrustLevels, Escape, ::testing::Values("untrusted", "unknown", "trusted"));

TEST(EscapeHost, InheritedHostFdsAreClosed) {
  // runc CVE-2024-21626: an fd the caller leaks into the launcher must not reach the payload.
  TempDir d;
  auto secret = d.write("secret", "host secret");
  auto script = d.write("s.py", "import os\nprint(sorted(int(f) for f in os.listdir('/proc/self/fd')))\n");
  int fd = open(secret.c_str(), O_RDONLY);  // deliberately without O_CLOEXEC: the launcher inherits it
  ASSERT_GE(fd, 3);
  int dir = open(d.path().c_str(), O_RDONLY | O_DIRECTORY);
  auto r = run_binary({script});
  close(fd);
  close(dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0, 1, 2, 3]\n");
}
