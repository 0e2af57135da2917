// Control-file I/O relative to a directory fd, the CgroupDir RAII owner and the kill loop.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <thread>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cgroup_detail {

namespace {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Short sleeps first (a killed task is gone within ~100 us), longer ones for slow exits.
void backoff(int round) noexcept {
  std::this_thread::sleep_for(std::chrono::microseconds(round < 20 ? 100 : round < 60 ? 1000 : 10000));
}

}  // namespace

std::optional<std::string> read_ctl(int dirfd, const std::string& name) noexcept {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return std::nullopt;
  try {
    return read_fd(fd.get(), SIZE_MAX, name);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void write_ctl(int dirfd, const std::string& dir, const std::string& name, const std::string& value) {
  // O_TRUNC is what a shell's `echo >` does: harmless on cgroupfs, needed on a fake tree.
  UniqueFd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) throw_errno("cannot open " + dir + "/" + name + " for writing");
  // One write(): cgroupfs parses each write as a whole value.
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) throw_errno("cannot write '" + value + "' to " + dir + "/" + name);
}

bool has_ctl(int dirfd, const std::string& name) noexcept {
  return ::faccessat(dirfd, name.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

std::optional<uint64_t> parse_u64(std::string_view text) noexcept {
  text = trim(text);
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> keyed_value(std::string_view text, std::string_view key) noexcept {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ')
      return parse_u64(line.substr(key.size() + 1));
  }
  return std::nullopt;
}

std::vector<pid_t> parse_pids(std::string_view text) {
  std::vector<pid_t> pids;
  for (const auto& w : split_words(text)) {
    if (auto v = parse_u64(w); v && *v > 0) pids.push_back(static_cast<pid_t>(*v));
  }
  return pids;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n' && text[j] != '\t') ++j;
    if (j > i) words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

CgroupDir::CgroupDir(const std::string& parent, const std::string& name, bool v2)
    : path_(parent + "/" + name), v2_(v2) {
  if (::mkdir(path_.c_str(), 0755) != 0) {
    removed_ = true;  // not ours: never rmdir what we did not create
    throw_errno("cannot create cgroup " + path_);
  }
  fd_.reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd_) {
    int err = errno;
    ::rmdir(path_.c_str());
    removed_ = true;
    throw_errno(err, "cannot open cgroup " + path_);
  }
}

CgroupDir::~CgroupDir() {
  if (removed_) return;
  if (populated()) kill_until_empty({this}, kKillBudget);
  remove();
}

void CgroupDir::add_process(pid_t pid) { write_ctl(fd(), path_, "cgroup.procs", std::to_string(pid)); }

std::vector<pid_t> CgroupDir::pids() const noexcept {
  try {
    auto text = read_ctl(fd(), "cgroup.procs");
    return text ? parse_pids(*text) : std::vector<pid_t>{};
  } catch (...) {
    return {};
  }
}

bool CgroupDir::populated() const noexcept {
  if (v2_) {
    if (auto events = read_ctl(fd(), "cgroup.events")) {
      if (auto p = keyed_value(*events, "populated")) return *p != 0;
    }
  }
  return !pids().empty();
}

bool CgroupDir::cgroup_kill() const noexcept {
  if (!v2_) return false;
  UniqueFd fd(::openat(fd_.get(), "cgroup.kill", O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  return fd && ::write(fd.get(), "1", 1) == 1;
}

bool CgroupDir::remove() noexcept {
  if (removed_) return true;
  // EBUSY: the last tasks are still leaving (exit is asynchronous to SIGKILL delivery).
  auto deadline = std::chrono::steady_clock::now() + kKillBudget;
  for (int round = 0;; ++round) {
    if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) {
      removed_ = true;
      fd_.reset();
      return true;
    }
    if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) return false;
    backoff(round);
  }
}

bool CgroupDir::remove_if_empty() noexcept {
  if (removed_ || ::rmdir(path_.c_str()) == 0 || errno == ENOENT) {
    removed_ = true;
    fd_.reset();
  }
  return removed_;
}

bool kill_until_empty(const std::vector<const CgroupDir*>& dirs, std::chrono::milliseconds budget) noexcept {
  auto deadline = std::chrono::steady_clock::now() + budget;
  for (int round = 0;; ++round) {
    bool any = false;
    for (const auto* d : dirs) {
      for (pid_t pid : d->pids()) {
        any = true;
        ::kill(pid, SIGKILL);
      }
    }
    if (!any) {
      bool populated = false;
      for (const auto* d : dirs) populated = populated || d->populated();
      if (!populated) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    backoff(round);
  }
}

bool wait_empty(const std::vector<const CgroupDir*>& dirs, std::chrono::milliseconds budget) noexcept {
  auto deadline = std::chrono::steady_clock::now() + budget;
  // A v2 cgroup.events file signals POLLPRI when "populated" changes: sleep on it, not blindly.
  UniqueFd events;
  for (const auto* d : dirs)
    if (d->v2() && !events) events.reset(::openat(d->fd(), "cgroup.events", O_RDONLY | O_CLOEXEC));
  for (int round = 0;; ++round) {
    bool populated = false;
    for (const auto* d : dirs) populated = populated || d->populated();
    if (!populated) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    if (events) {
      // The kernel sends at most one cgroup.events notification per 10 ms per file and delays
      // the next one to the end of that window: a cgroup that empties within 10 ms of its last
      // change (a short run, a kill right after the clone) would sleep out the window. Wake
      // early on the event, else re-read after a short, growing interval.
      pollfd p{events.get(), POLLPRI, 0};
      const auto step = std::chrono::microseconds(50) * (int64_t{1} << std::min(round, 8));
      const auto wait = std::min<std::chrono::nanoseconds>({deadline - now, step, std::chrono::milliseconds(10)});
      const timespec ts{0, static_cast<long>(wait.count())};
      ::ppoll(&p, 1, &ts, nullptr);
      char buf[256];
      (void)!::pread(events.get(), buf, sizeof buf, 0);  // re-arm
    } else {
      backoff(round);
    }
  }
}

}  // namespace sandboxrun::cgroup_detail
