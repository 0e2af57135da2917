// cgroup v2 backend: one directory per run under the planned parent, limits through
// memory.max / memory.swap.max / pids.max / cpu.max, placement by CLONE_INTO_CGROUP, kill by
// cgroup.kill (fallback: cgroup.freeze + kill loop).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <thread>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cgroup_detail {

namespace {

std::string enable_line(int dirfd, const std::vector<std::string>& wanted) {
  auto enabled = split_words(read_ctl(dirfd, "cgroup.subtree_control").value_or(""));
  std::string line;
  for (const auto& c : wanted)
    if (std::find(enabled.begin(), enabled.end(), c) == enabled.end()) line += (line.empty() ? "+" : " +") + c;
  return line;
}

UniqueFd open_dir(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_errno("cannot open cgroup " + path);
  return fd;
}

// Moves every process of `dir` into dir/kLauncherLeaf (systemd's advice for delegated
// subtrees that need controllers). New processes may appear while we move, so repeat.
void move_into_leaf(const std::string& dir) {
  std::string leaf = dir + "/" + kLauncherLeaf;
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("cannot create " + leaf);
  UniqueFd from = open_dir(dir);
  UniqueFd to = open_dir(leaf);
  for (int round = 0; round < 100; ++round) {
    auto pids = parse_pids(read_ctl(from.get(), "cgroup.procs").value_or(""));
    if (pids.empty()) return;
    for (pid_t pid : pids) {
      try {
        write_ctl(to.get(), leaf, "cgroup.procs", std::to_string(pid));
      } catch (const Error& e) {
        if (e.sys_errno() != ESRCH) throw;  // exited meanwhile
      }
    }
  }
  throw Error("cannot empty " + dir + " into " + leaf + ": processes keep appearing",
              "set cgroup.parent to a delegated cgroup without processes");
}

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(const Plan& plan, const std::string& name, const Limits& limits)
      : dir_(std::make_unique<CgroupDir>(plan.v2_parent, name, true)) {
    apply_v2_limits(dir_->fd(), dir_->path(), limits, degradations_);
  }
  ~CgroupV2() override {
    // Normally empty by now (pid 1 reaped, and its pid namespace with it): one rmdir. A
    // populated cgroup refuses it, and is emptied first.
    if (!dir_->remove_if_empty()) kill_all();
  }

  std::string backend() const override { return "v2"; }
  int clone_into_fd() const override { return dir_->fd(); }
  // CLONE_INTO_CGROUP alone places the child.
  void enter_calling_thread() override {}
  void leave_calling_thread() noexcept override {}
  void add_process(pid_t pid) override { dir_->add_process(pid); }
  std::string path() const override { return dir_->path(); }
  std::vector<std::string> degradations() const override { return degradations_; }

  CgroupUsage sample() override {
    CgroupUsage u = read_v2_usage(dir_->fd());
    peaks_.update(u);
    return u;
  }

  void kill_all() noexcept override {
    if (!dir_->populated()) return;
    if (dir_->cgroup_kill() && wait_empty({dir_.get()}, kKillBudget)) return;
    // Before Linux 5.14: freeze so nothing forks between reading cgroup.procs and killing
    // (SIGKILL still reaches frozen v2 tasks), then thaw so the kills complete.
    bool frozen = false;
    try {
      if (has_ctl(dir_->fd(), "cgroup.freeze")) {
        write_ctl(dir_->fd(), dir_->path(), "cgroup.freeze", "1");
        frozen = true;
      }
    } catch (const Error&) {
    }
    kill_until_empty({dir_.get()}, std::chrono::milliseconds(100));
    if (frozen) {
      try {
        write_ctl(dir_->fd(), dir_->path(), "cgroup.freeze", "0");
      } catch (const Error&) {
      }
    }
    kill_until_empty({dir_.get()}, kKillBudget);
  }

 private:
  std::unique_ptr<CgroupDir> dir_;
  std::vector<std::string> degradations_;
  PeakTracker peaks_;
};

}  // namespace

int64_t cpu_quota_us(double cpus) {
  if (!(cpus > 0) || !std::isfinite(cpus)) return -1;
  // The kernel refuses quotas under 1 ms.
  return std::max<int64_t>(1000, std::llround(cpus * static_cast<double>(kCpuPeriodUs)));
}

std::string v2_cpu_max(double cpus) {
  int64_t q = cpu_quota_us(cpus);
  return (q < 0 ? std::string("max") : std::to_string(q)) + " " + std::to_string(kCpuPeriodUs);
}

void apply_v2_limits(int dirfd, const std::string& dir, const Limits& limits,
                     std::vector<std::string>& degradations) {
  write_ctl(dirfd, dir, "memory.max", limits.memory_bytes ? std::to_string(limits.memory_bytes) : "max");
  if (has_ctl(dirfd, "memory.swap.max"))
    write_ctl(dirfd, dir, "memory.swap.max", "0");
  else if (limits.memory_bytes)
    degradations.emplace_back("memory.swap.max is missing in " + dir +
                              ": swap is not limited (enable swap accounting: boot with swapaccount=1)");
  write_ctl(dirfd, dir, "pids.max", limits.pids ? std::to_string(limits.pids) : "max");
  if (has_ctl(dirfd, "cpu.max"))
    write_ctl(dirfd, dir, "cpu.max", v2_cpu_max(limits.cpus));
  else if (cpu_quota_us(limits.cpus) > 0)
    degradations.emplace_back("the cpu controller is not available in " + dir +
                              ": cpu_count is not enforced (enable +cpu in the parent's cgroup.subtree_control)");
}

CgroupUsage read_v2_usage(int dirfd) noexcept {
  CgroupUsage u;
  auto num = [&](const char* file) { return parse_u64(read_ctl(dirfd, file).value_or("")).value_or(0); };
  auto keyed = [&](const char* file, const char* key) {
    return keyed_value(read_ctl(dirfd, file).value_or(""), key).value_or(0);
  };
  u.memory_current = num("memory.current");
  u.memory_peak = num("memory.peak");  // Linux >= 5.19; else 0 and the samples make the peak
  u.cpu_usec = keyed("cpu.stat", "usage_usec");
  u.pids_current = num("pids.current");
  u.pids_peak = num("pids.peak");  // Linux >= 6.1
  u.oom_kills = keyed("memory.events", "oom_kill");
  u.pids_max_hits = keyed("pids.events", "max");
  return u;
}

void prepare_v2_parent(const Plan& plan) {
  std::vector<std::string> wanted = plan.controllers;
  UniqueFd parent;
  if (plan.v2_parent_is_own) {
    // Delegated to us: the levels above are not ours, and they already offer the controllers.
    parent = open_dir(plan.v2_parent);
  } else {
    // Walk down from the mount, enabling the controllers at each level (so the next one is
    // offered them) and creating the levels that are missing.
    std::filesystem::path rel = std::filesystem::path(plan.v2_parent).lexically_relative(plan.v2_mount);
    std::string dir = plan.v2_mount;
    UniqueFd fd = open_dir(dir);
    for (const auto& part : rel) {
      if (part == ".") continue;
      if (auto line = enable_line(fd.get(), wanted); !line.empty())
        write_ctl(fd.get(), dir, "cgroup.subtree_control", line);
      dir += "/" + part.string();
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("cannot create cgroup " + dir);
      fd = open_dir(dir);
    }
    parent = std::move(fd);
  }
  std::string line = enable_line(parent.get(), wanted);
  if (line.empty()) return;
  try {
    write_ctl(parent.get(), plan.v2_parent, "cgroup.subtree_control", line);
  } catch (const Error& e) {
    // EBUSY: the no-internal-processes rule; our own cgroup still holds us (and maybe the rest
    // of our service). Move them into a leaf, then the parent may have controlled children.
    if (e.sys_errno() != EBUSY || !plan.v2_parent_is_own)
      throw Error(std::string(e.what()),
                  plan.v2_parent + " holds processes, so it cannot enable controllers for children "
                  "(set cgroup.parent to a delegated cgroup without processes)");
    move_into_leaf(plan.v2_parent);
    write_ctl(parent.get(), plan.v2_parent, "cgroup.subtree_control", line);
  }
}

std::unique_ptr<Cgroup> make_v2_cgroup(const Plan& plan, const std::string& name, const Limits& limits) {
  return std::make_unique<CgroupV2>(plan, name, limits);
}

}  // namespace sandboxrun::cgroup_detail
