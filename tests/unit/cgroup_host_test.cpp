// CgroupHost: the host's side of run cgroups worked out once (probe, parents, sweep), as the
// Executor keeps it. Real cgroups (root needed); each test prints the backend it exercised.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "../../src/cgroup/cgroup_impl.hpp"
#include "cgroup_test_util.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "test_util.hpp"

using namespace sandboxrun;

namespace {

class CgroupHostLive : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups";
    // A parent of our own, so that no other launcher on this host sweeps or removes it.
    settings_.parent = "sandboxrun-test-host-" + std::to_string(::getpid());
    auto support = probe_cgroups(settings_);
    if (support.version == "none") GTEST_SKIP() << "no usable cgroups: " << support.detail;
  }
  void TearDown() override {
    for (const auto& p : parents_) ::rmdir(p.c_str());
  }
  // Remembers the parents of a run's directories, to remove them at the end.
  void note_parents(const Cgroup& cg) {
    for (const auto& p : cgtest::split_paths(cg.path())) parents_.push_back(p.substr(0, p.rfind('/')));
  }
  CgroupSettings settings_;
  std::vector<std::string> parents_;
};

TEST_F(CgroupHostLive, RunsGetTheirLimitsAndAreRemoved) {
  const CgroupHost host(settings_);
  EXPECT_EQ(host.settings(), settings_);
  Limits l;
  l.pids = 23;
  for (int i = 0; i < 3; ++i) {
    auto cg = host.create(cgtest::unique_id("host"), l);
    ASSERT_TRUE(cg);
    std::printf("[backend %s] %s\n", cg->backend().c_str(), cg->path().c_str());
    note_parents(*cg);
    const std::string pids = cgtest::dir_with(cg->path(), "pids.max");
    ASSERT_FALSE(pids.empty()) << "no pids.max in " << cg->path();
    EXPECT_EQ(test_util::slurp_value(pids + "/pids.max"), "23") << pids;
    const auto paths = cgtest::split_paths(cg->path());
    cg.reset();
    for (const auto& p : paths) EXPECT_FALSE(cgtest::exists(p)) << p << " survived its run";
  }
}

// The sweep happens when the host is made, before any run: a launcher killed with SIGKILL
// left a run cgroup behind, and a service starting later removes it.
TEST_F(CgroupHostLive, StaleRunsOfDeadLaunchersAreSweptWhenTheHostIsMade) {
  auto report = make_pipe();
  pid_t launcher = ::fork();
  if (launcher == 0) {
    report.read.reset();
    auto cg = create_cgroup(cgtest::unique_id("stale"), Limits{}, settings_);
    (void)!::write(report.write.get(), cg->path().data(), cg->path().size());
    ::raise(SIGKILL);  // no destructor runs
  }
  report.write.reset();
  const std::string msg = read_fd(report.read.get(), 1 << 20, "the killed launcher's report");
  ::waitpid(launcher, nullptr, 0);
  const auto stale = cgtest::split_paths(msg);
  ASSERT_FALSE(stale.empty());
  for (const auto& p : stale) {
    ASSERT_TRUE(cgtest::exists(p)) << p;
    parents_.push_back(p.substr(0, p.rfind('/')));
  }
  const CgroupHost host(settings_);
  for (const auto& p : stale) EXPECT_FALSE(cgtest::exists(p)) << p << " was not swept when the host was made";
  for (const auto& p : stale) ::rmdir(p.c_str());
}

// A long-lived host whose parent directories were removed under it (by an administrator,
// another tool) makes them again instead of failing every later run.
TEST_F(CgroupHostLive, AParentRemovedUnderTheHostIsMadeAgain) {
  const CgroupHost host(settings_);
  auto first = host.create(cgtest::unique_id("before"), Limits{});
  ASSERT_TRUE(first);
  note_parents(*first);
  first.reset();
  for (const auto& p : parents_) ASSERT_EQ(::rmdir(p.c_str()), 0) << p << ": " << std::strerror(errno);
  std::unique_ptr<Cgroup> again;
  ASSERT_NO_THROW(again = host.create(cgtest::unique_id("after"), Limits{}));
  ASSERT_TRUE(again);
  std::printf("[backend %s] %s\n", again->backend().c_str(), again->path().c_str());
  for (const auto& p : cgtest::split_paths(again->path())) EXPECT_TRUE(cgtest::exists(p)) << p;
}

TEST_F(CgroupHostLive, RefusesBadRunIdsAndTheSameIdTwice) {
  const CgroupHost host(settings_);
  for (const char* bad : {"", "..", "a/b", "a@1.2"}) EXPECT_THROW(host.create(bad, Limits{}), Error) << bad;
  const std::string id = cgtest::unique_id("dup");
  auto a = host.create(id, Limits{});
  ASSERT_TRUE(a);
  note_parents(*a);
  EXPECT_THROW(host.create(id, Limits{}), Error);
  EXPECT_TRUE(cgtest::exists(cgtest::split_paths(a->path()).front())) << "the failed twin removed ours";
}

}  // namespace
