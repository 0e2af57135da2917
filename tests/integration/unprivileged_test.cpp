// The launcher run by an ordinary user: a user namespace maps the sandbox user to the caller,
// and untrusted code is refused when the host cannot enforce its limits (fail closed).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <fstream>
#include <sstream>

#include "harness.hpp"

using sandboxrun::testing::run_program;
using sandboxrun::testing::TempDir;

namespace {

constexpr int kNobody = 65534;

std::string reachable_source() { return sandboxrun::testing::reachable_source_dir(); }

sandboxrun::testing::Exec run_binary(const std::vector<std::string>& args, const std::vector<std::string>& env,
                                     int as_uid) {
  return sandboxrun::testing::run_binary(args, env, as_uid);
}

std::string userns_limit() {
  std::ifstream f("/proc/sys/user/max_user_namespaces");
  std::string v;
  f >> v;
  return v;
}

// Whether an unprivileged user may make a user namespace here: 0, or the errno (Ubuntu 23.10+'s
// AppArmor restriction and Debian's unprivileged_userns_clone=0 refuse it with the sysctl above
// still nonzero).
int unprivileged_userns_errno() {
  const pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) {
    if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody) != 0) ::_exit(126);
    ::_exit(::unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0xff));
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return EIO;
  return WEXITSTATUS(status);
}

struct UnprivilegedRun : ::testing::Test {
  void SetUp() override {
    if (getuid() != 0) GTEST_SKIP() << "needs root to switch to an unprivileged user for the test";
    if (userns_limit() == "0") GTEST_SKIP() << "host lacks user namespaces (user.max_user_namespaces=0)";
    if (const int e = unprivileged_userns_errno())
      GTEST_SKIP() << "this host refuses user namespaces to unprivileged users (" << std::strerror(e)
                   << ": AppArmor's kernel.apparmor_restrict_unprivileged_userns or Debian's "
                      "kernel.unprivileged_userns_clone=0); doctor names the fix";
    src = reachable_source();
    ASSERT_FALSE(src.empty());
    chmod(dir.path().c_str(), 0755);
    script = dir.write("probe.py", R"(
import json, os
st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
try:
    open('/proc/1/environ', 'rb').read(); pid1 = 'readable'
except OSError:
    pid1 = 'denied'
print(json.dumps({'uid': os.getuid(), 'caps': [st[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')],
                  'nnp': st['NoNewPrivs'].strip(), 'seccomp': st['Seccomp'].strip(), 'pid1_environ': pid1}))
)");
    chmod(script.c_str(), 0644);
    // The caller's own audit log: an unprivileged user cannot write /var/log/sandboxrun.
    audit_dir = dir.path() + "/audit";
    mkdir(audit_dir.c_str(), 0700);
    chown(audit_dir.c_str(), kNobody, kNobody);
    std::ifstream sec(src + "/config/security.yaml");
    std::stringstream text;
    text << sec.rdbuf();
    std::string security = text.str();
    auto at = security.find("rules: policies/");
    ASSERT_NE(at, std::string::npos);
    security.replace(at, 7, "rules: " + src + "/");
    chmod(dir.write("security.yaml", security).c_str(), 0644);
  }
  std::string config(bool degraded) {
    std::string path = dir.write(degraded ? "degraded.yaml" : "strict.yaml",
                                 "image: " + src + "/rootfs/default\n"
                                 "security_opt: [no-new-privileges, seccomp=" + src + "/policies/default.json]\n"
                                 "trust_levels:\n  untrusted:\n    security_opt: [no-new-privileges, seccomp=" + src +
                                     "/policies/untrusted.json]\n"
                                 "cgroup:\n  allow_degraded: " + (degraded ? "true" : "false") + "\n");
    chmod(path.c_str(), 0644);
    return path;
  }
  std::vector<std::string> run_args(bool degraded) {
    return {"--config", config(degraded), "--audit-log", audit_dir + "/audit.log"};
  }
  TempDir dir;
  std::string src, script, audit_dir;
};

}  // namespace

TEST_F(UnprivilegedRun, UntrustedCodeIsRefusedWithoutEnforceableLimits) {
  auto args = run_args(false);
  args.insert(args.end(), {"--trust", "untrusted", "--override", "probes the isolation", script});
  auto r = run_binary(args, {}, kNobody);
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_NE(r.err.find("cgroup"), std::string::npos) << "the message must say what the host lacks: " << r.err;
  EXPECT_NE(r.err.find("cgroup.allow_degraded"), std::string::npos) << "and the setting that allows it: " << r.err;
  // Trusted code too (the README says so): limits are what makes any level's promise.
  auto trusted = run_args(false);
  const std::string benign = dir.write("benign.py", "print(1)\n");
  chmod(benign.c_str(), 0644);
  trusted.insert(trusted.end(), {"--trust", "trusted", "--json", benign});
  auto t = run_binary(trusted, {}, kNobody);
  EXPECT_EQ(t.exit_code, 125) << t.out << t.err;
  EXPECT_EQ(nlohmann::json::parse(t.out, nullptr, false).value("error_kind", ""), "limits") << t.out;
}

// A user with no writable home (a service account, HOME=/nonexistent): the default audit log
// cannot be made, and the message says it is the audit log and how to put it elsewhere.
TEST_F(UnprivilegedRun, NoWritableHomeNamesTheAuditLogAndTheOption) {
  auto args = std::vector<std::string>{"--config", config(true), "--override", "probes the isolation", script};
  auto r = run_binary(args, {"HOME=/nonexistent", "XDG_STATE_HOME="}, kNobody);
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_NE(r.err.find("audit log"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--audit-log"), std::string::npos) << r.err;
}

TEST_F(UnprivilegedRun, DegradedModeRunsInAUserNamespaceWithTheSameIsolation) {
  auto args = run_args(true);
  args.insert(args.end(), {"--json", "--override", "probes the isolation", script});
  auto r = run_binary(args, {"SECRET=leak-me"}, kNobody);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto result = nlohmann::json::parse(r.out);
  EXPECT_EQ(result["cgroup"], "none (degraded)");
  ASSERT_EQ(result["degradations"].size(), 2u) << "a degraded run must say so in its result";
  EXPECT_EQ(result["degradations"][0].get<std::string>().rfind("no cgroup", 0), 0u) << result["degradations"];
  EXPECT_EQ(result["degradations"][1].get<std::string>().rfind("no id slot", 0), 0u) << result["degradations"];
  auto j = nlohmann::json::parse(result["stdout"].get<std::string>());
  EXPECT_EQ(j["uid"], 1000);
  for (const auto& c : j["caps"]) EXPECT_EQ(c, "0000000000000000");
  EXPECT_EQ(j["nnp"], "1");
  EXPECT_EQ(j["seccomp"], "2");
  EXPECT_EQ(j["pid1_environ"], "denied");
}
