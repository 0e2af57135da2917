// cgroup.mode enclosing: one run per container (a Kubernetes Job, `podman run`). The container's
// cgroup is the run's: sandboxrun reads its limits and counters and never writes to cgroupfs
// (a container's is read-only). Safe only while that cgroup holds nothing but this launcher,
// the processes that started it and the container's init, so that is checked; limits looser
// than the run's are refused, but for pids: Kubernetes sets pids.max on the pod's cgroup, which
// a container's cgroup namespace hides, and then the sandbox user's RLIMIT_NPROC bounds the run
// (process_limit()).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cgroup_detail {

namespace {

// v1 reports "no limit" as a page-rounded LONG_MAX.
constexpr uint64_t kV1Unlimited = uint64_t{1} << 62;

std::optional<uint64_t> limit_value(const std::string& dir, const char* file, bool v1) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  auto v = parse_u64(read_ctl(fd.get(), file).value_or(""));  // "max", "-1", missing: none
  if (v && v1 && *v >= kV1Unlimited) return std::nullopt;
  return v;
}

// The tightest (smallest) value `read` gives from `dir` up to the mount point (a parent's limit
// binds its children); `at` gets the directory that set it.
template <class T, class Read>
std::optional<T> tightest_up(const std::string& dir, const std::string& mount, Read read, std::string* at = nullptr) {
  std::optional<T> best;
  std::filesystem::path p(dir);
  for (int depth = 0; depth < 64; ++depth) {
    if (std::optional<T> v = read(p.string()); v && (!best || *v < *best)) {
      best = v;
      if (at) *at = p.string();
    }
    if (p.string().size() <= mount.size() || !p.has_parent_path() || p == p.parent_path()) break;
    p = p.parent_path();
  }
  return best;
}

// The tightest value of `file`; `at` names the file that set it.
std::optional<uint64_t> tightest(const std::string& dir, const std::string& mount, const char* file, bool v1,
                                 std::string* at) {
  std::string where;
  auto v = tightest_up<uint64_t>(dir, mount, [&](const std::string& d) { return limit_value(d, file, v1); }, &where);
  if (v && at) *at = (std::filesystem::path(where) / file).string();
  return v;
}

std::optional<double> cpus_at(const std::string& dir, bool v1) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  if (!v1) {
    auto words = split_words(read_ctl(fd.get(), "cpu.max").value_or(""));
    auto quota = words.size() == 2 ? parse_u64(words[0]) : std::nullopt;
    auto period = words.size() == 2 ? parse_u64(words[1]) : std::nullopt;
    if (!quota || !period || *period == 0) return std::nullopt;
    return static_cast<double>(*quota) / static_cast<double>(*period);
  }
  auto quota = parse_u64(read_ctl(fd.get(), "cpu.cfs_quota_us").value_or(""));  // -1: none
  auto period = parse_u64(read_ctl(fd.get(), "cpu.cfs_period_us").value_or(""));
  if (!quota || !period || *period == 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::string dir_for(const Plan& plan, const char* ctrl) {
  auto it = plan.enclosing_dirs.find(plan.version == "v2" ? "v2" : ctrl);
  return it == plan.enclosing_dirs.end() ? std::string() : it->second;
}

std::string mount_for(const Plan& plan, const char* ctrl) {
  auto it = plan.enclosing_mounts.find(plan.version == "v2" ? "v2" : ctrl);
  return it == plan.enclosing_mounts.end() ? std::string() : it->second;
}

// Every process in `dir` and the cgroups below it (a container may nest its own).
void collect_pids(const std::string& dir, int depth, std::vector<pid_t>& out) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return;
  auto pids = parse_pids(read_ctl(fd.get(), "cgroup.procs").value_or(""));
  out.insert(out.end(), pids.begin(), pids.end());
  if (depth >= 8) return;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_directory(ec)) collect_pids(e.path().string(), depth + 1, out);
}

std::string comm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name.empty() ? "?" : name;
}

bool host_has_swap() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  while (in >> key >> kb) {
    if (key == "SwapTotal:") return kb > 0;
    in.ignore(256, '\n');
  }
  return false;
}

std::string cpus_text(double cpus) {
  std::ostringstream s;
  s << cpus;
  return s.str();
}

class EnclosingCgroup final : public Cgroup {
 public:
  EnclosingCgroup(const Plan& plan, const Limits& limits, std::shared_ptr<std::atomic<bool>> busy)
      : plan_(plan), busy_(std::move(busy)) {
    if (busy_ && busy_->exchange(true))
      throw Error("cgroup.mode enclosing holds one sandbox at a time, and this launcher's is in use",
                  "wait for the running sandbox (or session) to end, or use cgroup.mode: per_run with a "
                  "writable cgroup for concurrent runs")
          .as(ErrorKind::limits);
    try {
      check_alone(plan_, ::getpid());
      process_limit_ = check_enclosing_limits(read_enclosing_limits(plan_), limits, host_has_swap(), path(),
                                              degradations_);
      for (const char* ctrl : {"memory", "pids", "cpuacct"}) {
        std::string dir = dir_for(plan_, ctrl);
        if (dir.empty() || fds_.count(dir)) continue;
        UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!fd) throw_errno("cannot open the enclosing cgroup " + dir);
        fds_.emplace(dir, std::move(fd));
      }
      baseline_ = read_usage();
    } catch (...) {
      if (busy_) busy_->store(false);
      throw;
    }
  }
  ~EnclosingCgroup() override {
    kill_all();
    if (busy_) busy_->store(false);
  }

  std::string backend() const override { return "enclosing"; }
  int clone_into_fd() const override { return -1; }  // a child of ours starts in our cgroup
  void enter_calling_thread() override {}
  void leave_calling_thread() noexcept override {}
  void add_process(pid_t) override {}
  std::string path() const override {
    std::string out;
    for (const auto& [ctrl, dir] : plan_.enclosing_dirs)
      if (out.find(dir) == std::string::npos) out += (out.empty() ? "" : " ") + dir;
    return out;
  }
  std::vector<std::string> degradations() const override { return degradations_; }
  bool encloses_launcher() const override { return true; }
  uint64_t process_limit() const override { return process_limit_; }

  // The container's counters since this run's cgroup was taken: counts (OOM kills, refused
  // forks, CPU time) from the baseline; levels and peaks are the container's, launcher included.
  CgroupUsage sample() override {
    CgroupUsage u = read_usage();
    u.cpu_usec -= std::min(u.cpu_usec, baseline_.cpu_usec);
    u.oom_kills -= std::min(u.oom_kills, baseline_.oom_kills);
    u.pids_max_hits -= std::min(u.pids_max_hits, baseline_.pids_max_hits);
    peaks_.update(u);
    return u;
  }

  // Every descendant of this launcher in the cgroup: the sandbox and whatever it left. Never the
  // launcher, its ancestors or the container's init.
  void kill_all() noexcept override {
    const pid_t self = ::getpid();
    const auto deadline = std::chrono::steady_clock::now() + kKillBudget;
    for (;;) {
      std::vector<pid_t> pids;
      try {
        collect_pids(dir_for(plan_, "pids"), 0, pids);
      } catch (...) {
        return;
      }
      bool any = false;
      for (pid_t pid : pids)
        if (pid != self && descends_from(pid, self)) {
          ::kill(pid, SIGKILL);
          any = true;
        }
      if (!any || std::chrono::steady_clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  CgroupUsage read_usage() const noexcept {
    auto fd = [&](const char* ctrl) {
      auto it = fds_.find(dir_for(plan_, ctrl));
      return it == fds_.end() ? -1 : it->second.get();
    };
    if (plan_.version == "v2") return read_v2_usage(fd("memory"));
    return read_v1_usage(fd("memory"), fd("pids"), fd("cpuacct"));
  }

  Plan plan_;
  std::shared_ptr<std::atomic<bool>> busy_;
  std::map<std::string, UniqueFd> fds_;  // directory -> fd
  CgroupUsage baseline_;
  PeakTracker peaks_;
  std::vector<std::string> degradations_;
  uint64_t process_limit_ = 0;
};

}  // namespace

bool descends_from(pid_t pid, pid_t ancestor) noexcept {
  for (int depth = 0; depth < 4096 && pid > 1; ++depth) {
    auto st = read_proc_stat(pid);
    if (!st || st->state == 'Z' || st->state == 'X') return false;
    if (st->ppid == ancestor) return true;
    pid = st->ppid;
  }
  return false;
}

void check_alone(const Plan& plan, pid_t self) {
  std::vector<pid_t> allowed{self, 1};
  for (pid_t p = self; p > 1 && allowed.size() < 4096;) {
    auto st = read_proc_stat(p);
    if (!st) break;
    allowed.push_back(st->ppid);
    p = st->ppid;
  }
  std::vector<pid_t> pids;
  for (const char* ctrl : {"memory", "pids"}) collect_pids(dir_for(plan, ctrl), 0, pids);
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  std::string strangers;
  size_t count = 0;
  for (pid_t pid : pids) {
    if (std::find(allowed.begin(), allowed.end(), pid) != allowed.end()) continue;
    auto st = read_proc_stat(pid);
    if (!st || st->state == 'Z' || st->state == 'X') continue;  // exiting
    if (++count <= 5) strangers += " " + std::to_string(pid) + " (" + comm_of(pid) + ")";
  }
  if (count == 0) return;
  throw Error("cgroup.mode enclosing: the container's cgroup " + dir_for(plan, "memory") + " holds " +
                  std::to_string(count) + " other process" + (count == 1 ? "" : "es") + ":" + strangers +
                  " — its limits and counters would be shared with them",
              "run one sandboxrun (one run or one session) per container, started by the container's "
              "command, or use cgroup.mode: per_run with a writable cgroup")
      .as(ErrorKind::limits);
}

EnclosingLimits read_enclosing_limits(const Plan& plan) {
  EnclosingLimits e;
  const bool v1 = plan.version == "v1";
  const std::string mem = dir_for(plan, "memory");
  const std::string mem_mount = mount_for(plan, "memory");
  e.memory = tightest(mem, mem_mount, v1 ? "memory.limit_in_bytes" : "memory.max", v1, &e.memory_at);
  if (v1) {
    auto memsw = tightest(mem, mem_mount, "memory.memsw.limit_in_bytes", v1, nullptr);
    e.no_swap = e.memory && memsw && *memsw <= *e.memory;
  } else {
    auto swap = tightest(mem, mem_mount, "memory.swap.max", v1, nullptr);
    e.no_swap = swap && *swap == 0;
  }
  e.pids = tightest(dir_for(plan, "pids"), mount_for(plan, "pids"), "pids.max", v1, &e.pids_at);
  const std::string cpu = dir_for(plan, "cpu");
  if (!cpu.empty()) {
    UniqueFd fd(::open(cpu.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    e.cpu_controller = fd && has_ctl(fd.get(), v1 ? "cpu.cfs_quota_us" : "cpu.max");
    if (e.cpu_controller)
      e.cpus = tightest_up<double>(cpu, mount_for(plan, "cpu"), [v1](const std::string& d) { return cpus_at(d, v1); });
  }
  return e;
}

uint64_t check_enclosing_limits(const EnclosingLimits& e, const Limits& want, bool host_swap,
                                const std::string& where, std::vector<std::string>& degradations) {
  std::string looser;
  std::string fix;
  auto add = [&](const std::string& what, const std::string& k8s) {
    looser += (looser.empty() ? "" : "; ") + what;
    fix += (fix.empty() ? "" : ", ") + k8s;
  };
  if (want.memory_bytes && (!e.memory || *e.memory > want.memory_bytes))
    add("memory " + (e.memory ? format_size(*e.memory) + " (" + e.memory_at + ")" : std::string("unlimited")) +
            " > " + format_size(want.memory_bytes),
        "resources.limits.memory: " + std::to_string(want.memory_bytes >> 20) + "Mi (podman --memory " +
            std::to_string(want.memory_bytes >> 20) + "m)");
  else if (want.memory_bytes && host_swap && !e.no_swap)
    add("swap allowed beyond the memory limit on a host with swap",
        "no swap for the pod (Kubernetes' default NoSwap; podman --memory-swap equal to --memory)");
  if (want.cpus > 0 && e.cpu_controller && (!e.cpus || *e.cpus > want.cpus + 1e-9))
    add("cpu " + (e.cpus ? cpus_text(*e.cpus) : std::string("unlimited")) + " > " + cpus_text(want.cpus),
        "resources.limits.cpu: " + cpus_text(want.cpus) + " (podman --cpus " + cpus_text(want.cpus) + ")");
  if (!looser.empty())
    throw Error("cgroup.mode enclosing: the container's cgroup " + where + " is looser than this run's limits: " +
                    looser,
                "give the container " + fix + ", or run at a trust level whose limits the container meets")
        .as(ErrorKind::limits);
  if (want.cpus > 0 && !e.cpu_controller)
    degradations.push_back("the container's cgroup " + where +
                           " has no cpu controller: cpu_count is not enforced (give the container a cpu limit)");
  // pids: the cgroup's where it is tight enough, else the sandbox user's process count.
  if (want.pids && (!e.pids || *e.pids > want.pids)) return want.pids;
  return 0;
}

Plan plan_enclosing(const HostMounts& mounts, std::string_view self_cgroup) {
  Plan plan;
  auto offers = [](const std::string& dir, const char* c) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto list = split_words(fd ? read_ctl(fd.get(), "cgroup.controllers").value_or("") : "");
    return std::find(list.begin(), list.end(), c) != list.end();
  };
  if (mounts.v2) {
    auto own = own_cgroup(self_cgroup, "");
    auto dir = own ? dir_of(*mounts.v2, *own) : std::nullopt;
    if (dir && offers(*dir, "memory") && offers(*dir, "pids")) {
      plan.version = "v2";
      plan.enclosing = true;
      plan.controllers = {"memory", "pids"};
      if (offers(*dir, "cpu")) plan.controllers.emplace_back("cpu");
      plan.enclosing_dirs["v2"] = *dir;
      plan.enclosing_mounts["v2"] = mounts.v2->mountpoint;
      plan.detail = "enclosing cgroup (v2) " + *dir + ": one run per container, limits read from it";
      return plan;
    }
  }
  std::vector<std::string> missing;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    auto m = mounts.v1.find(c);
    auto own = own_cgroup(self_cgroup, c);
    auto dir = m != mounts.v1.end() && own ? dir_of(m->second, *own) : std::nullopt;
    if (!dir) {
      missing.emplace_back(c);
      continue;
    }
    plan.controllers.emplace_back(c);
    plan.enclosing_dirs[c] = *dir;
    plan.enclosing_mounts[c] = m->second.mountpoint;
  }
  if (!plan.enclosing_dirs.count("memory") || !plan.enclosing_dirs.count("pids")) {
    plan.controllers.clear();
    plan.enclosing_dirs.clear();
    plan.enclosing_mounts.clear();
    plan.detail = "cgroup.mode enclosing: this process's own memory and pids cgroups are not visible "
                  "(neither a cgroup2 mount offering them nor v1 hierarchies showing its cgroup; mount the "
                  "container's cgroupfs at /sys/fs/cgroup)";
    return plan;
  }
  plan.version = "v1";
  plan.enclosing = true;
  plan.v1_mounts = mounts.v1;
  plan.detail = "enclosing cgroup (v1) " + plan.enclosing_dirs.at("memory") +
                ": one run per container, limits read from it";
  return plan;
}

std::unique_ptr<Cgroup> make_enclosing_cgroup(const Plan& plan, const Limits& limits,
                                              std::shared_ptr<std::atomic<bool>> busy) {
  return std::make_unique<EnclosingCgroup>(plan, limits, std::move(busy));
}

}  // namespace sandboxrun::cgroup_detail
