// The library API as a service uses it: one Executor, many runs, from many threads at once.
#include <fcntl.h>
#include <poll.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <fstream>
#include <set>
#include <thread>

#include "harness.hpp"
#include "sandboxrun/executor.hpp"
#include "sandboxrun/seccomp.hpp"

using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;
using sandboxrun::testing::cgroups_named;
using sandboxrun::testing::children_of_this_process;
using sandboxrun::testing::processes_in_cgroups_named;

namespace sandboxrun {
namespace {

TEST(Executor, RunsAndReportsTypedResults) {
  TempDir d;
  Executor ex = Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log"});
  RunRequest req;
  req.code = "import sys\nprint(sys.argv[1:]); sys.exit(4)\n";
  req.args = {"a", "b"};
  req.trust = Trust::trusted;
  RunResult r = ex.run(req);
  EXPECT_EQ(r.status, RunStatus::exited) << r.error;
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.outcome.stdout_data, "['a', 'b']\n");
  EXPECT_EQ(r.decision.requested, Trust::trusted);
  ASSERT_TRUE(r.decision.used);
  EXPECT_EQ(*r.decision.used, Trust::trusted);
  ASSERT_TRUE(r.spec);
  EXPECT_EQ(r.spec->trust, Trust::trusted);
  ASSERT_TRUE(r.audit_seq);

  // A blocked file is a status, with nothing launched and the block audited.
  RunRequest bad;
  bad.code = "import os\nos.system('rm -rf --no-preserve-root /')\n";
  RunResult b = ex.run(bad);
  EXPECT_EQ(b.status, RunStatus::blocked);
  EXPECT_EQ(b.exit_code, exit_code::blocked);
  EXPECT_TRUE(b.decision.refused());
  EXPECT_FALSE(b.spec);
  EXPECT_EQ(b.to_json()["status"], "blocked");
  // With a reason it runs, as untrusted, and the override is recorded.
  bad.code = "import os\nif False: os.system('rm -rf --no-preserve-root /')\nprint('ran')\n";
  bad.override_reason = "reviewed by the on-call engineer";
  RunResult o = ex.run(bad);
  EXPECT_EQ(o.status, RunStatus::exited) << o.error;
  EXPECT_TRUE(o.decision.overridden);
  EXPECT_EQ(o.outcome.stdout_data, "ran\n");
  std::string log = sandboxrun::testing::read_text(d.path() + "/audit.log");
  EXPECT_NE(log.find("\"event\":\"blocked\""), std::string::npos);
  EXPECT_NE(log.find("reviewed by the on-call engineer"), std::string::npos);

  // A setup failure is a result too, audited, and the executor stays usable.
  RunRequest noimg;
  noimg.code = "print(1)\n";
  noimg.image = "no-such-image-here";
  RunResult e = ex.run(noimg);
  EXPECT_EQ(e.status, RunStatus::error);
  EXPECT_EQ(e.exit_code, exit_code::setup_failed);
  EXPECT_NE(e.error.find("no-such-image-here"), std::string::npos) << e.error;
  EXPECT_EQ(ex.run(req).exit_code, 4);
}

// single_run (the CLI): the result comes back while pid 1 finishes exiting; its remains (pid 1,
// the cgroup) go with the Executor, which the caller drops once it has reported the result.
// A service tells failures apart by kind, not by their text.
TEST(Executor, FailuresCarryTheirKind) {
  TempDir d;
  Executor ex = Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log"});
  RunRequest req;
  req.code = "print(1)\n";
  req.image = "no-such-image";
  RunResult r = ex.run(req);
  EXPECT_EQ(r.status, RunStatus::error);
  EXPECT_EQ(r.error_kind, ErrorKind::image) << r.error;
  EXPECT_EQ(r.to_json().value("error_kind", ""), "image");
  req.image.reset();
  req.inputs = {{"../escape.csv", "x", 0644}};
  r = ex.run(req);
  EXPECT_EQ(r.error_kind, ErrorKind::usage) << r.error;
  req.inputs.clear();
  req.labels = {{"bad key!", "v"}};
  r = ex.run(req);
  EXPECT_EQ(r.error_kind, ErrorKind::usage) << r.error;
  // A configuration that cannot be read is a config error before any run.
  const std::string bad = d.write("dup.yaml", "timeout: 5\ntimeout: 6\n");
  try {
    Executor::open({.config = bad, .audit_log = d.path() + "/audit.log"});
    ADD_FAILURE() << "opened a sandbox.yaml with a key given twice";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config) << e.describe();
  }
  // A run that succeeds has no error and no kind in its JSON.
  req.labels.clear();
  r = ex.run(req);
  EXPECT_EQ(r.status, RunStatus::exited) << r.error;
  EXPECT_FALSE(r.to_json().contains("error_kind"));
}

TEST(Executor, ASingleRunsRemainsGoWithTheExecutor) {
  TempDir d;
  std::optional<Executor> ex;
  ex.emplace(Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log", .single_run = true}));
  RunRequest req;
  req.code = "print('once')\n";
  RunResult r = ex->run(req);
  EXPECT_EQ(r.outcome.stdout_data, "once\n") << r.error;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(children_of_this_process(), 1u) << "pid 1 was reaped before the Executor went";
  EXPECT_GT(cgroups_named(r.run_id), 0u) << "the cgroup went before the Executor";
  ex.reset();
  EXPECT_EQ(children_of_this_process(), 0u);
  EXPECT_EQ(cgroups_named(r.run_id), 0u);
}

// The events of one run in the audit log, in order.
std::vector<std::string> events_of(const std::string& log, const std::string& run_id) {
  std::vector<std::string> events;
  for (const auto& j : sandboxrun::testing::audit_records(log))
    if (j.value("run_id", "") == run_id) events.push_back(j.value("event", ""));
  return events;
}

// The records before the payload (assessment, override, run_start) and the code object are
// written while the sandbox sets itself up; they must all be in the log before the program's
// first line runs. The program says it started on a pipe, then waits while the log is read.
TEST(Executor, ThePayloadStartsOnlyAfterItsRecordsAndCodeAreWritten) {
  TempDir d;
  const std::string log = d.path() + "/audit.log";
  Executor ex = Executor::open({.config = write_config(d), .audit_log = log});
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  RunRequest req;
  req.code = "import sys, time\nprint('started', flush=True)\ntime.sleep(3)\n";
  req.trust = Trust::untrusted;
  req.capture = false;
  req.stdout_fd = wr.get();
  req.run_id = new_run_id();
  std::vector<std::string> seen;
  bool object_there = false;
  std::thread reader([&] {
    char buf[16] = {};
    if (::read(rd.get(), buf, sizeof buf) <= 0) return;
    seen = events_of(log, *req.run_id);
    std::error_code ec;  // no objects directory yet: nothing stored
    for (const auto& e : std::filesystem::directory_iterator(d.path() + "/objects", ec))
      if (sandboxrun::testing::read_text(e.path().string()) == req.code) object_there = true;
  });
  RunResult r = ex.run(req);
  wr.reset();
  reader.join();
  EXPECT_EQ(r.status, RunStatus::exited) << r.error;
  EXPECT_EQ(seen, (std::vector<std::string>{"assessment", "run_start"})) << "records missing when the program started";
  EXPECT_TRUE(object_there) << "the code object was not stored when the program started";
  EXPECT_EQ(events_of(log, *req.run_id), (std::vector<std::string>{"assessment", "run_start", "run_end"}));
}

// A launch that fails before the program starts still leaves its records, in order.
TEST(Executor, ALaunchThatFailsEarlyKeepsTheRecordsInOrder) {
  TempDir d;
  const std::string log = d.path() + "/audit.log";
  Executor ex = Executor::open({.config = write_config(d), .audit_log = log});
  const std::string image = d.path() + "/no-python";
  for (const char* dir : {"proc", "dev", "tmp", "run", "work", "usr/bin"})
    std::filesystem::create_directories(image + "/" + dir);
  RunRequest req;
  req.code = "print(1)\n";
  req.trust = Trust::untrusted;
  req.image = image;
  req.run_id = new_run_id();
  RunResult r = ex.run(req);
  EXPECT_EQ(r.status, RunStatus::error);
  EXPECT_NE(r.error.find("interpreter"), std::string::npos) << r.error;
  EXPECT_EQ(events_of(log, *req.run_id), (std::vector<std::string>{"assessment", "run_start", "run_end"}));
}

// A service calls run() from many threads at once; every result must be its own, and nothing
// may be left behind. Each pid 1 is cloned from a process whose other threads hold glibc locks
// at random moments, so anything between clone() and execve() that takes one would hang here.
TEST(Executor, EightThreadsTimesTwentyFiveRuns) {
  TempDir d;
  Executor ex = Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log"});
  const auto mounts_before = sandboxrun::testing::mounts_of_interest();
  constexpr int kThreads = 8, kRuns = 25;
  std::atomic<int> ok{0};
  std::vector<std::vector<std::string>> ids(kThreads);
  std::vector<std::string> failures(kThreads);
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        RunRequest req;
        const int n = t * 1000 + i;
        req.code = "import sys, threading\nn = int(sys.argv[1])\nth = threading.Thread(target=print, args=(n * n,))\n"
                   "th.start(); th.join()\n";
        req.args = {std::to_string(n)};
        req.trust = Trust::trusted;
        RunResult r = ex.run(req);
        ids[t].push_back(r.run_id);
        if (r.status == RunStatus::exited && r.exit_code == 0 && r.outcome.stdout_data == std::to_string(n * n) + "\n")
          ++ok;
        else if (failures[t].empty())
          failures[t] = "run " + std::to_string(n) + ": " + r.to_json().dump();
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::cout << "[ figures  ] " << kThreads << " threads x " << kRuns << " runs: " << ok.load() << " correct in "
            << ms.count() << " ms (" << ms.count() / (kThreads * kRuns) << " ms per run)\n";
  for (const auto& f : failures) EXPECT_TRUE(f.empty()) << f;
  EXPECT_EQ(ok.load(), kThreads * kRuns);
  std::set<std::string> unique;
  for (const auto& v : ids)
    for (const auto& id : v) {
      unique.insert(id);
      EXPECT_EQ(cgroups_named(id), 0u) << "cgroup of run " << id << " survived";
    }
  EXPECT_EQ(unique.size(), static_cast<size_t>(kThreads * kRuns));
  EXPECT_EQ(sandboxrun::testing::mounts_of_interest(), mounts_before);
  EXPECT_EQ(children_of_this_process(), 0u);
  // Every run is in the chain once, and the chain verifies.
  std::string log = sandboxrun::testing::read_text(d.path() + "/audit.log");
  size_t run_ends = 0;
  for (size_t p = 0; (p = log.find("\"event\":\"run_end\"", p)) != std::string::npos; ++p) ++run_ends;
  EXPECT_EQ(run_ends, static_cast<size_t>(kThreads * kRuns));
  auto v = sandboxrun::testing::run_binary({"audit", "verify", "--log", d.path() + "/audit.log"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

}  // namespace
}  // namespace sandboxrun

namespace sandboxrun {
namespace {

// The launcher's hold on the payload: pid 1 may set itself up while before_exec runs (the
// Executor makes run_start durable there), but the payload starts only after it returned, and
// never if it threw. CLOCK_MONOTONIC is the same inside the sandbox (no time namespace).
struct HeldLaunch : ::testing::Test {
  void SetUp() override {
    program = compile_seccomp_profile(sandboxrun::testing::source_dir() + "/policies/default.json", {});
    req.spec.rootfs = sandboxrun::testing::source_dir() + "/rootfs/default";
    req.spec.limits.timeout_s = 20;
    req.spec.env = {{"PATH", "/usr/bin:/bin"}};
    req.seccomp = &program;
    req.run_id = new_run_id();
    req.script_name = "clock.py";
    req.script = "import time\nprint(time.monotonic_ns())\n";
    req.capture = true;
  }
  SeccompProgram program;
  LaunchRequest req;
};

TEST_F(HeldLaunch, ThePayloadStartsOnlyAfterBeforeExecReturned) {
  std::chrono::steady_clock::time_point released{};
  req.before_exec = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a slow disk's fdatasync
    released = std::chrono::steady_clock::now();
  };
  RunOutcome o = run_sandbox(req);
  ASSERT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
  const long long payload_ns = std::stoll(o.stdout_data);
  const long long released_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(released.time_since_epoch()).count();
  EXPECT_GE(payload_ns, released_ns) << "the payload ran before the hold was released";
}

// A sandbox prepared ahead (PreparedSandbox) gets its script with the release, and still starts
// the payload only once before_exec returned.
TEST_F(HeldLaunch, APreparedSandboxHoldsThePayloadToo) {
  LaunchRequest base = req;
  base.script.clear();
  base.max_script = 4096;
  auto prepared = PreparedSandbox::prepare(base);
  std::chrono::steady_clock::time_point released{};
  req.before_exec = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    released = std::chrono::steady_clock::now();
  };
  RunOutcome o = prepared->run(req);
  ASSERT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
  EXPECT_TRUE(o.prepared);
  const long long payload_ns = std::stoll(o.stdout_data);
  EXPECT_GE(payload_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(released.time_since_epoch()).count())
      << "the payload ran before the hold was released";
  // Once only, and only a run that fits it.
  EXPECT_THROW(prepared->run(req), Error);
  auto other = PreparedSandbox::prepare(base);
  LaunchRequest bigger = req;
  bigger.spec.limits.pids += 1;
  EXPECT_THROW(other->run(bigger), Error);
  other.reset();
  EXPECT_EQ(cgroups_named(req.run_id), 0u);
  EXPECT_EQ(children_of_this_process(), 0u);
}

TEST_F(HeldLaunch, APayloadNeverStartsWhenBeforeExecFails) {
  req.script = "import time\ntime.sleep(5)\n";
  size_t procs_seen = 0;
  req.before_exec = [&] {
    // Give a payload that was not held back time to exist, then count the sandbox's processes.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    procs_seen = processes_in_cgroups_named(req.run_id);
    throw Error("cannot sync audit log", "disk full");
  };
  EXPECT_THROW(run_sandbox(req), Error);
  EXPECT_EQ(procs_seen, 1u) << "only pid 1 may exist while the payload is held";
  EXPECT_EQ(cgroups_named(req.run_id), 0u);
  EXPECT_EQ(children_of_this_process(), 0u);
}

// pid 1 is a fork-like clone of a launcher with threads: it closes every fd it inherited but its
// own, so a sandbox made on one thread never holds another run's pipes (and their EOF).
TEST_F(HeldLaunch, APreparedSandboxHoldsNoFdItWasNotGiven) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  LaunchRequest base = req;
  base.script.clear();
  base.max_script = 4096;
  auto prepared = PreparedSandbox::prepare(base);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // set up, waiting for its release
  wr.reset();
  pollfd pfd{rd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 2000), 1) << "pid 1 holds a pipe it was not given";
  char c = 0;
  EXPECT_EQ(::read(rd.get(), &c, 1), 0);
  RunOutcome o = prepared->run(req);
  EXPECT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
}

// defer_teardown: the result comes back as soon as the payload's status and output are in; pid 1
// and the cgroup stay until the caller drops what it was handed, and go then.
TEST_F(HeldLaunch, ADeferredTeardownWaitsForTheCallerToDropTheRemains) {
  std::shared_ptr<void> remains;
  req.defer_teardown = [&](std::shared_ptr<void> r) { remains = std::move(r); };
  RunOutcome o = run_sandbox(req);
  ASSERT_EQ(o.status, RunStatus::exited) << o.error << o.stderr_data;
  EXPECT_FALSE(o.stdout_data.empty());
  ASSERT_TRUE(remains) << "the teardown was not handed over";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // pid 1 has long exited by now
  EXPECT_GT(cgroups_named(req.run_id), 0u) << "the cgroup was removed before the remains were dropped";
  EXPECT_EQ(children_of_this_process(), 1u) << "pid 1 was reaped before the result came back";
  remains.reset();
  EXPECT_EQ(cgroups_named(req.run_id), 0u);
  EXPECT_EQ(children_of_this_process(), 0u);
  // A run that ends otherwise (here: its timeout) is torn down before its result comes back.
  req.run_id = new_run_id();
  req.script = "import time\ntime.sleep(30)\n";
  req.spec.limits.timeout_s = 0.5;
  RunOutcome t = run_sandbox(req);
  EXPECT_EQ(t.status, RunStatus::timeout);
  EXPECT_FALSE(remains);
  EXPECT_EQ(cgroups_named(req.run_id), 0u);
  EXPECT_EQ(children_of_this_process(), 0u);
}

}  // namespace
}  // namespace sandboxrun
