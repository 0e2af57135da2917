// cgroup v1 backend (hybrid and legacy hosts): one directory per run in each of the memory,
// pids, cpu and cpuacct hierarchies; on hybrid hosts a twin in the controller-less cgroup2
// mount gives reliable placement accounting and cgroup.kill; otherwise the v1 freezer makes the
// kill loop race-free.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>


#include <cerrno>
#include <thread>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cgroup_detail {

namespace {

void ensure_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("cannot create cgroup " + path);
}

class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(const Plan& plan, const std::string& name, const Limits& limits, const V1Options& options) {
    if (options.use_unified && !plan.unified_parent.empty()) {
      // Best effort: limits do not depend on it, only the quality of kill_all does.
      try {
        ensure_dir(plan.unified_parent);
        unified_ = add(plan.unified_parent, name, true);
        if (!has_ctl(unified_->fd(), "cgroup.kill")) unified_has_kill_ = false;
      } catch (const Error&) {
        // No companion (no cgroup2 mount there, or not ours): kill_all falls back to the v1 loop.
      }
    }
    memory_ = add(plan.v1_parents.at("memory"), name, false);
    pids_ = add(plan.v1_parents.at("pids"), name, false);
    cpu_ = plan.v1_parents.count("cpu") ? add(plan.v1_parents.at("cpu"), name, false) : nullptr;
    if (plan.v1_parents.count("cpuacct")) {
      // cpu and cpuacct are often one hierarchy ("cpu,cpuacct"): then the cpu dir serves both.
      cpuacct_ = cpu_ && plan.v1_parents.at("cpuacct") == plan.v1_parents.at("cpu")
                     ? cpu_
                     : add(plan.v1_parents.at("cpuacct"), name, false);
    }
    if ((!unified_ || !unified_has_kill_) && options.use_freezer && plan.v1_parents.count("freezer"))
      freezer_ = add(plan.v1_parents.at("freezer"), name, false);
    apply_limits(limits);
  }

  ~CgroupV1() override { kill_all(); }

  std::string backend() const override { return "v1"; }
  // The v1 hierarchies need the pid written into each of them anyway.
  int clone_into_fd() const override { return -1; }

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
    CgroupUsage u;
    auto num = [](const CgroupDir* d, const char* file) {
      return d ? parse_u64(read_ctl(d->fd(), file).value_or("")).value_or(0) : 0;
    };
    u.memory_current = num(memory_, "memory.usage_in_bytes");
    u.memory_peak = num(memory_, "memory.max_usage_in_bytes");
    u.cpu_usec = num(cpuacct_, "cpuacct.usage") / 1000;  // ns
    u.pids_current = num(pids_, "pids.current");
    u.pids_peak = num(pids_, "pids.peak");
    // oom_kill in memory.oom_control: Linux >= 4.13.
    u.oom_kills = keyed_value(read_ctl(memory_->fd(), "memory.oom_control").value_or(""), "oom_kill").value_or(0);
    u.pids_max_hits = keyed_value(read_ctl(pids_->fd(), "pids.events").value_or(""), "max").value_or(0);
    peaks_.update(u);
    return u;
  }

  void kill_all() noexcept override {
    std::vector<const CgroupDir*> all;
    for (const auto& d : dirs_) all.push_back(d.get());
    if (unified_ && unified_has_kill_ && unified_->cgroup_kill() && wait_empty(all, kKillBudget)) return;
    if (freezer_ && freezer_->populated()) freeze_and_kill();
    kill_until_empty(all, kKillBudget);
  }

 private:
  CgroupDir* add(const std::string& parent, const std::string& name, bool v2) {
    ensure_dir(parent);
    dirs_.push_back(std::make_unique<CgroupDir>(parent, name, v2));
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

  // Owners of the directories; destroyed after ~CgroupV1's kill_all(), each removing its dir.
  std::vector<std::unique_ptr<CgroupDir>> dirs_;
  CgroupDir* unified_ = nullptr;
  bool unified_has_kill_ = true;
  CgroupDir* memory_ = nullptr;
  CgroupDir* pids_ = nullptr;
  CgroupDir* cpu_ = nullptr;
  CgroupDir* cpuacct_ = nullptr;
  CgroupDir* freezer_ = nullptr;
  std::vector<std::string> degradations_;
  PeakTracker peaks_;
};

}  // namespace

std::unique_ptr<Cgroup> make_v1_cgroup(const Plan& plan, const std::string& name, const Limits& limits,
                                       const V1Options& options) {
  return std::make_unique<CgroupV1>(plan, name, limits, options);
}

}  // namespace sandboxrun::cgroup_detail
