// Landlock as the second wall, tested where it matters: with the mount wall deliberately broken
// (a host directory bound writable into the sandbox, through the test-only spec field), the
// write must still be refused; with landlock: off the same fault goes through, which shows that
// the test can fail.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/launch.hpp"
#include "sandboxrun/seccomp.hpp"

using sandboxrun::testing::TempDir;

namespace sandboxrun {
namespace {

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
  TempDir d;
  RunOutcome o = run(prepare(d, LandlockMode::required, NetworkMode::allowlist), kConnectProbe);
  ASSERT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
  EXPECT_EQ(o.stdout_data, "EACCES True\n") << o.stderr_data;
  RunOutcome off = run(prepare(d, LandlockMode::off, NetworkMode::allowlist), kConnectProbe);
  EXPECT_EQ(off.stdout_data, "connected True\n") << off.stderr_data;
}

TEST(Landlock, ReportedInTheJsonResult) {
  auto r = testing::run_python("print('hi')\n");
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
  EXPECT_EQ(r.result["landlock"]["mode"], "best_effort");
  EXPECT_EQ(r.result["landlock"]["enforced"], true);
  EXPECT_GE(r.result["landlock"]["abi"].get<int>(), 1);
}

}  // namespace
}  // namespace sandboxrun
