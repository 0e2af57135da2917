// Landlock as the second wall, tested where it matters: with the mount wall deliberately broken
// (a host directory bound writable into the sandbox, through the test-only spec field), the
// write must still be refused; with landlock: off the same fault goes through, which shows that
// the test can fail.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>

#include <filesystem>

#include "harness.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/launch.hpp"
#include "sandboxrun/seccomp.hpp"

using sandboxrun::testing::TempDir;

namespace sandboxrun {
namespace {

// The running kernel's Landlock ABI (0: none). A test of what an ABI brings skips below it,
// naming it: Debian 12's 6.1 has ABI 2, TCP rules came with ABI 4 (6.7).
int kernel_landlock_abi() {
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U /* LANDLOCK_CREATE_RULESET_VERSION */);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

struct Launch {
  SandboxSpec spec;
  SeccompProgram seccomp;
};

Launch prepare(const TempDir& d, LandlockMode mode, NetworkMode net = NetworkMode::none) {
  const SandboxConfig cfg = load_sandbox_config(testing::write_config(d));
  Launch l{resolve_spec(cfg, Trust::untrusted, {}, probe_host_resources()), {}};
  l.spec.rootfs = testing::source_dir() + "/rootfs/default";
  l.spec.landlock = mode;
  l.spec.network.mode = net;
  l.seccomp = compile_seccomp_profile(l.spec.seccomp_profile, {});
  return l;
}

RunOutcome run(const Launch& l, const std::string& code) {
  LaunchRequest req;
  req.spec = l.spec;
  req.run_id = "landlocktest" + std::to_string(::getpid());
  req.script_name = "probe.py";
  req.script = code;
  req.seccomp = &l.seccomp;
  req.capture = true;
  return run_sandbox(req);
}

// A host directory the sandbox user could write to if nothing else stopped it.
std::string open_host_dir(const TempDir& d) {
  std::string dir = d.path() + "/exposed";
  std::filesystem::create_directory(dir);
  ::chmod(d.path().c_str(), 0755);
  ::chmod(dir.c_str(), 0777);
  return dir;
}

const char* kWriteProbe = R"(
import errno
try:
    open('/mnt/planted', 'w').write('escaped')
    print('written')
except OSError as e:
    print(errno.errorcode[e.errno])
)";

TEST(Landlock, RefusesAWriteThroughAMistakenlyWritableBind) {
  if (kernel_landlock_abi() == 0) GTEST_SKIP() << "this kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=)";
  TempDir d;
  Launch l = prepare(d, LandlockMode::required);
  l.spec.test_extra_writable_bind = open_host_dir(d);
  RunOutcome o = run(l, kWriteProbe);
  ASSERT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
  EXPECT_EQ(o.stdout_data, "EACCES\n") << o.stderr_data;
  EXPECT_FALSE(std::filesystem::exists(l.spec.test_extra_writable_bind + "/planted"));
  EXPECT_GE(o.landlock_abi, 1);
  EXPECT_TRUE(o.landlock_enforced);
}

TEST(Landlock, OffLetsTheInjectedFaultThroughSoTheTestAboveCanFail) {
  TempDir d;
  Launch l = prepare(d, LandlockMode::off);
  l.spec.test_extra_writable_bind = open_host_dir(d);
  RunOutcome o = run(l, kWriteProbe);
  ASSERT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
  EXPECT_EQ(o.stdout_data, "written\n") << o.stderr_data;
  EXPECT_TRUE(std::filesystem::exists(l.spec.test_extra_writable_bind + "/planted"));
  EXPECT_EQ(o.landlock_abi, 0);
  EXPECT_FALSE(o.landlock_enforced);
}

// Allowlist mode: the egress proxy's port is the only TCP destination, even on loopback.
const char* kConnectProbe = R"(
import errno, socket
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()
def connect(port):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect(('127.0.0.1', port)); return 'connected'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
print(connect(srv.getsockname()[1]), connect(3128) != 'EACCES')
)";

TEST(Landlock, AllowlistModeConnectsOnlyToTheProxyPort) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (kernel_landlock_abi() < 4)
    GTEST_SKIP() << "Landlock ABI " << kernel_landlock_abi() << " has no TCP rules (ABI 4, Linux 6.7): doctor says so";
  TempDir d;
  RunOutcome o = run(prepare(d, LandlockMode::required, NetworkMode::allowlist), kConnectProbe);
  ASSERT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
  EXPECT_EQ(o.stdout_data, "EACCES True\n") << o.stderr_data;
  RunOutcome off = run(prepare(d, LandlockMode::off, NetworkMode::allowlist), kConnectProbe);
  EXPECT_EQ(off.stdout_data, "connected True\n") << off.stderr_data;
}

TEST(Landlock, ReportedInTheJsonResult) {
  if (kernel_landlock_abi() == 0) GTEST_SKIP() << "this kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=)";
  auto r = testing::run_python("print('hi')\n");
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
  EXPECT_EQ(r.result["landlock"]["mode"], "best_effort");
  EXPECT_EQ(r.result["landlock"]["enforced"], true);
  EXPECT_GE(r.result["landlock"]["abi"].get<int>(), 1);
}

// Runs the binary on a "kernel without Landlock": a seccomp filter inherited from this process
// makes landlock_create_ruleset answer ENOSYS, as a kernel built without it does.
testing::Sandboxed run_without_landlock(const std::string& config) {
  TempDir d;
  const std::string script = d.write("probe.py", "print('ran')\n");
  int out[2];
  if (::pipe(out) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ::_exit(99);
    ::dup2(out[1], 1);
    ::execl(SANDBOXRUN_BIN, SANDBOXRUN_BIN, "--config", config.c_str(), "--audit-log", (d.path() + "/audit.log").c_str(),
            "--json", script.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  testing::Sandboxed r;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) r.exec.out.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exec.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.result = nlohmann::json::parse(r.exec.out, nullptr, false);
  return r;
}

TEST(Landlock, RequiredOnAKernelWithoutItIsASetupError) {
  if (::geteuid() != 0) GTEST_SKIP() << "installing the test's seccomp filter without no_new_privs needs root";
  TempDir d;
  auto required = run_without_landlock(testing::write_config(d, "landlock: required\n"));
  EXPECT_EQ(required.exec.exit_code, 125) << required.exec.out;
  EXPECT_NE(required.result.value("error", "").find("Landlock"), std::string::npos) << required.exec.out;
  auto best = run_without_landlock(testing::write_config(d, "landlock: best_effort\n"));
  EXPECT_EQ(best.exec.exit_code, 0) << best.exec.out;
  EXPECT_EQ(best.result["landlock"]["abi"], 0);
  EXPECT_EQ(best.result["landlock"]["enforced"], false);
}

}  // namespace
}  // namespace sandboxrun
