// Per-run cgroup: limits, placement, sampling, OOM detection, kill and removal.
// Backends: cgroup v2 (cgroup_v2.cpp) and the v1 fallback (cgroup_v1.cpp); the backend is chosen
// by create_cgroup (cgroup_create.cpp, selection documented there).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sandboxrun/spec.hpp"

namespace sandboxrun {

struct CgroupUsage {
  uint64_t memory_current = 0;  // bytes
  uint64_t memory_peak = 0;     // bytes (kernel's peak where available, else max of samples)
  uint64_t cpu_usec = 0;        // user+system
  uint64_t pids_current = 0;
  uint64_t pids_peak = 0;       // max seen (pids.peak where available)
  uint64_t oom_kills = 0;       // memory.events oom_kill / v1 memory.oom_control oom_kill
  uint64_t pids_max_hits = 0;   // pids.events max: forks refused by pids.max
};

// What the host offers, for `doctor` and for choosing a backend.
struct CgroupSupport {
  std::string version;                  // "v2", "v1", "none"
  std::vector<std::string> controllers; // usable controllers: memory, pids, cpu, ...
  std::string detail;                   // where, and what is missing with the fix
  bool can_limit_memory = false;
  bool can_limit_pids = false;
  bool can_limit_cpu = false;
};
CgroupSupport probe_cgroups(const CgroupSettings& settings);

class Cgroup {
 public:
  virtual ~Cgroup() = default;  // implementations kill remaining processes and remove the cgroup

  // "v2" or "v1" ("v1" on hybrid hosts too: limits are v1, see path() for the cgroup2 part).
  virtual std::string backend() const = 0;
  // fd (O_RDONLY|O_DIRECTORY) of the v2 cgroup for clone3(CLONE_INTO_CGROUP), or -1 when that
  // alone does not place the child (v1): then call add_process(child) before it runs anything.
  virtual int clone_into_fd() const = 0;
  // Moves a process (the sandbox's pid 1, before it runs anything) into the cgroup(s).
  virtual void add_process(pid_t pid) = 0;
  // Reads the counters; peaks are kept across calls (max of the kernel's and of every sample).
  virtual CgroupUsage sample() = 0;
  // SIGKILL every process in the cgroup and wait (bounded) until it is empty: cgroup.kill where
  // the kernel has it, else freeze + kill loop (v1 freezer or cgroup.freeze), else a kill loop.
  virtual void kill_all() noexcept = 0;
  // Human-readable path(s), for messages and the audit log.
  virtual std::string path() const = 0;
  // Limits that are not enforced exactly as asked, one sentence each with the fix (e.g. no cpu
  // controller, no swap accounting). Empty when everything requested is enforced.
  virtual std::vector<std::string> degradations() const = 0;
};

// Hides the cost of the first process move on cgroup v1. Every write to a v1 cgroup.procs takes
// the kernel's global cgroup_threadgroup_rwsem for writing, and the first writer after a quiet
// spell waits one RCU grace period (6-13 ms on the development VM); writers within about one
// grace period of the previous one do not wait. The warm-up pays that wait on a background
// thread while the launcher reads its config and assesses the code: it re-writes the launcher's
// own pid into the v1 cgroup it is already in (a move that changes nothing), every few ms, until
// stop() or a time cap. Purely a latency measure: where it cannot write (no v1 hierarchy, not
// permitted) the thread ends and nothing else changes. No-op on pure cgroup v2 hosts, whose
// runs are placed by clone3(CLONE_INTO_CGROUP) without any move.
class MigrationWarmup {
 public:
  MigrationWarmup();
  ~MigrationWarmup();
  MigrationWarmup(const MigrationWarmup&) = delete;
  MigrationWarmup& operator=(const MigrationWarmup&) = delete;
  // Ends the thread (idempotent); call once the run's processes are placed.
  void stop() noexcept;
  // How many no-op moves were written (for tests).
  unsigned writes() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

// Creates the per-run cgroup named after run_id (letters, digits, '.', '_', '-') and applies
// limits (memory incl. swap=0, pids, cpu quota); 0 or a negative cpus means "no limit". Sweeps
// stale cgroups of dead launchers first. Returns nullptr when the host cannot give us a cgroup
// and `settings.allow_degraded` permits running without (the reason goes to *degraded_reason
// when given); throws Error (saying what the host lacks and how to fix it) otherwise. Problems
// that do not concern this run (a stale cgroup that could not be removed) go to *warnings.
std::unique_ptr<Cgroup> create_cgroup(const std::string& run_id, const Limits& limits,
                                      const CgroupSettings& settings,
                                      std::string* degraded_reason = nullptr,
                                      std::vector<std::string>* warnings = nullptr);

}  // namespace sandboxrun
