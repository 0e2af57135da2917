// Run-cgroup naming (the owning launcher is in the name) and the sweep of cgroups left behind
// by launchers that died (kill -9) before they could remove them.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cgroup_detail {

namespace {

bool valid_run_id_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Kills what is left in a stale run cgroup and removes it; false when it could not be removed.
bool remove_stale(const std::string& parent, const std::string& name, bool v2) noexcept {
  std::string path = parent + "/" + name;
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return errno == ENOENT;  // a concurrent sweeper was faster
  if (v2) {
    UniqueFd kill_fd(::openat(dir.get(), "cgroup.kill", O_WRONLY | O_CLOEXEC));
    if (kill_fd) (void)!::write(kill_fd.get(), "1", 1);
  }
  auto deadline = std::chrono::steady_clock::now() + kKillBudget;
  for (;;) {
    auto procs = read_ctl(dir.get(), "cgroup.procs");
    std::vector<pid_t> pids;
    try {
      if (procs) pids = parse_pids(*procs);
    } catch (...) {
    }
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    if (pids.empty()) {
      if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
      if (errno != EBUSY) return false;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

std::optional<ProcStat> read_proc_stat(pid_t pid) noexcept {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[1024];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  // comm (field 2) may itself hold blanks and parentheses: count from the last ")".
  std::string_view text(buf, static_cast<size_t>(n));
  size_t paren = text.rfind(')');
  if (paren == std::string_view::npos || paren + 2 >= text.size()) return std::nullopt;
  auto fields = split_words(text.substr(paren + 2));  // fields[0] is field 3 (state)
  if (fields.size() < 20 || fields[0].empty()) return std::nullopt;
  auto start = parse_u64(fields[19]);
  auto ppid = parse_u64(fields[1]);
  if (!start || !ppid) return std::nullopt;
  return ProcStat{fields[0][0], static_cast<pid_t>(*ppid), *start};
}

std::optional<uint64_t> process_start_time(pid_t pid) noexcept {
  auto st = read_proc_stat(pid);
  if (!st || st->state == 'Z' || st->state == 'X') return std::nullopt;
  return st->start;
}

Owner self_owner() {
  Owner o;
  o.pid = ::getpid();
  auto start = process_start_time(o.pid);
  if (!start) throw Error("cannot read the start time of this process from /proc/self/stat",
                          "mount /proc");
  o.start = *start;
  return o;
}

bool owner_alive(const Owner& owner) noexcept {
  auto start = process_start_time(owner.pid);
  return start && *start == owner.start;
}

void validate_run_id(const std::string& run_id) {
  bool ok = !run_id.empty() && run_id.size() <= 128 && run_id != "." && run_id != "..";
  for (char c : run_id) ok = ok && valid_run_id_char(c);
  if (!ok)
    throw Error("invalid run id '" + run_id + "' for a cgroup name",
                "use 1 to 128 letters, digits, '.', '_' or '-'");
}

std::string run_dir_name(const std::string& run_id, const Owner& owner) {
  return run_id + "@" + std::to_string(owner.pid) + "." + std::to_string(owner.start);
}

std::optional<Owner> parse_run_dir_name(std::string_view name) noexcept {
  size_t at = name.rfind('@');
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  for (char c : name.substr(0, at))
    if (!valid_run_id_char(c)) return std::nullopt;
  std::string_view tag = name.substr(at + 1);
  size_t dot = tag.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto pid = parse_u64(tag.substr(0, dot));
  auto start = parse_u64(tag.substr(dot + 1));
  // parse_u64 trims blanks; a canonical name has none.
  if (!pid || !start || *pid == 0 || *pid > 0x3fffffff || tag.find(' ') != std::string_view::npos ||
      tag.find('\n') != std::string_view::npos)
    return std::nullopt;
  return Owner{static_cast<pid_t>(*pid), *start};
}

size_t sweep_stale(const std::vector<SweepParent>& parents, std::vector<std::string>* warnings) noexcept {
  size_t removed = 0;
  for (const auto& parent : parents) {
    // A cgroup directory's link count is 2 + its child cgroups (kernfs keeps it): at 2 there is
    // nothing to sweep, and one stat replaces listing every control file of the parent (a
    // single run's start swept six hierarchies that way, ~0.07 ms).
    struct stat st {};
    if (::stat(parent.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 2) continue;
    std::vector<std::string> stale;
    DIR* d = ::opendir(parent.path.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_type != DT_DIR) continue;
      auto owner = parse_run_dir_name(e->d_name);
      if (owner && !owner_alive(*owner)) stale.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (const auto& name : stale) {
      if (remove_stale(parent.path, name, parent.v2)) {
        ++removed;
      } else if (warnings) {
        try {
          warnings->push_back("cannot remove the stale cgroup " + parent.path + "/" + name +
                              " of a launcher that is gone: " + std::strerror(errno));
        } catch (...) {  // out of memory: the sweep stays best effort
        }
      }
    }
  }
  return removed;
}

}  // namespace sandboxrun::cgroup_detail
