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
using sandboxrun::testing::eventually;
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
  // A run, once the sandbox for its level is ready when one is on its way (on a loaded machine
  // preparing one takes longer than any fixed wait).
  RunResult run_prepared(RunRequest req) {
    ex->wait_warm(req.trust.value_or(ex->config().default_trust), std::chrono::seconds(60));
    return ex->run(req);
  }
  // Processes of this test that are its children, once the count settles at `want` (a finished
  // run's pid 1 goes on the pool's thread, after the next sandbox is prepared), or after 30 s.
  static size_t children_settled_at(size_t want) {
    eventually([&] { return children_of_this_process() == want; });
    return children_of_this_process();
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
  EXPECT_EQ(r.outcome.timings.cgroup.count(), 0) << "its cgroup was made before the run, not on its path";
  EXPECT_GT(r.outcome.timings.spawn.count(), 0);
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

// wait_warm: true once the level's sandbox is ready; false without waiting out its timeout when
// none is on its way (another level's is prepared, or the Executor keeps none).
TEST_F(Warm, WaitWarmSaysWhenTheLevelsSandboxIsReady) {
  // Each wait ends when its answer is known: well inside its minute, however slow the machine.
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(ex->wait_warm(Trust::untrusted, std::chrono::seconds(60))) << "the default level's after open";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << "the sandbox's readiness went unsaid";
  started = std::chrono::steady_clock::now();
  EXPECT_FALSE(ex->wait_warm(Trust::trusted, std::chrono::seconds(60)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << "it waited for a sandbox never wanted";
  RunRequest trusted;
  trusted.code = "print(1)\n";
  trusted.trust = Trust::trusted;
  EXPECT_FALSE(ex->run(trusted).outcome.prepared);
  EXPECT_TRUE(ex->wait_warm(Trust::trusted, std::chrono::seconds(60))) << "the last run's level is prepared next";
  EXPECT_TRUE(ex->run(trusted).outcome.prepared);
  Executor cold = Executor::open({.config = write_config(d), .audit_log = log});
  EXPECT_FALSE(cold.wait_warm(Trust::untrusted, std::chrono::seconds(60)));
}

// The MCP server asks for outputs on every run: every sandbox set up ahead passes /work back, so
// such a run fits one, and its files come out as in any run.
TEST_F(Warm, ARunWithAnOutputDirectoryRunsInAPreparedSandbox) {
  RunRequest req;
  req.code = "open('/work/result.txt', 'w').write('forty-two')\nopen('/work/more.csv', 'w').write('a,b\\n')\n";
  req.output_dir = d.path() + "/out";
  RunResult r = run_prepared(req);
  EXPECT_TRUE(r.outcome.prepared) << "a run with an output directory did not use the sandbox set up ahead";
  ASSERT_EQ(r.status, RunStatus::exited) << r.error << r.outcome.stderr_data;
  ASSERT_TRUE(r.outputs.has_value());
  EXPECT_EQ(r.outputs->files.size(), 2u) << r.outputs->error;
  EXPECT_EQ(read_file(d.path() + "/out/result.txt"), "forty-two");
  // A run without one in the next sandbox (which also passes /work): nothing is copied anywhere.
  RunRequest plain;
  plain.code = "open('/work/x', 'w').write('x')\nprint('ok')\n";
  RunResult p = run_prepared(plain);
  EXPECT_TRUE(p.outcome.prepared);
  EXPECT_EQ(p.outcome.stdout_data, "ok\n") << p.error;
  EXPECT_FALSE(p.outputs.has_value());
}

TEST_F(Warm, RunsThatDoNotFitGoTheUsualWay) {
  RunRequest limited;
  limited.code = "print('limited')\n";
  limited.limits.timeout_s = 5;  // a limit of its own: another sandbox than the one prepared
  RunResult r = run_prepared(limited);
  EXPECT_FALSE(r.outcome.prepared);
  EXPECT_GT(r.outcome.timings.cgroup.count(), 0) << "a run's own cgroup is timed";
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
  req.code = "import time\nprint('started', flush=True)\ntime.sleep(3)\n";
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
  EXPECT_EQ(children_settled_at(1), 1u) << "one pid 1 waits for the next run";
  ex.reset();
  EXPECT_EQ(children_of_this_process(), 0u);
  EXPECT_EQ(cgroups_named("@" + std::to_string(::getpid()) + "."), 0u) << "a prepared sandbox's cgroup outlived the Executor";
}

// A run returns once its result is in; its pid 1 and cgroup go soon after on the pool's thread,
// without waiting for the Executor's end. The same for a run that did not fit.
TEST_F(Warm, ARunsRemainsGoOnThePoolsThread) {
  auto gone = [](const std::string& run_id) { return eventually([&] { return cgroups_named(run_id) == 0; }); };
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
  EXPECT_EQ(children_settled_at(1), 1u) << "only the next run's pid 1 may be left";
}

// Runs from several threads share one prepared sandbox at a time: each is taken once, every run
// is its own, and nothing stays behind.
TEST_F(Warm, ManyThreadsTakeEachPreparedSandboxOnce) {
  constexpr int kThreads = 4, kRuns = 10;
  std::atomic<int> ok{0}, prepared{0};
  std::vector<std::string> ids[kThreads];
  std::vector<std::thread> threads;
  ASSERT_TRUE(ex->wait_warm(Trust::untrusted, std::chrono::seconds(60))) << "no sandbox was set up ahead";
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
