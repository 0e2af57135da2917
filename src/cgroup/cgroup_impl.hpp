// Internals of the cgroup module, shared by its files and its unit tests (not a public API).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::cgroup_detail {

inline constexpr const char* kDefaultParent = "sandboxrun";
// The leaf a launcher moves its own (delegated) v2 cgroup's processes into, so that the cgroup
// may enable controllers for its children (the no-internal-processes rule).
inline constexpr const char* kLauncherLeaf = "sandboxrun.launcher";
inline constexpr uint64_t kCpuPeriodUs = 100000;
// How long kill_all / removal wait for a cgroup to empty before giving up.
inline constexpr std::chrono::milliseconds kKillBudget{5000};

// ---- control files (cgroup_fs.cpp) -------------------------------------------------------

// Contents of `name` in the directory, or nullopt when the file does not exist or is unreadable.
std::optional<std::string> read_ctl(int dirfd, const std::string& name) noexcept;
// Writes value to `name` (O_WRONLY|O_TRUNC, never creates); throws Error naming dir/name.
void write_ctl(int dirfd, const std::string& dir, const std::string& name, const std::string& value);
bool has_ctl(int dirfd, const std::string& name) noexcept;
// "123\n" -> 123; "max" or junk -> nullopt.
std::optional<uint64_t> parse_u64(std::string_view text) noexcept;
// Value of `key` in a "key value" per line file (memory.events, cpu.stat, ...).
std::optional<uint64_t> keyed_value(std::string_view text, std::string_view key) noexcept;
std::vector<pid_t> parse_pids(std::string_view text);
// Space-separated words ("cpu memory pids").
std::vector<std::string> split_words(std::string_view text);

// One cgroup directory we created on one hierarchy. The destructor kills what is left in it
// (bounded) and removes it, so a half-built cgroup set cleans itself up.
class CgroupDir {
 public:
  // mkdir parent/name (parent must exist) and open it; throws Error (EEXIST included).
  CgroupDir(const std::string& parent, const std::string& name, bool v2);
  ~CgroupDir();
  CgroupDir(const CgroupDir&) = delete;
  CgroupDir& operator=(const CgroupDir&) = delete;

  int fd() const noexcept { return fd_.get(); }
  const std::string& path() const noexcept { return path_; }
  bool v2() const noexcept { return v2_; }

  void add_process(pid_t pid);
  std::vector<pid_t> pids() const noexcept;
  // v2: cgroup.events "populated" (descendants included); v1: cgroup.procs not empty.
  bool populated() const noexcept;
  // v2 cgroup.kill (Linux >= 5.14); false when the file is missing or the write fails.
  bool cgroup_kill() const noexcept;
  // rmdir, retrying briefly while the kernel still finishes exiting tasks; true when gone.
  bool remove() noexcept;
  // One rmdir, no retry: true when gone. The kernel refuses (EBUSY) while a task is inside, so
  // this never removes a populated cgroup.
  bool remove_if_empty() noexcept;

 private:
  std::string path_;
  UniqueFd fd_;
  bool v2_;
  bool removed_ = false;
};

// SIGKILLs every process listed in the dirs until all are empty or `budget` passes; true when
// empty. Processes are re-read each round, so children forked meanwhile are caught too.
bool kill_until_empty(const std::vector<const CgroupDir*>& dirs,
                      std::chrono::milliseconds budget) noexcept;
// Polls until no dir is populated or `budget` passes; true when empty.
bool wait_empty(const std::vector<const CgroupDir*>& dirs, std::chrono::milliseconds budget) noexcept;

// ---- run naming, ownership and the stale sweep (cgroup_sweep.cpp) ---------------------------

// The launcher that owns a run cgroup: pid plus its start time (/proc/PID/stat field 22), so a
// recycled pid is not mistaken for the owner.
struct Owner {
  pid_t pid = 0;
  uint64_t start = 0;
};
Owner self_owner();
// /proc/PID/stat: state (field 3), parent (field 4) and start time (field 22).
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
  uint64_t start = 0;
};
std::optional<ProcStat> read_proc_stat(pid_t pid) noexcept;
// Start time of a live (not zombie) process; nullopt when it is gone or a zombie.
std::optional<uint64_t> process_start_time(pid_t pid) noexcept;
bool owner_alive(const Owner& owner) noexcept;
// Throws Error unless run_id is 1..128 of [A-Za-z0-9._-] and not "." or "..".
void validate_run_id(const std::string& run_id);
// "<run_id>@<pid>.<start>": the owner is in the name because cgroupfs holds no other files.
std::string run_dir_name(const std::string& run_id, const Owner& owner);
std::optional<Owner> parse_run_dir_name(std::string_view name) noexcept;

struct SweepParent {
  std::string path;  // parent directory holding run cgroups
  bool v2 = false;
};
// Kills the processes of, and removes, every run cgroup of a dead launcher under the parents
// (v2 parents should come first: cgroup.kill there empties the v1 twins too). Entries whose
// name is not ours are never touched. Returns how many directories were removed.
// Failures to remove one are added to *warnings (may be null) for the caller to report.
size_t sweep_stale(const std::vector<SweepParent>& parents, std::vector<std::string>* warnings) noexcept;

// ---- host discovery (cgroup_probe.cpp) ---------------------------------------------------

struct Mount {
  std::string root;        // mountinfo field 4: the hierarchy path mounted here
  std::string mountpoint;  // where
};
struct HostMounts {
  std::optional<Mount> v2;                  // first cgroup2 mount
  std::map<std::string, Mount> v1;          // controller ("memory", "cpu", ...) -> mount
};
HostMounts parse_mountinfo(std::string_view mountinfo);
// The directory of a hierarchy path ("/a/b") under a mount, or nullopt when the mount does not
// show that part of the hierarchy.
std::optional<std::string> dir_of(const Mount& m, const std::string& cgroup_path);
// Own cgroup path from /proc/self/cgroup text: hierarchy "" is v2 ("0::/x"), else a v1
// controller name. nullopt when not listed.
std::optional<std::string> own_cgroup(std::string_view proc_self_cgroup, const std::string& controller);

// Where this run's cgroups go and with which backend; also what `doctor` prints.
struct Plan {
  std::string version = "none";  // "v2", "v1" or "none"
  std::vector<std::string> controllers;  // usable: memory, pids, cpu, cpuacct, freezer
  std::string detail;    // where; on "none" what the host lacks and how to fix it
  // v2
  std::string v2_mount;        // mountpoint
  std::string v2_parent;       // absolute directory the run cgroups go under
  bool v2_parent_is_own = false;  // our own delegated cgroup: may move ourselves into a leaf
  // v1: controller -> absolute parent directory; "unified": cgroup2 companion of a hybrid host
  std::map<std::string, std::string> v1_parents;
  std::map<std::string, Mount> v1_mounts;  // controller -> its hierarchy's mount
  std::string unified_parent;
  // enclosing (CgroupMode::enclosing): version is the hierarchy read; our own cgroup's
  // directory per controller ("memory", "pids", "cpu", "cpuacct" on v1; "v2" on v2) and each
  // one's mount point, where the walk up for limits stops.
  bool enclosing = false;
  std::map<std::string, std::string> enclosing_dirs;
  std::map<std::string, std::string> enclosing_mounts;
};
// Reads the given mountinfo / self-cgroup texts and the cgroup files they point at.
Plan plan_cgroups(const CgroupSettings& settings, std::string_view mountinfo,
                  std::string_view proc_self_cgroup);
Plan plan_host_cgroups(const CgroupSettings& settings);

// ---- the enclosing cgroup: one run per container (cgroup_enclosing.cpp) --------------------

// Where this process's own cgroup is, for CgroupMode::enclosing; version "none" with the reason
// when it cannot be seen.
Plan plan_enclosing(const HostMounts& mounts, std::string_view self_cgroup);
// The container's limits: the tightest of each from our own cgroup up to the mount point.
struct EnclosingLimits {
  std::optional<uint64_t> memory;  // bytes; nullopt: none
  std::string memory_at;           // the file that sets it
  bool no_swap = false;            // v2 memory.swap.max 0, v1 memsw <= memory
  std::optional<uint64_t> pids;
  std::string pids_at;
  bool cpu_controller = false;
  std::optional<double> cpus;  // cpu.max / cfs quota in cpus; nullopt: none
};
EnclosingLimits read_enclosing_limits(const Plan& plan);
// Throws Error (limits; naming the Kubernetes and podman settings) when the container's memory
// or cpu limit is looser than `want`'s, or swap may exceed it; adds what is not enforced to
// `degradations`. Returns the RLIMIT_NPROC the sandbox user needs (0: the cgroup's pids.max is
// tight enough).
uint64_t check_enclosing_limits(const EnclosingLimits& e, const Limits& want, bool host_swap,
                                const std::string& where, std::vector<std::string>& degradations);
// Throws Error (limits) when the plan's cgroups (and those below) hold a live process that is
// neither `self`, one of its ancestors nor pid 1.
void check_alone(const Plan& plan, pid_t self);
// pid's parent chain reaches `ancestor` (a zombie or a vanished pid: false).
bool descends_from(pid_t pid, pid_t ancestor) noexcept;
// `busy` (shared by one CgroupHost's runs) is set while the cgroup is taken: a second run of the
// same launcher is refused.
std::unique_ptr<Cgroup> make_enclosing_cgroup(const Plan& plan, const Limits& limits,
                                              std::shared_ptr<std::atomic<bool>> busy);

// ---- backends ----------------------------------------------------------------------------

// The peaks a backend's sample() reports: the max of the kernel's own peak counters (where the
// kernel has them) and of every sample taken so far.
class PeakTracker {
 public:
  // Folds `u` in and replaces its peaks with the running maxima.
  void update(CgroupUsage& u) noexcept {
    memory_ = std::max({memory_, u.memory_peak, u.memory_current});
    pids_ = std::max({pids_, u.pids_peak, u.pids_current});
    u.memory_peak = memory_;
    u.pids_peak = pids_;
  }

 private:
  uint64_t memory_ = 0;
  uint64_t pids_ = 0;
};


// Writes the v2 limit files into an existing cgroup directory (memory.max, memory.swap.max,
// pids.max, cpu.max). Optional files that are missing add a sentence to `degradations`.
void apply_v2_limits(int dirfd, const std::string& dir, const Limits& limits,
                     std::vector<std::string>& degradations);
// Reads the v2 counters of a cgroup directory (peaks not yet merged with earlier samples).
CgroupUsage read_v2_usage(int dirfd) noexcept;
// "50000 100000" for 0.5 cpus; "max 100000" for no limit.
std::string v2_cpu_max(double cpus);
// cfs quota in us for `cpus` with kCpuPeriodUs; -1 (no limit) for cpus <= 0.
int64_t cpu_quota_us(double cpus);

// Enables memory, pids (and cpu when offered) for the children of plan.v2_parent, creating it
// and moving our own processes into kLauncherLeaf when the no-internal-processes rule requires.
void prepare_v2_parent(const Plan& plan);

std::unique_ptr<Cgroup> make_v2_cgroup(const Plan& plan, const std::string& name, const Limits& limits);

struct V1Options {
  bool use_unified = true;  // the hybrid cgroup2 companion: placement, cgroup.kill
  bool use_freezer = true;  // v1 freezer for kill_all when there is no cgroup.kill
};
// Reads the v1 counters of a run's memory, pids and cpuacct directories (cpuacct_fd may be -1;
// peaks not yet merged with earlier samples).
CgroupUsage read_v1_usage(int memory_fd, int pids_fd, int cpuacct_fd) noexcept;
std::unique_ptr<Cgroup> make_v1_cgroup(const Plan& plan, const std::string& name, const Limits& limits,
                                       const V1Options& options = {});

}  // namespace sandboxrun::cgroup_detail
