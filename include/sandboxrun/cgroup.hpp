// Per-run cgroup: limits, placement, sampling, OOM detection, kill and removal.
// Backends: cgroup v2 (cgroup_v2.cpp) and the v1 fallback (cgroup_v1.cpp); the backend is chosen
// by create_cgroup (cgroup_create.cpp, selection documented there).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
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
  // A run's first process is placed without migrating it: the launcher clones it between
  // enter_calling_thread() and leave_calling_thread(), with clone3(CLONE_INTO_CGROUP) on
  // clone_into_fd() where that is not -1 (see CloneIntoCgroup).
  // fd (O_RDONLY|O_DIRECTORY) of the cgroup2 directory for CLONE_INTO_CGROUP: the v2 cgroup, or
  // on hybrid hosts the controller-less twin; -1 when there is none.
  virtual int clone_into_fd() const = 0;
  // v1: moves the calling thread alone into the run's v1 cgroups, so that a child it clones
  // starts in them. A v1 move of a whole process (cgroup.procs) takes the kernel's global
  // threadgroup lock, whose first writer after a quiet spell waits an RCU grace period (6-13 ms
  // on the development VM); a thread moving itself ("0" into `tasks`) skips that lock. No-op on
  // v2. Throws Error, with the calling thread where it was.
  virtual void enter_calling_thread() = 0;
  // Moves the calling thread back to the cgroups it came from (or, if those are gone, to the
  // run's parent cgroups). Aborts the process if it cannot: a launcher left inside the run's
  // cgroup would be killed with the run.
  virtual void leave_calling_thread() noexcept = 0;
  // Moves an existing process into the cgroup(s) (a migration: slow on v1, see above).
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
  // cgroup.mode enclosing: the cgroup is the container's, the launcher's own included (so the
  // sandbox should be the OOM killer's first choice, and the container is the run's id slot).
  virtual bool encloses_launcher() const { return false; }
  // A bound on the sandbox user's processes that the cgroup does not enforce and the launcher
  // must (RLIMIT_NPROC); 0: none needed.
  virtual uint64_t process_limit() const { return 0; }
};

// Scope of a clone into a run's cgroup: the calling thread is in the run's v1 cgroups from
// construction to destruction (see Cgroup::enter_calling_thread). A null cgroup is a no-op.
class CloneIntoCgroup {
 public:
  explicit CloneIntoCgroup(Cgroup* cgroup) : cgroup_(cgroup) {
    if (cgroup_) cgroup_->enter_calling_thread();
  }
  ~CloneIntoCgroup() {
    if (cgroup_) cgroup_->leave_calling_thread();
  }
  CloneIntoCgroup(const CloneIntoCgroup&) = delete;
  CloneIntoCgroup& operator=(const CloneIntoCgroup&) = delete;
  int clone_into_fd() const { return cgroup_ ? cgroup_->clone_into_fd() : -1; }

 private:
  Cgroup* cgroup_;
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

// The host's side of run cgroups, worked out once: the backend and parent directories (read
// from /proc/self/mountinfo and the cgroup files), this process's owner tag, the parents made
// and stale runs swept. create_cgroup does all of that on every call; a long-lived caller keeps
// one CgroupHost and saves it on every run. Nothing here throws at construction: a host that
// cannot give cgroups says so on create(), as create_cgroup does. Thread-safe.
class CgroupHost {
 public:
  explicit CgroupHost(const CgroupSettings& settings);
  ~CgroupHost();
  CgroupHost(const CgroupHost&) = delete;
  CgroupHost& operator=(const CgroupHost&) = delete;

  const CgroupSettings& settings() const noexcept;
  // create_cgroup's contract. Stale runs of dead launchers are swept again at most every
  // kSweepInterval; a parent removed under the host is made again.
  std::unique_ptr<Cgroup> create(const std::string& run_id, const Limits& limits,
                                 std::string* degraded_reason = nullptr,
                                 std::vector<std::string>* warnings = nullptr) const;
  static constexpr int kSweepIntervalSeconds = 10;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sandboxrun
