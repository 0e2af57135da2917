// ExecutorOptions::warm: runs that fit go to a sandbox set up ahead and behave as any other run
// (output, argv, environment, exit status, audit records in order, the payload held until its
// records are written); runs that do not fit go the usual way; nothing is left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <filesystem>
#include <thread>

#include "harness.hpp"
#include "sandboxrun/executor.hpp"

using sandboxrun::testing::cgroups_named;
using sandboxrun::testing::children_of_this_process;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace sandboxrun {
namespace {

std::vector<std::string> events_of(const std::string& log, const std::string& run_id) {
  std::vector<std::string> events;
  for (const auto& j : sandboxrun::testing::audit_records(log))
    if (j.value("run_id", "") == run_id) events.push_back(j.value("event", ""));
  return events;
}

struct Warm : ::testing::Test {
  TempDir d;
  std::string log = d.path() + "/audit.log";
  std::optional<Executor> ex;
  void SetUp() override { ex.emplace(Executor::open({.config = write_config(d), .audit_log = log, .warm = true})); }
  // A run that fits, after the sandbox for it has had time to be prepared.
  RunResult run_prepared(RunRequest req) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return ex->run(req);
  }
};

TEST_F(Warm, ARunThatFitsRunsInAPreparedSandboxAndBehavesTheSame) {
  RunRequest req;
  req.code = "import os, sys\nprint(sys.argv[1:], os.environ.get('GREETING'), os.getcwd())\nsys.exit(3)\n";
  req.name = "hello.py";
  req.args = {"a", "b c"};
  req.env = {{"GREETING", "hi"}};
  req.trust = Trust::untrusted;
  RunResult r = run_prepared(req);
  EXPECT_TRUE(r.outcome.prepared) << "the run did not use the sandbox set up ahead";
  EXPECT_EQ(r.status, RunStatus::exited) << r.error << r.outcome.stderr_data;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.outcome.stdout_data, "['a', 'b c'] hi /work\n");
  EXPECT_EQ(events_of(log, r.run_id), (std::vector<std::string>{"assessment", "run_start", "run_end"}));
  // The script is in place, read-only, as in any run; the next run gets a sandbox of its own.
  req.code = "import os\nprint(oct(os.stat('/work/hello.py').st_mode & 0o777), os.path.exists('/run/sandbox/hello.py'))\n"
             "open('/work/hello.py', 'a')\n";
  RunResult again = run_prepared(req);
  EXPECT_TRUE(again.outcome.prepared);
  EXPECT_NE(again.run_id, r.run_id);
  EXPECT_EQ(again.outcome.stdout_data.substr(0, 11), "0o444 True\n") << again.outcome.stderr_data;
  EXPECT_NE(again.outcome.stderr_data.find("PermissionError"), std::string::npos) << again.outcome.stderr_data;
}

TEST_F(Warm, RunsThatDoNotFitGoTheUsualWay) {
  RunRequest limited;
  limited.code = "print('limited')\n";
  limited.limits.timeout_s = 5;  // a limit of its own: another sandbox than the one prepared
  RunResult r = run_prepared(limited);
  EXPECT_FALSE(r.outcome.prepared);
  EXPECT_EQ(r.outcome.stdout_data, "limited\n") << r.error;
  RunRequest other;
  other.code = "print('trusted')\n";
  other.trust = Trust::trusted;  // prepared: the default level, untrusted
  RunResult t = run_prepared(other);
  EXPECT_FALSE(t.outcome.prepared);
  EXPECT_EQ(t.outcome.stdout_data, "trusted\n") << t.error;
  RunResult t2 = run_prepared(other);  // the next one is prepared for the level last run
  EXPECT_TRUE(t2.outcome.prepared);
  EXPECT_EQ(t2.outcome.stdout_data, "trusted\n") << t2.error;
}

// As without a prepared sandbox (executor_test's ThePayloadStartsOnlyAfterItsRecordsAndCodeAreWritten).
TEST_F(Warm, ThePayloadStartsOnlyAfterItsRecordsAreWritten) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  RunRequest req;
  req.code = "import time\nprint('started', flush=True)\ntime.sleep(1)\n";
  req.capture = false;
  req.stdout_fd = wr.get();
  std::vector<std::string> seen;
  std::string run_id;
  std::thread reader([&] {
    char buf[16] = {};
    if (::read(rd.get(), buf, sizeof buf) <= 0) return;
    for (const auto& j : sandboxrun::testing::audit_records(log))
      if (j.value("event", "") == "run_start") run_id = j.value("run_id", "");
    seen = events_of(log, run_id);
  });
  RunResult r = run_prepared(req);
  wr.reset();
  reader.join();
  EXPECT_TRUE(r.outcome.prepared);
  EXPECT_EQ(run_id, r.run_id);
  EXPECT_EQ(seen, (std::vector<std::string>{"assessment", "run_start"})) << "records missing when the program started";
}

TEST_F(Warm, ABlockedRunAndTheExecutorsEndLeaveNothing) {
  RunRequest blocked;
  blocked.code = "import os\nos.system('rm -rf / --no-preserve-root')\n";
  RunResult b = run_prepared(blocked);
  EXPECT_EQ(b.status, RunStatus::blocked);
  EXPECT_EQ(cgroups_named(b.run_id), 0u) << "the sandbox prepared for it was not discarded";
  RunRequest ok;
  ok.code = "print(1)\n";
  RunResult r = run_prepared(ok);
  EXPECT_EQ(r.outcome.stdout_data, "1\n") << r.error;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(children_of_this_process(), 1u) << "one pid 1 waits for the next run";
  ex.reset();
  EXPECT_EQ(children_of_this_process(), 0u);
  EXPECT_EQ(cgroups_named("@" + std::to_string(::getpid()) + "."), 0u) << "a prepared sandbox's cgroup outlived the Executor";
}

// A run returns once its result is in; its pid 1 and cgroup go soon after on the pool's thread,
// without waiting for the Executor's end. The same for a run that did not fit.
TEST_F(Warm, ARunsRemainsGoOnThePoolsThread) {
  auto gone = [](const std::string& run_id) {
    for (int i = 0; i < 100 && cgroups_named(run_id) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return cgroups_named(run_id) == 0;
  };
  RunRequest req;
  req.code = "print('x')\n";
  RunResult r = run_prepared(req);
  EXPECT_TRUE(r.outcome.prepared);
  EXPECT_EQ(r.outcome.stdout_data, "x\n") << r.error;
  EXPECT_TRUE(gone(r.run_id)) << "the run's cgroup outlived it";
  RunRequest cold = req;
  cold.limits.timeout_s = 5;
  RunResult c = ex->run(cold);
  EXPECT_FALSE(c.outcome.prepared);
  EXPECT_EQ(c.outcome.stdout_data, "x\n") << c.error;
  EXPECT_TRUE(gone(c.run_id)) << "the run's cgroup outlived it";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(children_of_this_process(), 1u) << "only the next run's pid 1 may be left";
}

// Runs from several threads share one prepared sandbox at a time: each is taken once, every run
// is its own, and nothing stays behind.
TEST_F(Warm, ManyThreadsTakeEachPreparedSandboxOnce) {
  constexpr int kThreads = 4, kRuns = 10;
  std::atomic<int> ok{0}, prepared{0};
  std::vector<std::string> ids[kThreads];
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        RunRequest req;
        req.code = "import sys\nprint(int(sys.argv[1]) ** 2)\n";
        req.args = {std::to_string(t * 100 + i)};
        RunResult r = ex->run(req);
        ids[t].push_back(r.run_id);
        prepared += r.outcome.prepared;
        if (r.outcome.stdout_data == std::to_string((t * 100 + i) * (t * 100 + i)) + "\n") ++ok;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads * kRuns);
  EXPECT_GT(prepared.load(), 0);
  std::set<std::string> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), static_cast<size_t>(kThreads * kRuns));
  ex.reset();
  EXPECT_EQ(children_of_this_process(), 0u);
  EXPECT_EQ(cgroups_named("@" + std::to_string(::getpid()) + "."), 0u);
}

}  // namespace
}  // namespace sandboxrun
