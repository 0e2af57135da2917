// Bandit bridge, and the runner shared with the Semgrep bridge: fork/exec without a shell,
// stdout and stderr read through poll() until a deadline, the whole process group killed when
// it passes.
#include "assess/assess_bandit.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "common/ascii.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::assess {

namespace {

constexpr size_t kMaxReport = 64u << 20;  // a JSON report for one file stays far below this
constexpr size_t kMaxStderr = 64u << 10;

// Owns a started child: kills its process group and reaps it unless it was reaped.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  // Non-blocking reap; true once the child has exited (status set).
  bool try_reap(int& status) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }

 private:
  pid_t pid_;
};

}  // namespace

std::optional<std::filesystem::path> find_executable(const std::string& command) {
  if (command.empty()) return std::nullopt;
  if (command.find('/') != std::string::npos) {
    if (::access(command.c_str(), X_OK) == 0) return std::filesystem::path(command);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t b = 0; b <= dirs.size();) {
    size_t e = dirs.find(':', b);
    if (e == std::string_view::npos) e = dirs.size();
    std::string dir(dirs.substr(b, e - b));
    if (dir.empty()) dir = ".";  // an empty PATH entry means the current directory
    const std::filesystem::path candidate = std::filesystem::path(dir) / command;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    b = e + 1;
  }
  return std::nullopt;
}

BanditResult parse_bandit_report(std::string_view text, const BanditSettings& settings) {
  BanditResult r;
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    r.notes.push_back("bandit output is not a JSON report; its findings are missing");
    return r;
  }
  std::map<std::string, int> per_test;  // test id -> score of its most severe finding
  if (auto it = doc.find("results"); it != doc.end() && it->is_array()) {
    for (const auto& res : *it) {
      if (!res.is_object()) continue;
      const std::string id = res.value("test_id", std::string("B000"));
      const std::string sev = ascii_lower(res.value("issue_severity", std::string("low")));
      const int line = res.value("line_number", 0);
      std::string msg = res.value("issue_text", std::string());
      msg += " (bandit " + res.value("test_name", std::string("?")) + ", confidence " +
             ascii_lower(res.value("issue_confidence", std::string("?"))) + ")";
      const int score = sev == "high" ? settings.score_high : sev == "medium" ? settings.score_medium : settings.score_low;
      int& best = per_test[id];
      best = std::max(best, score);
      r.findings.push_back(Finding{"bandit:" + id, sev == "high" || sev == "medium" ? sev : "low", line, std::move(msg)});
    }
  }
  if (auto it = doc.find("errors"); it != doc.end() && it->is_array()) {
    for (const auto& e : *it)
      if (e.is_object()) r.notes.push_back("bandit: " + e.value("reason", std::string("error")));
  }
  for (const auto& [id, s] : per_test) r.score += s;
  return r;
}

ToolRun run_tool(const std::vector<std::string>& argv_s, std::chrono::milliseconds timeout) {
  ToolRun run;
  std::vector<char*> argv;
  for (const auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  const pid_t pid = ::fork();
  if (pid < 0) {
    run.error = std::string("cannot start: ") + std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until execv.
    ::setpgid(0, 0);
    if (devnull) ::dup2(devnull.get(), 0);
    ::dup2(out.write.get(), 1);
    ::dup2(err.write.get(), 2);
    ::syscall(SYS_close_range, 3u, ~0u, 0u);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Child child(pid);
  out.write.reset();
  err.write.reset();

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto remaining_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  };
  char buf[65536];
  while (out.read || err.read) {
    const auto left = remaining_ms();
    if (left <= 0) break;
    pollfd fds[2];
    nfds_t n = 0;
    UniqueFd* owners[2];
    for (UniqueFd* f : {&out.read, &err.read})
      if (*f) {
        fds[n] = pollfd{f->get(), POLLIN, 0};
        owners[n++] = f;
      }
    int pr = ::poll(fds, n, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (pr < 0 && errno != EINTR) break;
    for (nfds_t i = 0; pr > 0 && i < n; ++i) {
      if (!fds[i].revents) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        owners[i]->reset();
        continue;
      }
      std::string& dst = owners[i] == &out.read ? run.out : run.err;
      const size_t cap = owners[i] == &out.read ? kMaxReport : kMaxStderr;
      if (dst.size() < cap) dst.append(buf, std::min(static_cast<size_t>(got), cap - dst.size()));
    }
  }
  while (!(run.exited = child.try_reap(run.status)) && remaining_ms() > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!run.exited) run.error = "timed out after " + std::to_string(timeout.count()) + " ms and was killed";
  return run;  // ~Child kills the process group and reaps it when it did not exit
}

std::string describe_failure(const ToolRun& run) {
  const std::string first = run.err.substr(0, run.err.find('\n'));
  return (WIFEXITED(run.status) ? "exit " + std::to_string(WEXITSTATUS(run.status))
                                : "signal " + std::to_string(WTERMSIG(run.status))) +
         (first.empty() ? "" : ": " + first);
}

BanditResult run_bandit(const std::filesystem::path& file, const BanditSettings& settings) {
  BanditResult none;
  auto exe = find_executable(settings.command);
  if (!exe) {
    none.notes.push_back("bandit not found ('" + settings.command + "' is not on PATH); built-in rules only");
    return none;
  }
  const ToolRun run = run_tool({exe->string(), "-f", "json", "-q", std::filesystem::absolute(file).string()}, settings.timeout);
  if (!run.exited) {
    none.notes.push_back("bandit " + run.error + "; built-in rules only");
    return none;
  }
  // Bandit exits 1 when it found issues, 0 when it found none.
  if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) > 1) {
    none.notes.push_back("bandit failed (" + describe_failure(run) + "); built-in rules only");
    return none;
  }
  return parse_bandit_report(run.out, settings);
}

}  // namespace sandboxrun::assess
