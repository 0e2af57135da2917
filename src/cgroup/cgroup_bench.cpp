// Cost of a run's cgroup: create_cgroup (probe + sweep + mkdirs + limits), the same through a
// CgroupHost (mkdirs + limits), and destruction, empty and with one process added and killed.
// Prints medians; used by scripts/bench.sh.
//   sandboxrun_cgroup_bench [ROUNDS]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "paused_child.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/error.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median_us(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A paused child forked the launcher's way (see paused_child.hpp).
pid_t fork_into(sandboxrun::Cgroup& cg) {
  const sandboxrun::CloneIntoCgroup into(&cg);
  const pid_t pid = sandboxrun::cgroup_detail::clone_paused(into);
  if (pid < 0) throw sandboxrun::Error("clone3 into the run's cgroup", "", errno);
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sandboxrun;
  int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 100;
  Limits limits;
  limits.memory_bytes = 256 << 20;
  limits.pids = 64;
  limits.cpus = 1;
  CgroupSettings settings;
  std::vector<double> create, destroy, with_process, hosted_create;
  std::string backend;
  try {
    const CgroupHost host(settings);
    for (int i = 0; i < rounds; ++i) {
      std::string id = "bench-" + std::to_string(::getpid()) + "-" + std::to_string(i);
      auto t0 = Clock::now();
      auto cg = create_cgroup(id, limits, settings);
      auto t1 = Clock::now();
      backend = cg->backend();
      cg.reset();
      auto t2 = Clock::now();
      create.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      // Through a CgroupHost (the Executor's way): the probe, parents and sweep done once.
      auto p0 = Clock::now();
      auto hosted = host.create(id + "-h", limits);
      auto p1 = Clock::now();
      hosted.reset();
      hosted_create.push_back(std::chrono::duration<double, std::micro>(p1 - p0).count());
      destroy.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());

      // The launcher's sequence: create, place a waiting child, kill it, destroy.
      auto t3 = Clock::now();
      cg = create_cgroup(id + "-p", limits, settings);
      pid_t child = fork_into(*cg);
      cg->kill_all();
      ::waitpid(child, nullptr, 0);
      cg.reset();
      with_process.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t3).count());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "cgroup bench: %s\n", e.describe().c_str());
    return 1;
  }
  std::printf("cgroup backend %s, %d rounds: create median %.0f us, destroy median %.0f us, "
              "create+place+kill+destroy median %.0f us; create through a CgroupHost median %.0f us\n",
              backend.c_str(), rounds, median_us(create), median_us(destroy), median_us(with_process), median_us(hosted_create));
  if (backend != "v1") return 0;

  // Placing a fresh child after a quiet spell (long enough for the kernel's migration lock to go
  // idle): moved after the fork through cgroup.procs, against forked from inside the run's
  // cgroup the way the launcher does it (CloneIntoCgroup; no migration of the child).
  std::vector<double> moved, inside;
  try {
    for (int i = 0; i < std::min(rounds, 20); ++i) {
      for (bool from_inside : {false, true}) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        auto cg = create_cgroup("bench-" + std::to_string(::getpid()) + "-w" + std::to_string(i) + (from_inside ? "i" : "m"),
                                limits, settings);
        auto t0 = Clock::now();
        pid_t child;
        if (from_inside) {
          child = fork_into(*cg);
        } else {
          child = ::fork();
          if (child == 0) {
            ::pause();
            ::_exit(0);
          }
          cg->add_process(child);
        }
        (from_inside ? inside : moved).push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        cg->kill_all();
        ::waitpid(child, nullptr, 0);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "cgroup bench: %s\n", e.describe().c_str());
    return 1;
  }
  std::printf("v1 placement of a new child, median: fork + cgroup.procs move %.0f us, fork from inside "
              "(the launcher's way) %.0f us\n",
              median_us(moved), median_us(inside));
  return 0;
}
