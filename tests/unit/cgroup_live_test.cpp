// Real cgroups on this host through the public API (root needed). Each test prints the
// backend it exercised; on this development host that is the v1 (hybrid) backend.
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "../../src/cgroup/cgroup_impl.hpp"
#include "cgroup_test_util.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "test_util.hpp"

namespace cgtest {

// A forked child that runs `body` after the parent calls go() (so it can be placed first).
class Child {
 public:
  explicit Child(const std::function<int()>& body) {
    auto p = sandboxrun::make_pipe();
    pid_ = ::fork();
    if (pid_ == 0) {
      p.write.reset();
      char c;
      if (::read(p.read.get(), &c, 1) != 1) ::_exit(100);
      ::_exit(body());
    }
    go_ = std::move(p.write);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void go() {
    char c = 'g';
    ASSERT_EQ(::write(go_.get(), &c, 1), 1);
    go_.reset();
  }
  // Reaps the child if it has exited (its status in `st`); false while it runs.
  bool try_wait(int& st) {
    if (::waitpid(pid_, &st, WNOHANG) != pid_) return false;
    reaped_ = true;
    return true;
  }
  void kill_and_wait() {
    ::kill(pid_, SIGKILL);
    wait();
  }
  // waitpid status.
  int wait() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    return st;
  }

 private:
  pid_t pid_ = -1;
  sandboxrun::UniqueFd go_;
  bool reaped_ = false;
};

}  // namespace cgtest

using namespace sandboxrun;
using cgtest::Child;
using test_util::slurp_value;

namespace {

constexpr uint64_t MiB = 1 << 20;

class CgroupLive : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups";
    support_ = probe_cgroups(settings_);
    if (support_.version == "none") GTEST_SKIP() << "no usable cgroups: " << support_.detail;
  }
  std::unique_ptr<Cgroup> make(const Limits& limits, const char* tag = "live") {
    auto cg = create_cgroup(cgtest::unique_id(tag), limits, settings_);
    EXPECT_NE(cg, nullptr);
    if (cg) std::printf("[backend %s] %s\n", cg->backend().c_str(), cg->path().c_str());
    return cg;
  }
  // The cgroup (v1 line for `controller`, or v2 "0::") a process is in.
  static std::string cgroup_of(pid_t pid, const std::string& controller) {
    std::string text = read_file("/proc/" + std::to_string(pid) + "/cgroup");
    auto p = cgroup_detail::own_cgroup(text, controller);
    return p ? *p : "";
  }
  CgroupSettings settings_;
  CgroupSupport support_;
};

int touch_mib(uint64_t mib) {
  size_t len = mib * MiB;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 2;
  std::memset(p, 0x5a, len);
  return 0;
}

TEST_F(CgroupLive, ProbeReportsControllers) {
  std::printf("[backend %s] %s\n", support_.version.c_str(), support_.detail.c_str());
  EXPECT_TRUE(support_.can_limit_memory);
  EXPECT_TRUE(support_.can_limit_pids);
}

TEST_F(CgroupLive, LimitsAreWritten) {
  Limits l;
  l.memory_bytes = 200 * MiB;
  l.pids = 17;
  l.cpus = 0.5;
  auto cg = make(l);
  ASSERT_TRUE(cg);
  EXPECT_TRUE(cg->degradations().empty()) << cg->degradations().front();
  const std::string paths = cg->path();
  if (cg->backend() == "v1") {
    std::string mem = cgtest::dir_with(paths, "memory.limit_in_bytes");
    ASSERT_FALSE(mem.empty());
    EXPECT_EQ(slurp_value(mem + "/memory.limit_in_bytes"), std::to_string(200 * MiB));
    if (cgtest::exists(mem + "/memory.memsw.limit_in_bytes")) {
      EXPECT_EQ(slurp_value(mem + "/memory.memsw.limit_in_bytes"), std::to_string(200 * MiB));
    }
    EXPECT_EQ(slurp_value(cgtest::dir_with(paths, "pids.max") + "/pids.max"), "17");
    std::string cpu = cgtest::dir_with(paths, "cpu.cfs_quota_us");
    ASSERT_FALSE(cpu.empty());
    EXPECT_EQ(slurp_value(cpu + "/cpu.cfs_quota_us"), "50000");
    EXPECT_EQ(slurp_value(cpu + "/cpu.cfs_period_us"), "100000");
  } else {
    EXPECT_EQ(slurp_value(paths + "/memory.max"), std::to_string(200 * MiB));
    EXPECT_EQ(slurp_value(paths + "/memory.swap.max"), "0");
    EXPECT_EQ(slurp_value(paths + "/pids.max"), "17");
    EXPECT_EQ(slurp_value(paths + "/cpu.max"), "50000 100000");
  }
}

TEST_F(CgroupLive, ProcessIsPlacedInEveryHierarchy) {
  auto cg = make(Limits{});
  ASSERT_TRUE(cg);
  Child c([] { return ::pause(); });
  cg->add_process(c.pid());
  std::string name = cg->path().substr(cg->path().rfind('/') + 1);
  for (const char* ctrl : {"memory", "pids"}) {
    std::string in = cgroup_of(c.pid(), cg->backend() == "v2" ? "" : ctrl);
    EXPECT_EQ(in.substr(in.rfind('/') + 1), name) << ctrl << ": " << in;
  }
  if (cg->backend() == "v1" && cgroup_detail::parse_mountinfo(read_file("/proc/self/mountinfo")).v2) {
    // Hybrid: the cgroup2 companion holds it too (that is what cgroup.kill acts on).
    std::string in = cgroup_of(c.pid(), "");
    EXPECT_EQ(in.substr(in.rfind('/') + 1), name) << "cgroup2: " << in;
  }
  EXPECT_EQ(cg->sample().pids_current, 1u);
}

TEST_F(CgroupLive, CpuTimeGrowsAndQuotaHoldsHalfACpu) {
  Limits l;
  l.cpus = 0.5;
  auto cg = make(l);
  ASSERT_TRUE(cg);
  Child c([] {
    volatile uint64_t i = 0;
    for (;;) i = i + 1;
    return 0;
  });
  cg->add_process(c.pid());
  uint64_t before = cg->sample().cpu_usec;
  auto t0 = std::chrono::steady_clock::now();
  c.go();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  uint64_t used = cg->sample().cpu_usec - before;
  double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  double share = static_cast<double>(used) / wall_us;
  std::printf("spinner used %.2f cpus with cpu_count 0.5\n", share);
  EXPECT_GT(used, 50000u);   // it ran, and we saw it
  EXPECT_LT(share, 0.65);    // a missing quota gives ~1.0
}

TEST_F(CgroupLive, MemoryPeakOfA100MiBToucher) {
  Limits l;
  l.memory_bytes = 256 * MiB;
  auto cg = make(l);
  ASSERT_TRUE(cg);
  auto done = make_pipe();
  Child c([&] {
    int rc = touch_mib(100);
    char b = 'd';
    (void)!::write(done.write.get(), &b, 1);
    ::pause();
    return rc;
  });
  done.write.reset();
  cg->add_process(c.pid());
  c.go();
  char b;
  ASSERT_EQ(::read(done.read.get(), &b, 1), 1);
  auto u = cg->sample();
  std::printf("memory current %llu peak %llu\n", static_cast<unsigned long long>(u.memory_current),
              static_cast<unsigned long long>(u.memory_peak));
  EXPECT_GE(u.memory_peak, 100 * MiB);
  EXPECT_GE(u.memory_current, 100 * MiB);
  EXPECT_EQ(u.oom_kills, 0u);
}

TEST_F(CgroupLive, OomKillIsCounted) {
  Limits l;
  l.memory_bytes = 32 * MiB;
  auto cg = make(l);
  ASSERT_TRUE(cg);
  Child c([] { return touch_mib(128); });
  cg->add_process(c.pid());
  c.go();
  int st = c.wait();
  ASSERT_TRUE(WIFSIGNALED(st)) << "the 128 MiB toucher was not killed under a 32 MiB limit";
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  auto u = cg->sample();
  EXPECT_GE(u.oom_kills, 1u);
  EXPECT_LE(u.memory_peak, 33 * MiB);
}

TEST_F(CgroupLive, ForkLoopIsHeldAtPidsMax) {
  // The forker's children outlive it; as their subreaper we can reap them (v1 pids.current
  // counts zombies until someone does).
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Limits l;
  l.pids = 8;
  auto cg = make(l);
  ASSERT_TRUE(cg);
  Child c([] {
    int forked = 0;
    for (int i = 0; i < 100; ++i) {
      pid_t p = ::fork();
      if (p == 0) {
        ::pause();
        ::_exit(0);
      }
      if (p < 0) break;
      ++forked;
    }
    return forked;
  });
  cg->add_process(c.pid());
  c.go();
  int st = c.wait();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);  // 8 pids: the forker and 7 children
  auto u = cg->sample();
  EXPECT_GT(u.pids_max_hits, 0u);
  EXPECT_EQ(u.pids_current, 7u);
  EXPECT_LE(u.pids_peak, 8u);
  EXPECT_GE(u.pids_peak, 7u);
  cg->kill_all();
  int reaped = 0;
  while (::waitpid(-1, nullptr, 0) > 0) ++reaped;
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  EXPECT_EQ(reaped, 7);
  EXPECT_EQ(cg->sample().pids_current, 0u);
}

TEST_F(CgroupLive, KillAllKillsStubbornAndStoppedProcesses) {
  auto cg = make(Limits{});
  ASSERT_TRUE(cg);
  Child stubborn([] {
    ::signal(SIGTERM, SIG_IGN);
    for (;;) ::pause();
    return 0;
  });
  Child stopped([] {
    ::raise(SIGSTOP);
    return 0;
  });
  cg->add_process(stubborn.pid());
  cg->add_process(stopped.pid());
  stubborn.go();
  stopped.go();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  cg->kill_all();
  int st = stubborn.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  st = stopped.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  EXPECT_EQ(cg->sample().pids_current, 0u);
}

// The v1 kill paths without the cgroup2 companion: the freezer, and the bare kill loop. A
// forker that keeps forking is the hard case for a loop (new pids between read and kill).
class CgroupV1Kill : public CgroupLive, public ::testing::WithParamInterface<bool> {};

TEST_P(CgroupV1Kill, KillsAForkingTree) {
  cgroup_detail::Plan plan = cgroup_detail::plan_host_cgroups(settings_);
  if (plan.version != "v1") GTEST_SKIP() << "host backend is " << plan.version;
  cgroup_detail::V1Options opts;
  opts.use_unified = false;
  opts.use_freezer = GetParam();
  if (opts.use_freezer && !plan.v1_parents.count("freezer")) GTEST_SKIP() << "no v1 freezer";
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Limits l;
  l.pids = 32;
  auto cg = cgroup_detail::make_v1_cgroup(plan, cgroup_detail::run_dir_name(cgtest::unique_id("v1kill"),
                                                                            cgroup_detail::self_owner()),
                                          l, opts);
  std::printf("[backend v1, kill by %s] %s\n", opts.use_freezer ? "freezer" : "kill loop", cg->path().c_str());
  EXPECT_EQ(cgtest::dir_with(cg->path(), "freezer.state").empty(), !opts.use_freezer);
  Child c([] {
    ::signal(SIGTERM, SIG_IGN);
    for (;;) {
      pid_t p = ::fork();
      if (p > 0) ::waitpid(p, nullptr, 0);
      if (p == 0) ::usleep(1000);
      if (p == 0) ::_exit(0);
    }
    return 0;
  });
  cg->add_process(c.pid());
  c.go();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cg->kill_all();
  int st = c.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  auto paths = cgtest::split_paths(cg->path());
  cg.reset();
  for (const auto& p : paths) EXPECT_FALSE(cgtest::exists(p)) << p;
}

INSTANTIATE_TEST_SUITE_P(FreezerOrLoop, CgroupV1Kill, ::testing::Bool());

// Fail closed: a non-root launcher without delegation gets a refusal that names the fix, or,
// when the settings allow a degraded run, nullptr and the reason.
TEST_F(CgroupLive, NonRootWithoutDelegationFailsClosed) {
  pid_t p = ::fork();
  if (p == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    CgroupSettings s;
    try {
      create_cgroup("nobody-run", Limits{}, s);
      ::_exit(11);  // must not succeed
    } catch (const Error& e) {
      std::printf("refused: %s\n", e.describe().c_str());
      if (e.describe().find("Delegate=yes") == std::string::npos) ::_exit(12);
    }
    s.allow_degraded = true;
    std::string why;
    auto cg = create_cgroup("nobody-run", Limits{}, s, &why);
    std::printf("degraded: %s\n", why.c_str());
    std::fflush(stdout);
    ::_exit(cg == nullptr && !why.empty() ? 0 : 13);
  }
  int st = 0;
  ::waitpid(p, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10: setuid failed, 11: created anyway, 12: no fix in the message, 13: degraded mode broken";
}

TEST_F(CgroupLive, DestructorKillsAndRemovesEverything) {
  auto cg = make(Limits{});
  ASSERT_TRUE(cg);
  auto paths = cgtest::split_paths(cg->path());
  ASSERT_FALSE(paths.empty());
  Child c([] { return ::pause(); });
  cg->add_process(c.pid());
  for (const auto& p : paths) EXPECT_TRUE(cgtest::exists(p)) << p;
  cg.reset();
  for (const auto& p : paths) EXPECT_FALSE(cgtest::exists(p)) << p << " survived the destructor";
  int st = c.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

// The destructor's first step is one rmdir per directory: it must leave a populated directory
// alone, and what it removed must not stop the rest from being emptied and removed. A task in one
// v1 hierarchy only (the cgroup2 twin and the others empty) is the hardest case: the twin's
// cgroup.kill is gone with the twin, so the task must be killed through cgroup.procs.
TEST_F(CgroupLive, ATaskInOneHierarchyOnlyIsKilledAndEveryDirectoryRemoved) {
  auto cg = make(Limits{});
  ASSERT_TRUE(cg);
  const auto paths = cgtest::split_paths(cg->path());
  if (paths.size() < 2) GTEST_SKIP() << "backend " << cg->backend() << " has one directory a run (cgroup v2): no partial case";
  std::string memory;
  for (const auto& p : paths)
    if (p.find("/memory/") != std::string::npos) memory = p;
  ASSERT_FALSE(memory.empty()) << cg->path();
  Child c([] { return ::pause(); });
  {
    std::ofstream procs(memory + "/cgroup.procs");
    procs << c.pid() << std::flush;
    ASSERT_TRUE(procs.good()) << "cannot place the child in " << memory;
  }
  cg.reset();
  int st = 0;
  bool reaped = false;
  for (int i = 0; i < 400 && !(reaped = c.try_wait(st)); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(reaped && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "the task was not killed (status " << st << ")";
  if (!reaped) c.kill_and_wait();
  for (const auto& p : paths) {
    EXPECT_FALSE(cgtest::exists(p)) << p << " survived the destructor";
    ::rmdir(p.c_str());  // what a broken destructor left
  }
}

// remove_if_empty is a single rmdir: false, and the directory kept, while a task is inside.
TEST_F(CgroupLive, RemoveIfEmptyKeepsAPopulatedDirectory) {
  auto run = make(Limits{});  // makes the parents
  ASSERT_TRUE(run);
  const cgroup_detail::Plan plan = cgroup_detail::plan_host_cgroups(settings_);
  const bool v2 = plan.version == "v2";
  const std::string where = v2 ? plan.v2_parent : plan.v1_parents.at("pids");
  cgroup_detail::CgroupDir dir(where, cgtest::unique_id("rmdir-once"), v2);
  Child c([] { return ::pause(); });
  dir.add_process(c.pid());
  EXPECT_FALSE(dir.remove_if_empty());
  EXPECT_TRUE(cgtest::exists(dir.path())) << "a populated cgroup was removed, or said to be";
  c.kill_and_wait();
  ::rmdir(dir.path().c_str());  // what a broken remove_if_empty left
  EXPECT_FALSE(cgtest::exists(dir.path()));
}

// ... and true, the directory gone, once the task is reaped.
TEST_F(CgroupLive, RemoveIfEmptyRemovesAnEmptiedDirectory) {
  auto run = make(Limits{});  // makes the parents
  ASSERT_TRUE(run);
  const cgroup_detail::Plan plan = cgroup_detail::plan_host_cgroups(settings_);
  const bool v2 = plan.version == "v2";
  cgroup_detail::CgroupDir dir(v2 ? plan.v2_parent : plan.v1_parents.at("pids"), cgtest::unique_id("rmdir-once"), v2);
  Child c([] { return ::pause(); });
  dir.add_process(c.pid());
  c.kill_and_wait();
  EXPECT_TRUE(dir.remove_if_empty()) << dir.path();
  EXPECT_FALSE(cgtest::exists(dir.path()));
}

TEST_F(CgroupLive, ConcurrentCreatesDoNotCollide) {
  constexpr int kThreads = 4, kRounds = 5;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::mutex mu;
  std::vector<std::string> seen;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        try {
          auto cg = create_cgroup(cgtest::unique_id("conc"), Limits{}, settings_);
          std::lock_guard<std::mutex> lock(mu);
          seen.push_back(cg->path());
        } catch (const Error& e) {
          std::printf("create failed: %s\n", e.describe().c_str());
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(seen.size(), size_t{kThreads * kRounds});
  for (const auto& paths : seen)
    for (const auto& p : cgtest::split_paths(paths)) EXPECT_FALSE(cgtest::exists(p)) << p;
}

TEST_F(CgroupLive, SameRunIdTwiceIsAnError) {
  std::string id = cgtest::unique_id("dup");
  auto a = create_cgroup(id, Limits{}, settings_);
  EXPECT_THROW(create_cgroup(id, Limits{}, settings_), Error);
  EXPECT_TRUE(cgtest::exists(cgtest::split_paths(a->path()).front())) << "the failed twin removed ours";
}

// A launcher killed with SIGKILL leaves its cgroups (and a process) behind; the next
// create_cgroup removes them, and leaves alone what is not ours or still owned.
TEST_F(CgroupLive, StaleCgroupsOfDeadLaunchersAreSwept) {
  // A parent of our own, so that no other launcher on this host sweeps our bait first.
  settings_.parent = "sandboxrun-test-" + std::to_string(::getpid());
  auto report = make_pipe();
  pid_t launcher = ::fork();
  if (launcher == 0) {
    report.read.reset();
    auto cg = create_cgroup(cgtest::unique_id("stale"), Limits{}, settings_);
    pid_t orphan = ::fork();
    if (orphan == 0) {
      report.write.reset();
      for (;;) ::pause();
    }
    cg->add_process(orphan);
    std::string msg = std::to_string(orphan) + " " + cg->path();
    (void)!::write(report.write.get(), msg.data(), msg.size());
    ::raise(SIGKILL);  // no destructor runs
  }
  report.write.reset();
  const std::string msg = read_fd(report.read.get(), 1 << 20, "the killed launcher's report");
  ::waitpid(launcher, nullptr, 0);
  auto words = cgtest::split_paths(msg);
  ASSERT_GE(words.size(), 2u);
  pid_t orphan = std::stoi(words[0]);
  std::vector<std::string> stale(words.begin() + 1, words.end());
  for (const auto& p : stale) ASSERT_TRUE(cgtest::exists(p)) << p;

  auto live = make(Limits{}, "owner");  // a run with a live owner (us) must survive the sweep
  std::string parent = stale.back().substr(0, stale.back().rfind('/'));
  std::string foreign = parent + "/not-ours-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(foreign.c_str(), 0755), 0) << foreign;

  auto next = make(Limits{}, "next");
  for (const auto& p : stale) EXPECT_FALSE(cgtest::exists(p)) << p << " was not swept";
  EXPECT_TRUE(cgtest::exists(foreign)) << "the sweep removed a cgroup that is not ours";
  for (const auto& p : cgtest::split_paths(live->path())) EXPECT_TRUE(cgtest::exists(p)) << p;
  bool orphan_alive = cgroup_detail::process_start_time(orphan).has_value();
  EXPECT_FALSE(orphan_alive) << "the orphan survived the sweep";
  if (orphan_alive) ::kill(orphan, SIGKILL);  // it holds our stdout: do not leave it behind
  ::rmdir(foreign.c_str());
  live.reset();
  next.reset();
  for (const auto& p : stale) {
    ::rmdir(p.c_str());
    ::rmdir(p.substr(0, p.rfind('/')).c_str());
  }
}

TEST_F(CgroupLive, RejectsBadRunIds) {
  for (const char* bad : {"", "..", "a/b", "x y", "a@1.2"})
    EXPECT_THROW(create_cgroup(bad, Limits{}, settings_), Error) << bad;
}

}  // namespace
