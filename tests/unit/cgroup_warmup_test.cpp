// MigrationWarmup: on a host with cgroup v1 hierarchies it keeps re-writing the launcher's own
// pid into the cgroup it is already in (so membership never changes), and stops on request.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "../../src/cgroup/cgroup_impl.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/fd.hpp"

using namespace sandboxrun;
using namespace sandboxrun::cgroup_detail;

namespace {

bool host_has_v1_pids_or_memory() {
  auto mounts = parse_mountinfo(read_file("/proc/self/mountinfo"));
  return mounts.v1.count("pids") || mounts.v1.count("memory") || mounts.v1.count("cpu");
}

}  // namespace

TEST(MigrationWarmup, RewritesOwnCgroupUntilStoppedAndChangesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to write cgroup.procs";
  if (!host_has_v1_pids_or_memory()) {
    // Pure cgroup v2: runs are placed by CLONE_INTO_CGROUP and the warm-up has nothing to do.
    MigrationWarmup w;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    w.stop();
    EXPECT_EQ(w.writes(), 0u);
    GTEST_SKIP() << "host has no cgroup v1 pids/memory/cpu hierarchy (checked the v2 no-op only)";
  }
  const std::string before = read_file("/proc/self/cgroup");
  MigrationWarmup w;
  // The first write waits a grace period; later ones follow every few ms.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (w.writes() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GE(w.writes(), 3u) << "the warm-up must keep re-arming until stopped";
  w.stop();
  const unsigned at_stop = w.writes();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(w.writes(), at_stop) << "no writes after stop()";
  w.stop();  // idempotent
  EXPECT_EQ(read_file("/proc/self/cgroup"), before) << "the warm-up must not move the launcher";
}
