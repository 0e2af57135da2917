// The cgroup v2 code paths. The parts that need no controllers (create, CLONE_INTO_CGROUP,
// cgroup.kill, populated, removal) run against the host's cgroup2 mount (on a hybrid host the
// controller-less /sys/fs/cgroup/unified); limit writing, sampling and parent preparation run
// against a fake cgroup tree in a temp dir.
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
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
using test_util::slurp;
using test_util::TempDir;

namespace {

constexpr uint64_t MiB = 1 << 20;

// ---- against the real cgroup2 mount ------------------------------------------------------

class CgroupV2Mount : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups";
    auto mounts = parse_mountinfo(read_file("/proc/self/mountinfo"));
    if (!mounts.v2) GTEST_SKIP() << "no cgroup2 mount";
    parent_ = mounts.v2->mountpoint + "/sandboxrun-v2test-" + std::to_string(::getpid());
    ASSERT_EQ(::mkdir(parent_.c_str(), 0755), 0) << parent_;
    std::printf("[backend v2-dir] cgroup2 at %s, controllers: '%s'\n", mounts.v2->mountpoint.c_str(),
                test_util::slurp_value(mounts.v2->mountpoint + "/cgroup.controllers").c_str());
  }
  void TearDown() override {
    if (!parent_.empty()) ::rmdir(parent_.c_str());
  }
  std::string parent_;
};

pid_t clone_into(int cgroup_fd) {
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

TEST_F(CgroupV2Mount, CloneIntoCgroupKillAndRemove) {
  std::string name = run_dir_name("v2dir", self_owner());
  auto dir = std::make_unique<CgroupDir>(parent_, name, true);
  EXPECT_FALSE(dir->populated());

  auto ready = make_pipe();
  pid_t child = clone_into(dir->fd());
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    // A double-forked, session-leading grandchild that ignores SIGTERM: it escapes the
    // child's process tree, but not the cgroup.
    if (::fork() == 0) {
      ::setsid();
      ::signal(SIGTERM, SIG_IGN);
      pid_t middle = ::getpid();
      if (::fork() == 0) {
        // Report only once the middle process has exited (we were reparented): until then
        // it is still listed in the cgroup and the count below would race with its exit.
        while (::getppid() == middle) ::usleep(1000);
        (void)!::write(ready.write.get(), "g", 1);
        for (;;) ::pause();
      }
      ::_exit(0);
    }
    for (;;) ::pause();
  }
  ready.write.reset();
  char c;
  ASSERT_EQ(::read(ready.read.get(), &c, 1), 1);

  std::string in = read_file("/proc/" + std::to_string(child) + "/cgroup");
  auto v2_path = own_cgroup(in, "");
  ASSERT_TRUE(v2_path);
  EXPECT_EQ(v2_path->substr(v2_path->rfind('/') + 1), name) << "CLONE_INTO_CGROUP did not place the child";
  EXPECT_TRUE(dir->populated());
  EXPECT_EQ(dir->pids().size(), 2u);  // the child and the escaped grandchild

  ASSERT_TRUE(dir->cgroup_kill());
  EXPECT_TRUE(wait_empty({dir.get()}, kKillBudget)) << "cgroup.kill left processes";
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  EXPECT_FALSE(dir->populated());

  std::string path = dir->path();
  EXPECT_TRUE(dir->remove());
  struct stat sb;
  EXPECT_NE(::stat(path.c_str(), &sb), 0) << path << " still exists";
}

TEST_F(CgroupV2Mount, DestructorKillsWithoutCgroupKill) {
  // CgroupDir's own destructor (the safety net for half-built cgroup sets) uses the kill loop.
  auto dir = std::make_unique<CgroupDir>(parent_, run_dir_name("v2loop", self_owner()), true);
  pid_t child = clone_into(dir->fd());
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGTERM, SIG_IGN);
    for (;;) ::pause();
  }
  std::string path = dir->path();
  dir.reset();
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  struct stat sb;
  EXPECT_NE(::stat(path.c_str(), &sb), 0) << path << " still exists";
}

// ---- against a fake cgroup tree ------------------------------------------------------------

TEST(CgroupV2Fake, LimitFilesAreWritten) {
  std::printf("[backend v2] fake cgroup tree\n");
  TempDir t;
  for (const char* f : {"memory.max", "memory.swap.max", "pids.max", "cpu.max"}) put(t.path() / f, "max\n");
  UniqueFd fd(::open(t.path().c_str(), O_RDONLY | O_DIRECTORY));
  Limits l;
  l.memory_bytes = 256 * MiB;
  l.pids = 64;
  l.cpus = 0.5;
  std::vector<std::string> notes;
  apply_v2_limits(fd.get(), t.path(), l, notes);
  EXPECT_EQ(slurp(t.path() / "memory.max"), std::to_string(256 * MiB));
  EXPECT_EQ(slurp(t.path() / "memory.swap.max"), "0");
  EXPECT_EQ(slurp(t.path() / "pids.max"), "64");
  EXPECT_EQ(slurp(t.path() / "cpu.max"), "50000 100000");
  EXPECT_TRUE(notes.empty());

  l.cpus = 2;
  l.pids = 0;
  l.memory_bytes = 0;
  apply_v2_limits(fd.get(), t.path(), l, notes);
  EXPECT_EQ(slurp(t.path() / "cpu.max"), "200000 100000");
  EXPECT_EQ(slurp(t.path() / "pids.max"), "max");
  EXPECT_EQ(slurp(t.path() / "memory.max"), "max");
}

TEST(CgroupV2Fake, MissingOptionalFilesAreReportedAndRequiredOnesFail) {
  TempDir t;
  put(t.path() / "memory.max", "max\n");
  put(t.path() / "pids.max", "max\n");
  UniqueFd fd(::open(t.path().c_str(), O_RDONLY | O_DIRECTORY));
  std::vector<std::string> notes;
  Limits l;
  apply_v2_limits(fd.get(), t.path(), l, notes);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("swap"), std::string::npos);
  EXPECT_NE(notes[1].find("cpu"), std::string::npos);

  fs::remove(t.path() / "pids.max");
  EXPECT_THROW(apply_v2_limits(fd.get(), t.path(), l, notes), Error);
}

TEST(CgroupV2Fake, UsageIsRead) {
  TempDir t;
  put(t.path() / "memory.current", "1048576\n");
  put(t.path() / "memory.peak", "4194304\n");
  put(t.path() / "cpu.stat", "usage_usec 250000\nuser_usec 200000\nsystem_usec 50000\n");
  put(t.path() / "pids.current", "3\n");
  put(t.path() / "pids.peak", "9\n");
  put(t.path() / "memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n");
  put(t.path() / "pids.events", "max 5\n");
  UniqueFd fd(::open(t.path().c_str(), O_RDONLY | O_DIRECTORY));
  CgroupUsage u = read_v2_usage(fd.get());
  EXPECT_EQ(u.memory_current, 1048576u);
  EXPECT_EQ(u.memory_peak, 4194304u);
  EXPECT_EQ(u.cpu_usec, 250000u);
  EXPECT_EQ(u.pids_current, 3u);
  EXPECT_EQ(u.pids_peak, 9u);
  EXPECT_EQ(u.oom_kills, 1u);  // oom_kill, not oom or oom_group_kill
  EXPECT_EQ(u.pids_max_hits, 5u);
}

TEST(CgroupV2Fake, HalfBuiltCgroupIsRemovedWhenLimitsFail) {
  // A fake parent: mkdir gives a directory without interface files, so the limits fail.
  TempDir t;
  Plan plan;
  plan.version = "v2";
  plan.v2_mount = t.path();
  plan.v2_parent = t.path();
  plan.controllers = {"memory", "pids", "cpu"};
  EXPECT_THROW(make_v2_cgroup(plan, "run@1.2", Limits{}), Error);
  EXPECT_FALSE(fs::exists(t.path() / "run@1.2")) << "the failed cgroup was left behind";
}

TEST(CgroupV2Fake, ParentIsCreatedWithControllersEnabledOnTheWay) {
  TempDir t;
  put(t.path() / "cgroup.subtree_control", "cpu\n");  // the mount root: cpu already enabled
  Plan plan;
  plan.v2_mount = t.path();
  plan.v2_parent = (t.path() / "a").string();
  plan.controllers = {"memory", "pids", "cpu"};
  // The fake kernel: the new level's interface files appear when we mkdir it; emulate by
  // creating them first (mkdir then tolerates EEXIST).
  put(t.path() / "a" / "cgroup.subtree_control", "");
  prepare_v2_parent(plan);
  EXPECT_EQ(slurp(t.path() / "cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(slurp(t.path() / "a" / "cgroup.subtree_control"), "+memory +pids +cpu");
}

TEST(CgroupV2Fake, CpuQuotaMath) {
  EXPECT_EQ(v2_cpu_max(0.5), "50000 100000");
  EXPECT_EQ(v2_cpu_max(1.25), "125000 100000");
  EXPECT_EQ(v2_cpu_max(0.001), "1000 100000");  // the kernel's minimum
  EXPECT_EQ(v2_cpu_max(0), "max 100000");
  EXPECT_EQ(cpu_quota_us(-1), -1);
}

}  // namespace
