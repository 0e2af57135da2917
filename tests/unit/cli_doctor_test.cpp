// `sandboxrun doctor` judges hosts this machine is not: each case a host users have, with the
// exact fix named (a probe's failure is the truth; the sysctls say why).
#include <gtest/gtest.h>

#include <cerrno>

#include "cli/doctor_checks.hpp"

namespace {

using sandboxrun::cli::CgroupFacts;
using sandboxrun::cli::judge_cgroups;
using sandboxrun::cli::judge_userns;
using sandboxrun::cli::judge_trial;
using sandboxrun::cli::UsernsFacts;

TEST(Doctor, UbuntusAppArmorRestrictionIsNamedWithItsFix) {
  const auto c = judge_userns({.root = false, .max_user_namespaces = "63000", .unprivileged_userns_clone = "1",
                               .apparmor_restrict_unprivileged = "1", .probe_errno = EACCES});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.detail.find("apparmor_restrict_unprivileged_userns=1"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("userns,"), std::string::npos) << c.fix;
  EXPECT_NE(c.fix.find("kernel.apparmor_restrict_unprivileged_userns=0"), std::string::npos) << c.fix;
}

TEST(Doctor, NoUserNamespacesAtAll) {
  const auto c = judge_userns({.root = true, .max_user_namespaces = "0", .probe_errno = ENOSPC});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.fix.find("user.max_user_namespaces=15000"), std::string::npos) << c.fix;
}

TEST(Doctor, AContainerProfileThatRefusesTheCloneIsNotCalledFine) {
  // The sysctls allow it; the probe was refused (a container's seccomp profile): never "ok".
  const auto c = judge_userns({.root = true, .max_user_namespaces = "15000", .probe_errno = EPERM});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.fix.find("seccomp"), std::string::npos) << c.fix;
  EXPECT_TRUE(judge_userns({.root = false, .max_user_namespaces = "15000", .probe_errno = 0}).ok);
}

TEST(Doctor, CgroupsReadOnlyOrNotDelegated) {
  const auto ro = judge_cgroups({.root = true, .fs_read_only = true, .can_limit = false, .summary = "v2"});
  EXPECT_FALSE(ro.ok);
  EXPECT_NE(ro.fix.find("read-only"), std::string::npos) << ro.fix;
  EXPECT_NE(ro.fix.find("cgroup.allow_degraded"), std::string::npos) << ro.fix;
  EXPECT_NE(ro.fix.find("cgroup.mode: enclosing"), std::string::npos) << "one run per container: " << ro.fix;
  const auto user = judge_cgroups({.root = false, .fs_read_only = false, .can_limit = false, .summary = "v2"});
  EXPECT_NE(user.fix.find("Delegate=yes"), std::string::npos) << user.fix;
  EXPECT_TRUE(judge_cgroups({.root = false, .fs_read_only = true, .can_limit = true, .summary = "v2"}).ok);
}

TEST(Doctor, ATrialRunNamesTheContainerSettingThatStopsIt) {
  EXPECT_TRUE(judge_trial({.root = true, .error = "", .degradations = ""}).ok);
  const auto degraded = judge_trial({.root = false, .error = "", .degradations = "hostname not set"});
  EXPECT_TRUE(degraded.ok);
  EXPECT_NE(degraded.detail.find("hostname not set"), std::string::npos) << "what it ran without is said";
  const auto proc = judge_trial({.root = false, .error = "sandbox setup failed at 'mount proc' (/proc): Operation not permitted"});
  EXPECT_FALSE(proc.ok);
  EXPECT_NE(proc.fix.find("procMount: Unmasked"), std::string::npos) << proc.fix;
  const auto looser = judge_trial({.root = false, .error = "cgroup.mode enclosing: the container's cgroup /sys/fs/cgroup "
                                                           "is looser than this run's limits: memory unlimited > 256MiB"});
  EXPECT_FALSE(looser.ok);
  EXPECT_NE(looser.fix.find("resources.limits"), std::string::npos) << looser.fix;
  const auto pivot = judge_trial({.root = false, .error = "sandbox setup failed at 'pivot_root' (/): Operation not permitted"});
  EXPECT_NE(pivot.fix.find("seccomp"), std::string::npos) << pivot.fix;
  const auto tree = judge_trial({.root = true, .error = "cannot clone a mount of the image /x: Operation not permitted"});
  EXPECT_NE(tree.fix.find("SYS_ADMIN"), std::string::npos) << tree.fix;
  EXPECT_FALSE(judge_trial({.root = true, .error = "status error, exit 125: "}).ok) << "never fine when it failed";
}

}  // namespace
