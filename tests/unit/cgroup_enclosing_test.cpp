// cgroup.mode enclosing against fake cgroup trees: where our own cgroup is (v2, v1), the
// container's limits read up to the mount point, what is refused and what the refusal says, and
// the check that nothing else lives in the cgroup.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "../../src/cgroup/cgroup_impl.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using namespace sandboxrun::cgroup_detail;
namespace fs = std::filesystem;
using test_util::put;
using test_util::TempDir;

namespace {

CgroupSettings enclosing() {
  CgroupSettings s;
  s.mode = CgroupMode::enclosing;
  return s;
}

std::string v2_mountinfo(const fs::path& root) { return "41 31 0:38 / " + root.string() + " ro - cgroup2 cgroup2 rw\n"; }

// A pod's container on cgroup v2: the pod's cgroup limits pids (and memory, looser), the
// container's memory and cpu.
Plan v2_container(const fs::path& root) {
  put(root / "cgroup.controllers", "cpu memory pids\n");
  put(root / "memory.max", "1073741824\n");
  put(root / "pids.max", "64\n");
  put(root / "ctr" / "cgroup.controllers", "cpu memory pids\n");
  put(root / "ctr" / "memory.max", "268435456\n");
  put(root / "ctr" / "memory.swap.max", "0\n");
  put(root / "ctr" / "pids.max", "max\n");
  put(root / "ctr" / "cpu.max", "100000 100000\n");
  put(root / "ctr" / "cgroup.procs", std::to_string(::getpid()) + "\n");
  return plan_cgroups(enclosing(), v2_mountinfo(root), "0::/ctr\n");
}

TEST(CgroupEnclosing, V2FindsOwnCgroupAndReadsTheTightestLimitUpToTheMount) {
  TempDir t;
  Plan p = v2_container(t.path());
  ASSERT_EQ(p.version, "v2") << p.detail;
  EXPECT_TRUE(p.enclosing);
  EXPECT_EQ(p.enclosing_dirs.at("v2"), (t.path() / "ctr").string());
  EnclosingLimits e = read_enclosing_limits(p);
  EXPECT_EQ(e.memory.value_or(0), 256u << 20);
  EXPECT_EQ(e.memory_at, (t.path() / "ctr" / "memory.max").string());
  EXPECT_TRUE(e.no_swap);
  EXPECT_EQ(e.pids.value_or(0), 64u) << "the parent's pids.max binds the container";
  EXPECT_TRUE(e.cpu_controller);
  EXPECT_DOUBLE_EQ(e.cpus.value_or(0), 1.0);
}

TEST(CgroupEnclosing, V1FindsEachControllersCgroup) {
  TempDir t;
  std::string mi = v2_mountinfo(t.path() / "unified");
  put(t.path() / "unified" / "cgroup.controllers", "\n");  // hybrid: the cgroup2 mount has none
  for (const char* c : {"memory", "pids", "cpu,cpuacct"})
    mi += "50 31 0:40 /pod " + (t.path() / c).string() + " ro - cgroup cgroup rw," + c + "\n";
  put(t.path() / "memory" / "ctr" / "memory.limit_in_bytes", "209715200\n");
  put(t.path() / "memory" / "ctr" / "memory.memsw.limit_in_bytes", "209715200\n");
  put(t.path() / "memory" / "memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
  put(t.path() / "pids" / "ctr" / "pids.max", "max\n");
  put(t.path() / "cpu,cpuacct" / "ctr" / "cpu.cfs_quota_us", "-1\n");
  put(t.path() / "cpu,cpuacct" / "ctr" / "cpu.cfs_period_us", "100000\n");
  const std::string self = "5:memory:/pod/ctr\n4:pids:/pod/ctr\n3:cpu,cpuacct:/pod/ctr\n0::/\n";
  Plan p = plan_cgroups(enclosing(), mi, self);
  ASSERT_EQ(p.version, "v1") << p.detail;
  EXPECT_EQ(p.enclosing_dirs.at("memory"), (t.path() / "memory" / "ctr").string());
  EXPECT_EQ(p.enclosing_dirs.at("cpuacct"), (t.path() / "cpu,cpuacct" / "ctr").string());
  EnclosingLimits e = read_enclosing_limits(p);
  EXPECT_EQ(e.memory.value_or(0), 200u << 20);
  EXPECT_TRUE(e.no_swap);
  EXPECT_FALSE(e.pids);
  EXPECT_TRUE(e.cpu_controller);
  EXPECT_FALSE(e.cpus) << "a quota of -1 is no limit";
}

TEST(CgroupEnclosing, OwnCgroupNotVisibleIsNone) {
  TempDir t;
  put(t.path() / "cgroup.controllers", "cpu memory pids\n");
  // Our cgroup lies outside what this mount shows.
  Plan p = plan_cgroups(enclosing(), "41 31 0:38 /other " + t.path().string() + " ro - cgroup2 cgroup2 rw\n", "0::/ctr\n");
  EXPECT_EQ(p.version, "none");
  EXPECT_NE(p.detail.find("not visible"), std::string::npos) << p.detail;
}

Limits untrusted() {
  Limits l;
  l.memory_bytes = 256u << 20;
  l.pids = 64;
  l.cpus = 1;
  return l;
}

TEST(CgroupEnclosing, LooserLimitsAreRefusedNamingThePodAndPodmanSettings) {
  EnclosingLimits e;
  e.memory = 1u << 30;
  e.memory_at = "/sys/fs/cgroup/memory.max";
  e.no_swap = true;
  e.pids = 64;
  e.cpu_controller = true;
  e.cpus = 4;
  std::vector<std::string> degradations;
  try {
    check_enclosing_limits(e, untrusted(), false, "/sys/fs/cgroup", degradations);
    FAIL() << "a 1 GiB container ran a 256 MiB run";
  } catch (const Error& err) {
    const std::string said = err.describe();
    EXPECT_EQ(err.kind(), ErrorKind::limits);
    EXPECT_NE(said.find("memory 1GiB"), std::string::npos) << said;
    EXPECT_NE(said.find("cpu 4 > 1"), std::string::npos) << "every looser limit at once: " << said;
    EXPECT_NE(said.find("resources.limits.memory: 256Mi"), std::string::npos) << said;
    EXPECT_NE(said.find("podman --memory 256m"), std::string::npos) << said;
    EXPECT_NE(said.find("resources.limits.cpu: 1"), std::string::npos) << said;
  }
  e.memory.reset();
  e.cpus = 1;
  EXPECT_THROW(check_enclosing_limits(e, untrusted(), false, "x", degradations), Error) << "no memory limit at all";
}

TEST(CgroupEnclosing, SwapBeyondTheLimitCountsOnlyWhereTheHostHasSwap) {
  EnclosingLimits e;
  e.memory = 256u << 20;
  e.pids = 64;
  std::vector<std::string> degradations;
  EXPECT_NO_THROW(check_enclosing_limits(e, untrusted(), false, "x", degradations));
  EXPECT_THROW(check_enclosing_limits(e, untrusted(), true, "x", degradations), Error);
  e.no_swap = true;
  EXPECT_NO_THROW(check_enclosing_limits(e, untrusted(), true, "x", degradations));
}

TEST(CgroupEnclosing, PidsFallBackToTheSandboxUsersProcessLimitAndCpuToADegradation) {
  EnclosingLimits e;
  e.memory = 128u << 20;  // tighter than the run's: fine
  e.no_swap = true;
  e.pids = 64;
  std::vector<std::string> degradations;
  EXPECT_EQ(check_enclosing_limits(e, untrusted(), true, "x", degradations), 0u) << "pids.max is tight enough";
  EXPECT_EQ(degradations.size(), 1u) << "no cpu controller: said";
  e.pids.reset();
  EXPECT_EQ(check_enclosing_limits(e, untrusted(), true, "x", degradations), 64u);
  e.pids = 4096;
  EXPECT_EQ(check_enclosing_limits(e, untrusted(), true, "x", degradations), 64u);
}

TEST(CgroupEnclosing, OnlyTheLauncherItsAncestorsAndInitMayShareTheCgroup) {
  TempDir t;
  Plan p = v2_container(t.path());
  const fs::path procs = t.path() / "ctr" / "cgroup.procs";
  put(procs, std::to_string(::getpid()) + "\n" + std::to_string(::getppid()) + "\n1\n");
  EXPECT_NO_THROW(check_alone(p, ::getpid()));

  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  EXPECT_TRUE(descends_from(child, ::getpid()));
  EXPECT_FALSE(descends_from(::getppid(), ::getpid()));
  // A nested cgroup counts too.
  put(t.path() / "ctr" / "inner" / "cgroup.procs", std::to_string(child) + "\n");
  try {
    check_alone(p, ::getpid());
    ADD_FAILURE() << "a stranger in the container's cgroup was not noticed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(std::to_string(child)), std::string::npos) << err.what();
    EXPECT_EQ(err.kind(), ErrorKind::limits);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_NO_THROW(check_alone(p, ::getpid())) << "a process gone is no stranger";
}

}  // namespace
