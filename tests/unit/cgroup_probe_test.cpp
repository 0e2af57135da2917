// Host discovery and backend selection against fake mountinfo / cgroup trees, run naming, and
// the stale sweep on plain directories.
#include <fcntl.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "../../src/cgroup/cgroup_impl.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using namespace sandboxrun::cgroup_detail;
namespace fs = std::filesystem;
using test_util::put;
using test_util::TempDir;

namespace {

// This development host's layout (hybrid).
constexpr const char* kHybrid =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupProbe, ParsesHybridMountinfo) {
  auto m = parse_mountinfo(kHybrid);
  ASSERT_TRUE(m.v2);
  EXPECT_EQ(m.v2->mountpoint, "/sys/fs/cgroup/unified");
  EXPECT_EQ(m.v1.at("memory").mountpoint, "/sys/fs/cgroup/memory");
  EXPECT_EQ(m.v1.at("cpuacct").mountpoint, "/sys/fs/cgroup/cpuacct");
  EXPECT_EQ(m.v1.count("name=systemd"), 0u);
}

TEST(CgroupProbe, ParsesCombinedCpuCpuacctAndEscapes) {
  auto m = parse_mountinfo(
      "30 23 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "31 23 0:27 /sub /mnt/my\\040cg rw shared:5 - cgroup2 cgroup2 rw,nsdelegate\n");
  EXPECT_EQ(m.v1.at("cpu").mountpoint, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(m.v1.at("cpuacct").mountpoint, "/sys/fs/cgroup/cpu,cpuacct");
  ASSERT_TRUE(m.v2);
  EXPECT_EQ(m.v2->mountpoint, "/mnt/my cg");
  EXPECT_EQ(m.v2->root, "/sub");
}

TEST(CgroupProbe, OwnCgroup) {
  const char* self = "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n0::/svc.service\n";
  EXPECT_EQ(own_cgroup(self, "").value(), "/svc.service");
  EXPECT_EQ(own_cgroup(self, "memory").value(), "/process_api/abc");
  EXPECT_EQ(own_cgroup(self, "cpuacct").value(), "/x");
  EXPECT_FALSE(own_cgroup(self, "pids"));
}

std::string v2_mountinfo(const fs::path& root) {
  return "41 31 0:38 / " + root.string() + " rw - cgroup2 cgroup2 rw\n";
}

TEST(CgroupPlan, V2WithControllersUnderRootGoesToSandboxrun) {
  TempDir t;
  put(t.path() / "cgroup.controllers", "cpuset cpu io memory pids\n");
  CgroupSettings s;
  Plan p = plan_cgroups(s, v2_mountinfo(t.path()), "0::/\n");
  std::printf("[backend %s] %s\n", p.version.c_str(), p.detail.c_str());
  EXPECT_EQ(p.version, "v2");
  EXPECT_EQ(p.v2_parent, (t.path() / "sandboxrun").string());
  EXPECT_FALSE(p.v2_parent_is_own);
  EXPECT_EQ(p.controllers, (std::vector<std::string>{"memory", "pids", "cpu"}));
}

TEST(CgroupPlan, V2ConfiguredParent) {
  TempDir t;
  put(t.path() / "cgroup.controllers", "memory pids\n");
  CgroupSettings s;
  s.parent = "/machine.slice/sandboxes/";
  Plan p = plan_cgroups(s, v2_mountinfo(t.path()), "0::/\n");
  EXPECT_EQ(p.version, "v2");
  EXPECT_EQ(p.v2_parent, (t.path() / "machine.slice/sandboxes").string());
  EXPECT_NE(p.detail.find("cpu controller missing"), std::string::npos) << p.detail;
  s.parent = "../escape";
  EXPECT_THROW(plan_cgroups(s, v2_mountinfo(t.path()), "0::/\n"), Error);
}

TEST(CgroupPlan, V2DelegatedOwnCgroupAndItsLauncherLeaf) {
  TempDir t;
  put(t.path() / "cgroup.controllers", "memory pids cpu\n");
  put(t.path() / "svc.service" / "cgroup.controllers", "memory pids cpu\n");
  const std::string svc = (t.path() / "svc.service").string();
  CgroupSettings s;
  // Not delegated (no marker; we are root so write access proves nothing): root's sandboxrun.
  Plan p = plan_cgroups(s, v2_mountinfo(t.path()), "0::/svc.service\n");
  EXPECT_EQ(p.v2_parent, (t.path() / "sandboxrun").string());
  if (::setxattr(svc.c_str(), "user.delegate", "1", 1, 0) != 0)
    GTEST_SKIP() << "no user xattrs on " << t.path() << ": " << std::strerror(errno);
  p = plan_cgroups(s, v2_mountinfo(t.path()), "0::/svc.service\n");
  EXPECT_EQ(p.v2_parent, svc);
  EXPECT_TRUE(p.v2_parent_is_own);
  // Already moved into our leaf by an earlier run: the runs go beside it, not below it.
  fs::create_directories(t.path() / "svc.service" / kLauncherLeaf);
  p = plan_cgroups(s, v2_mountinfo(t.path()), std::string("0::/svc.service/") + kLauncherLeaf + "\n");
  EXPECT_EQ(p.v2_parent, svc);
  EXPECT_TRUE(p.v2_parent_is_own);
}

TEST(CgroupPlan, V2ContainersWritableNamespaceRootAndItsLauncherLeaf) {
  // A worker pod's cgroup namespace: its root is the mount's, and a non-root cgroup.
  TempDir t;
  put(t.path() / "cgroup.controllers", "memory pids cpu\n");
  put(t.path() / "cgroup.subtree_control", "");
  CgroupSettings s;
  Plan p = plan_cgroups(s, v2_mountinfo(t.path()), "0::/\n");
  EXPECT_EQ(p.v2_parent, (t.path() / "sandboxrun").string()) << "the host's root cgroup is nobody's subtree";
  EXPECT_FALSE(p.v2_parent_is_own);
  put(t.path() / "cgroup.type", "domain\n");
  p = plan_cgroups(s, v2_mountinfo(t.path()), "0::/\n");
  EXPECT_EQ(p.version, "v2") << p.detail;
  EXPECT_EQ(p.v2_parent, t.path().string());
  EXPECT_TRUE(p.v2_parent_is_own);
  fs::create_directories(t.path() / kLauncherLeaf);
  p = plan_cgroups(s, v2_mountinfo(t.path()), std::string("0::/") + kLauncherLeaf + "\n");
  EXPECT_EQ(p.v2_parent, t.path().string());
  EXPECT_TRUE(p.v2_parent_is_own);
}

TEST(CgroupPlan, V2WithoutMemoryOrPidsIsRefusedWithTheFix) {
  TempDir t;
  put(t.path() / "cgroup.controllers", "cpu io\n");
  Plan p = plan_cgroups(CgroupSettings{}, v2_mountinfo(t.path()), "0::/\n");
  EXPECT_EQ(p.version, "none");
  EXPECT_NE(p.detail.find("memory"), std::string::npos) << p.detail;
}

TEST(CgroupPlan, HybridPicksV1WithTheUnifiedCompanion) {
  TempDir t;
  put(t.path() / "unified" / "cgroup.controllers", "\n");
  std::string mi = "41 31 0:38 / " + (t.path() / "unified").string() + " rw - cgroup2 cgroup2 rw\n";
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    fs::create_directories(t.path() / c);
    mi += "50 31 0:40 / " + (t.path() / c).string() + " rw - cgroup cgroup rw," + c + "\n";
  }
  Plan p = plan_cgroups(CgroupSettings{}, mi, "0::/\n");
  std::printf("[backend %s] %s\n", p.version.c_str(), p.detail.c_str());
  EXPECT_EQ(p.version, "v1");
  EXPECT_EQ(p.v1_parents.at("memory"), (t.path() / "memory" / "sandboxrun").string());
  EXPECT_EQ(p.unified_parent, (t.path() / "unified" / "sandboxrun").string());
  EXPECT_EQ(p.v1_parents.count("freezer"), 0u);
  EXPECT_NE(p.detail.find("freezer"), std::string::npos) << "missing controllers are named";
}

TEST(CgroupPlan, NothingUsable) {
  Plan p = plan_cgroups(CgroupSettings{}, "", "0::/\n");
  EXPECT_EQ(p.version, "none");
  EXPECT_FALSE(p.detail.empty());
}

TEST(CgroupNames, RoundTripAndForeignNames) {
  Owner o{1234, 987654};
  std::string n = run_dir_name("run-1.a_b", o);
  EXPECT_EQ(n, "run-1.a_b@1234.987654");
  auto back = parse_run_dir_name(n);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->pid, 1234);
  EXPECT_EQ(back->start, 987654u);
  for (const char* foreign : {"sandboxrun", "x@1", "a@b.c", "@1.2", "a b@1.2", "a@1.2x", "a@0.5",
                              "user.slice", "docker-1234.scope", "a@ 1.2"})
    EXPECT_FALSE(parse_run_dir_name(foreign)) << foreign;
  EXPECT_NO_THROW(validate_run_id("0f3a-77"));
  EXPECT_THROW(validate_run_id(std::string(129, 'a')), Error);
}

TEST(CgroupSweep, RemovesOnlyDeadOwnersRuns) {
  TempDir t;
  // A dead owner: a child we have reaped.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  auto dead_start = process_start_time(dead);
  ::waitpid(dead, nullptr, 0);
  Owner me = self_owner();
  const std::string stale = run_dir_name("a", Owner{dead, dead_start.value_or(1)});
  const std::string recycled = run_dir_name("b", Owner{me.pid, me.start + 1});  // our pid, not us
  const std::string live = run_dir_name("c", me);
  for (const auto& n : {stale, recycled, live, std::string("foreign")}) fs::create_directories(t.path() / n);
  EXPECT_EQ(sweep_stale({{t.path().string(), false}}, nullptr), 2u);
  EXPECT_FALSE(fs::exists(t.path() / stale));
  EXPECT_FALSE(fs::exists(t.path() / recycled));
  EXPECT_TRUE(fs::exists(t.path() / live));
  EXPECT_TRUE(fs::exists(t.path() / "foreign"));
}

TEST(CgroupSweep, ZombieOwnerIsDead) {
  auto hold = make_pipe();
  pid_t z = ::fork();
  if (z == 0) {
    char c;
    hold.write.reset();
    (void)!::read(hold.read.get(), &c, 1);  // alive until the parent has read its start time
    ::_exit(0);
  }
  hold.read.reset();
  auto start = process_start_time(z);
  ASSERT_TRUE(start);
  EXPECT_TRUE(owner_alive(Owner{z, *start}));
  hold.write.reset();
  // Wait until it is a zombie (exited, not reaped).
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(z), &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(owner_alive(Owner{z, *start}));
  ::waitpid(z, nullptr, 0);
}

}  // namespace
