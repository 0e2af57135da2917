// CloneIntoCgroup: a run's first process starts inside the run's cgroup with no migration, and
// only the launching thread passes through the run's cgroup, briefly. Real cgroups (root).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "../../src/cgroup/cgroup_impl.hpp"
#include "../../src/cgroup/paused_child.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"

using namespace sandboxrun;
using namespace sandboxrun::cgroup_detail;

namespace {

std::string thread_cgroups() { return read_file("/proc/thread-self/cgroup"); }

std::string leaf(const std::string& path) { return path.substr(path.rfind('/') + 1); }

void reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

class CloneIntoCgroupLive : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups";
    plan_ = plan_host_cgroups(settings_);
    if (plan_.version == "none") GTEST_SKIP() << "no usable cgroups: " << plan_.detail;
  }
  std::unique_ptr<Cgroup> make(const char* tag) {
    return create_cgroup(std::string(tag) + "-" + std::to_string(::getpid()), Limits{}, settings_);
  }
  // The v1 controllers whose hierarchies the run uses (the freezer only without cgroup.kill),
  // which the launching thread passes through.
  std::vector<std::string> v1_controllers(const Cgroup& cg) const {
    std::vector<std::string> out;
    struct stat st {};
    for (const auto& [ctrl, parent] : plan_.v1_parents)
      if (::stat((parent + "/" + leaf(cg.path())).c_str(), &st) == 0) out.push_back(ctrl);
    return out;
  }
  CgroupSettings settings_;
  Plan plan_;
};

TEST_F(CloneIntoCgroupLive, ChildStartsInsideAndOnlyTheLaunchingThreadPassesThrough) {
  auto cg = make("clone-into");
  ASSERT_TRUE(cg);
  const std::string name = leaf(cg->path());
  const std::string main_thread = "/proc/self/task/" + std::to_string(::getpid()) + "/cgroup";
  const std::string main_before = read_file(main_thread);
  pid_t child = -1;
  std::string before, inside, after, main_inside;
  // A thread of its own plays the launcher, so the test's main thread is a bystander.
  std::thread launcher([&] {
    before = thread_cgroups();
    {
      CloneIntoCgroup into(cg.get());
      inside = thread_cgroups();
      main_inside = read_file(main_thread);
      child = clone_paused(into);
    }
    after = thread_cgroups();
  });
  launcher.join();
  ASSERT_GT(child, 0) << "clone3 failed";
  const std::string child_cgroups = read_file("/proc/" + std::to_string(child) + "/cgroup");
  EXPECT_EQ(after, before) << "the launching thread must go back where it was";
  EXPECT_EQ(main_inside, main_before) << "other threads of the launcher must never move";
  if (cg->backend() == "v1") {
    for (const auto& ctrl : v1_controllers(*cg)) {
      EXPECT_EQ(leaf(own_cgroup(inside, ctrl).value_or("")), name) << ctrl << " while cloning:\n" << inside;
      EXPECT_EQ(leaf(own_cgroup(child_cgroups, ctrl).value_or("")), name) << ctrl << ":\n" << child_cgroups;
    }
    if (cg->clone_into_fd() >= 0) {  // hybrid: the cgroup2 twin, through CLONE_INTO_CGROUP
      EXPECT_EQ(leaf(own_cgroup(child_cgroups, "").value_or("")), name) << child_cgroups;
    }
  } else {
    EXPECT_EQ(inside, before) << "v2: CLONE_INTO_CGROUP alone places the child";
    EXPECT_EQ(leaf(own_cgroup(child_cgroups, "").value_or("")), name) << child_cgroups;
  }
  EXPECT_EQ(cg->sample().pids_current, 1u) << "only the child counts once the launcher has left";
  reap(child);
}

// If the launching thread's own cgroup was removed while it was away, it lands in the run's
// parent cgroup (ours), never staying inside the run's cgroup, which is killed with the run.
TEST_F(CloneIntoCgroupLive, LeaveFallsBackToTheRunParentWhenTheOriginIsGone) {
  if (plan_.version != "v1") GTEST_SKIP() << "v1 only: on v2 (" << plan_.detail << ") the thread never moves";
  auto cg = make("clone-into-gone");
  ASSERT_TRUE(cg);
  std::string error, after;
  std::thread launcher([&] {
    const std::string home = thread_cgroups();
    const std::string origin_name = "origin-" + std::to_string(::getpid());
    try {
      for (const auto& ctrl : v1_controllers(*cg)) {
        const std::string origin = plan_.v1_parents.at(ctrl) + "/" + origin_name;
        if (::mkdir(origin.c_str(), 0755) != 0) throw_errno("mkdir " + origin);
        write_file(origin + "/tasks", "0");
      }
      {
        CloneIntoCgroup into(cg.get());
        for (const auto& ctrl : v1_controllers(*cg)) {
          const std::string origin = plan_.v1_parents.at(ctrl) + "/" + origin_name;
          if (::rmdir(origin.c_str()) != 0) throw_errno("rmdir " + origin);
        }
      }
      after = thread_cgroups();
      // Home again, to where the thread started.
      for (const auto& ctrl : v1_controllers(*cg)) {
        auto mount = plan_.v1_mounts.at(ctrl);
        write_file(dir_of(mount, own_cgroup(home, ctrl).value()).value() + "/tasks", "0");
      }
    } catch (const Error& e) {
      error = e.describe();
    }
  });
  launcher.join();
  // A failure part-way may leave an origin behind (empty: nobody is in it); never a test's litter.
  for (const auto& ctrl : v1_controllers(*cg))
    ::rmdir((plan_.v1_parents.at(ctrl) + "/origin-" + std::to_string(::getpid())).c_str());
  ASSERT_EQ(error, "");
  for (const auto& ctrl : v1_controllers(*cg)) {
    const Mount& m = plan_.v1_mounts.at(ctrl);
    EXPECT_EQ(dir_of(m, own_cgroup(after, ctrl).value_or("?")).value_or("?"), plan_.v1_parents.at(ctrl)) << ctrl << ":\n"
                                                                                                   << after;
  }
}

}  // namespace
