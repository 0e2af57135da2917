// cgroup v1 backend (hybrid and legacy hosts): one directory per run in each of the memory,
// pids, cpu and cpuacct hierarchies; on hybrid hosts a twin in the controller-less cgroup2
// mount gives reliable placement accounting, cgroup.kill and the CPU time (its cpu.stat, there
// with no controller: no cpuacct directory then); otherwise the v1 freezer makes the kill loop
// race-free.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cgroup_detail {

namespace {

void ensure_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("cannot create cgroup " + path);
}

// Writing "0" to a v1 `tasks` file moves the writing thread alone.
bool move_self(int tasks_fd) noexcept { return ::write(tasks_fd, "0", 1) == 1; }

UniqueFd open_tasks(const std::string& dir) {
  UniqueFd fd(::open((dir + "/tasks").c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) throw_errno("cannot open " + dir + "/tasks");
  return fd;
}

class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(const Plan& plan, const std::string& name, const Limits& limits, const V1Options& options)
      : plan_(plan) {
    if (options.use_unified && !plan.unified_parent.empty()) {
      // Best effort: limits do not depend on it, only the quality of kill_all does.
      try {
        ensure_dir(plan.unified_parent);
        unified_ = add(plan.unified_parent, name, true);
        if (!has_ctl(unified_->fd(), "cgroup.kill")) unified_has_kill_ = false;
        unified_cpu_stat_ = has_ctl(unified_->fd(), "cpu.stat");
      } catch (const Error&) {
        // No companion (no cgroup2 mount there, or not ours): kill_all falls back to the v1 loop.
      }
    }
    memory_ = add(plan.v1_parents.at("memory"), name, false, "memory");
    pids_ = add(plan.v1_parents.at("pids"), name, false, "pids");
    cpu_ = plan.v1_parents.count("cpu") ? add(plan.v1_parents.at("cpu"), name, false, "cpu") : nullptr;
    if (plan.v1_parents.count("cpuacct") && !unified_cpu_stat_) {
      // cpu and cpuacct are often one hierarchy ("cpu,cpuacct"): then the cpu dir serves both.
      cpuacct_ = cpu_ && plan.v1_parents.at("cpuacct") == plan.v1_parents.at("cpu")
                     ? cpu_
                     : add(plan.v1_parents.at("cpuacct"), name, false, "cpuacct");
    }
    if ((!unified_ || !unified_has_kill_) && options.use_freezer && plan.v1_parents.count("freezer"))
      freezer_ = add(plan.v1_parents.at("freezer"), name, false, "freezer");
    apply_limits(limits);
  }

  ~CgroupV1() override {
    leave_calling_thread();  // normally done already (CloneIntoCgroup)
    // A run's cgroup is normally empty by now: its pid 1 was reaped, and that took its whole pid
    // namespace. Then one rmdir per directory is enough (cgroup.kill and reading cgroup.procs
    // first were 17 system calls after every run); a directory with a task still inside
    // refuses, and is emptied and removed below.
    bool all_gone = true;
    for (auto& d : dirs_) all_gone = d->remove_if_empty() && all_gone;
    if (all_gone) return;
    kill_all();
    // Seen empty: remove the directories without each one reading its cgroup.procs again.
    if (emptied_)
      for (auto& d : dirs_) d->remove();
  }

  std::string backend() const override { return "v1"; }
  // The cgroup2 twin: the v1 hierarchies come from the launching thread (enter_calling_thread).
  int clone_into_fd() const override { return unified_ ? unified_->fd() : -1; }

  void enter_calling_thread() override {
    // Where the thread is now, per hierarchy: opened before the first move, so that a failure
    // part-way can always go back.
    const std::string self = read_file("/proc/thread-self/cgroup");
    hops_.clear();
    emptied_ = false;
    for (const auto& [ctrl, dir] : hierarchies_) {
      Hop hop{ctrl, open_tasks(dir->path()), UniqueFd()};
      auto mount = plan_.v1_mounts.find(ctrl);
      auto own = own_cgroup(self, ctrl);
      auto origin = own && mount != plan_.v1_mounts.end() ? dir_of(mount->second, *own) : std::nullopt;
      hop.back = open_tasks(origin ? *origin : plan_.v1_parents.at(ctrl));
      hops_.push_back(std::move(hop));
    }
    for (size_t i = 0; i < hops_.size(); ++i) {
      if (move_self(hops_[i].into.get())) continue;
      const int err = errno;
      hops_.resize(i);
      leave_calling_thread();
      throw Error("cannot move the launching thread into its run's cgroup (" + path() + ")",
                  "check that the run's cgroup exists and its tasks file is writable", err);
    }
  }

  void leave_calling_thread() noexcept override {
    for (auto& hop : hops_) {
      if (move_self(hop.back.get())) continue;
      // The origin went away meanwhile: the run's parent cgroup is ours and always there.
      try {
        if (move_self(open_tasks(plan_.v1_parents.at(hop.ctrl)).get())) continue;
      } catch (...) {
      }
      static constexpr char kMsg[] = "sandboxrun: cannot move the launching thread out of the run's cgroup\n";
      [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
      std::abort();
    }
    hops_.clear();
  }

  void add_process(pid_t pid) override {
    for (const auto& d : dirs_) d->add_process(pid);
  }

  std::string path() const override {
    std::string out;
    for (const auto& d : dirs_) out += (out.empty() ? "" : " ") + d->path();
    return out;
  }

  std::vector<std::string> degradations() const override { return degradations_; }

  CgroupUsage sample() override {
    CgroupUsage u = read_v1_usage(memory_->fd(), pids_->fd(), cpuacct_ ? cpuacct_->fd() : -1);
    if (unified_cpu_stat_)
      u.cpu_usec = keyed_value(read_ctl(unified_->fd(), "cpu.stat").value_or(""), "usage_usec").value_or(0);
    peaks_.update(u);
    return u;
  }

  void kill_all() noexcept override {
    // Once seen empty after a kill, it stays empty: only the launching thread ever enters it
    // (enter_calling_thread, which clears this), and nothing is left inside to fork.
    if (emptied_) return;
    std::vector<const CgroupDir*> all;
    for (const auto& d : dirs_) all.push_back(d.get());
    if (unified_ && unified_has_kill_ && unified_->cgroup_kill() && wait_empty(all, kKillBudget)) {
      emptied_ = true;
      return;
    }
    if (freezer_ && freezer_->populated()) freeze_and_kill();
    emptied_ = kill_until_empty(all, kKillBudget);
  }

 private:
  // One directory per hierarchy; `ctrl` names a v1 hierarchy the launching thread enters.
  CgroupDir* add(const std::string& parent, const std::string& name, bool v2, const char* ctrl = nullptr) {
    ensure_dir(parent);
    dirs_.push_back(std::make_unique<CgroupDir>(parent, name, v2));
    if (ctrl) hierarchies_.emplace_back(ctrl, dirs_.back().get());
    return dirs_.back().get();
  }

  void apply_limits(const Limits& limits) {
    const std::string& mdir = memory_->path();
    if (limits.memory_bytes) {
      // On a fresh cgroup both limits are unlimited: lower memory first, then memsw (the
      // kernel requires memsw >= memory at every step). Equal values mean no swap at all.
      std::string bytes = std::to_string(limits.memory_bytes);
      write_ctl(memory_->fd(), mdir, "memory.limit_in_bytes", bytes);
      if (has_ctl(memory_->fd(), "memory.memsw.limit_in_bytes")) {
        write_ctl(memory_->fd(), mdir, "memory.memsw.limit_in_bytes", bytes);
      } else {
        write_ctl(memory_->fd(), mdir, "memory.swappiness", "0");
        degradations_.emplace_back("memory.memsw is missing in " + mdir +
                                   ": swap is kept out by swappiness 0 only (boot with swapaccount=1)");
      }
      // v1 charges TCP buffers to a separate counter, limited only when asked: unlimited, one
      // run could queue gigabytes on loopback sockets outside mem_limit and push every TCP
      // socket on the host past tcp_mem (v2 charges them to memory.current).
      if (has_ctl(memory_->fd(), "memory.kmem.tcp.limit_in_bytes"))
        write_ctl(memory_->fd(), mdir, "memory.kmem.tcp.limit_in_bytes", bytes);
      else
        degradations_.emplace_back("memory.kmem.tcp is missing in " + mdir + ": TCP buffer memory is not limited");
    }
    write_ctl(pids_->fd(), pids_->path(), "pids.max", limits.pids ? std::to_string(limits.pids) : "max");
    int64_t quota = cpu_quota_us(limits.cpus);
    if (cpu_) {
      write_ctl(cpu_->fd(), cpu_->path(), "cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
      write_ctl(cpu_->fd(), cpu_->path(), "cpu.cfs_quota_us", std::to_string(quota));
    } else if (quota > 0) {
      degradations_.emplace_back("no cgroup v1 cpu hierarchy: cpu_count is not enforced (mount the cpu controller)");
    }
  }

  // Frozen tasks cannot fork or exit, so every pid read is still the task we mean to kill;
  // SIGKILL stays pending on them until the thaw.
  void freeze_and_kill() noexcept {
    try {
      write_ctl(freezer_->fd(), freezer_->path(), "freezer.state", "FROZEN");
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
      while (read_ctl(freezer_->fd(), "freezer.state").value_or("").rfind("FROZEN", 0) != 0 &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (pid_t pid : freezer_->pids()) ::kill(pid, SIGKILL);
    } catch (const Error&) {
    }
    try {
      write_ctl(freezer_->fd(), freezer_->path(), "freezer.state", "THAWED");
    } catch (const Error&) {
    }
  }

  // A v1 hierarchy the launching thread passes through: its run dir's and its origin's tasks.
  struct Hop {
    std::string ctrl;
    UniqueFd into;
    UniqueFd back;
  };

  Plan plan_;
  // Owners of the directories; destroyed after ~CgroupV1's kill_all(), each removing its dir.
  std::vector<std::unique_ptr<CgroupDir>> dirs_;
  std::vector<std::pair<std::string, CgroupDir*>> hierarchies_;  // the v1 ones, by controller
  std::vector<Hop> hops_;  // while the calling thread is inside
  CgroupDir* unified_ = nullptr;
  bool unified_has_kill_ = true;
  bool unified_cpu_stat_ = false;  // the twin's cpu.stat counts the CPU time
  bool emptied_ = false;  // kill_all saw every directory empty
  CgroupDir* memory_ = nullptr;
  CgroupDir* pids_ = nullptr;
  CgroupDir* cpu_ = nullptr;
  CgroupDir* cpuacct_ = nullptr;
  CgroupDir* freezer_ = nullptr;
  std::vector<std::string> degradations_;
  PeakTracker peaks_;
};

}  // namespace

CgroupUsage read_v1_usage(int memory_fd, int pids_fd, int cpuacct_fd) noexcept {
  CgroupUsage u;
  auto num = [](int fd, const char* file) { return fd < 0 ? 0 : parse_u64(read_ctl(fd, file).value_or("")).value_or(0); };
  u.memory_current = num(memory_fd, "memory.usage_in_bytes");
  u.memory_peak = num(memory_fd, "memory.max_usage_in_bytes");
  u.cpu_usec = num(cpuacct_fd, "cpuacct.usage") / 1000;  // ns
  u.pids_current = num(pids_fd, "pids.current");
  u.pids_peak = num(pids_fd, "pids.peak");
  // oom_kill in memory.oom_control: Linux >= 4.13.
  u.oom_kills = keyed_value(read_ctl(memory_fd, "memory.oom_control").value_or(""), "oom_kill").value_or(0);
  u.pids_max_hits = keyed_value(read_ctl(pids_fd, "pids.events").value_or(""), "max").value_or(0);
  return u;
}

std::unique_ptr<Cgroup> make_v1_cgroup(const Plan& plan, const std::string& name, const Limits& limits,
                                       const V1Options& options) {
  return std::make_unique<CgroupV1>(plan, name, limits, options);
}

}  // namespace sandboxrun::cgroup_detail
