// Parent side: one poll loop over the sandbox's pipes, a sampling timer, the timeout and our own
// termination signals. Output is bounded in memory whatever the payload writes.
#include "monitor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>

#include "fd_passing.hpp"
#include "poll_set.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "seccomp_notify.hpp"

namespace sandboxrun::launch {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long writers that outlive pid 1 (or, with defer_teardown, the payload's status) get to
// finish: every one of them is dead or dying, the pipes only need to drain.
constexpr milliseconds kLinger{2000};

void merge_usage(CgroupUsage& acc, const CgroupUsage& now) {
  acc.memory_current = now.memory_current;
  acc.memory_peak = std::max({acc.memory_peak, now.memory_peak, now.memory_current});
  acc.cpu_usec = std::max(acc.cpu_usec, now.cpu_usec);
  acc.pids_current = now.pids_current;
  acc.pids_peak = std::max({acc.pids_peak, now.pids_peak, now.pids_current});
  acc.oom_kills = std::max(acc.oom_kills, now.oom_kills);
  acc.pids_max_hits = std::max(acc.pids_max_hits, now.pids_max_hits);
}

// Where pid 1 is blocked: the kernel's wait channel, syscall and stack, and its children.
std::string describe_stuck_setup(pid_t pid1) {
  std::string what = "the sandbox was still being set up when the timeout expired";
  auto first_line = [](const std::string& path) {
    std::string text;
    try {
      text = read_file(path);
    } catch (const Error&) {
      return std::string("?");
    }
    for (char& c : text)
      if (c == '\n') c = ' ';
    return text.substr(0, 300);
  };
  const std::string base = "/proc/" + std::to_string(pid1);
  what += "; pid 1: wchan " + first_line(base + "/wchan") + ", syscall " + first_line(base + "/syscall") +
          ", stack " + first_line(base + "/stack") + ", children " + first_line(base + "/task/" + std::to_string(pid1) + "/children");
  return what;
}

// One run's watch: each fd the sandbox talks through has a handler; a turn of the loop polls
// those that are open, runs the handlers of the ready ones, then reaps, times out and samples.
class Monitor {
 public:
  Monitor(const LaunchRequest& req, pid_t pid1, MonitorFds& fds, Cgroup* cgroup, RunOutcome& out,
          Clock::time_point started, const SignalGuard& signals)
      : req_(req), pid1_(pid1), fds_(fds), cgroup_(cgroup), out_(out), started_(started), signals_(signals),
        denied_(out.denied) {
    const auto& lim = req.spec.limits;
    const uint64_t cut = req.lifetime_s ? UINT64_MAX : lim.output_bytes;
    streams_[0] = {fds.stdout_read.get(), req.capture ? -1 : req.stdout_fd, &out.stdout_data, &out.stdout_truncated,
                   cut};
    streams_[1] = {fds.stderr_read.get(), req.capture ? -1 : req.stderr_fd, &out.stderr_data, &out.stderr_truncated,
                   cut};
    deadline_ = started + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(req.lifetime_s.value_or(lim.timeout_s)));
    // monitoring.enabled: false: no periodic samples; the usage is still read when the run ends.
    next_sample_ = req.spec.monitoring ? Clock::now() + req.spec.monitor_interval : Clock::time_point::max();
    if (fds.stdin_write) {
      in_.dst = &fds.stdin_write;
      if (req.stdin_data) {
        in_.pending = *req.stdin_data;
        if (in_.pending.empty()) in_.finish();  // nothing to write: EOF at once
      } else {
        in_.src = req.stdin_fd;
        in_.src_open = true;
      }
    }
  }

  // Runs until the sandbox ends; fills `out`. See monitor_sandbox.
  bool run() {
    while (!done()) {
      arm();
      pid_ready_ = false;
      if (!poll_.dispatch(timeout_ms(Clock::now()))) break;
      if (waiting_for_pid1() && (pid_ready_ || !fds_.pidfd)) reap_if_gone();
      const auto now = Clock::now();
      if (waiting_for_pid1() && now >= deadline_) time_out();
      if (now >= next_sample_) {
        if (!pid1_exited_) sample();
        next_sample_ = now + req_.spec.monitor_interval;
      }
    }
    drain_control();
    finish();
    return pid1_exited_;
  }

 private:
  // defer_teardown: once pid 1 has sent the payload's status the run is over but for its output,
  // and pid 1 (on its way out) is left to the caller: never reaped here, whenever it exits, so
  // that the caller always gets it. Its exit kills whatever still holds the output open.
  bool payload_done() const { return req_.defer_teardown && status_known_ && !pid1_exited_ && setup_error_.empty(); }
  bool waiting_for_pid1() const { return !pid1_exited_ && !payload_done(); }

  bool done() {
    const bool streams_open = streams_[0].open || streams_[1].open;
    if (pid1_exited_ && !streams_open) return true;
    // The setup's last word (an execve error) and the seccomp listener arrive before their EOF;
    // as after pid 1's exit, a writer that lingers gets kLinger.
    if (payload_done() && ((!streams_open && !fds_.error_read && !fds_.notify_read) ||
                           Clock::now() - status_seen_ > kLinger)) {
      exit_seen_ = status_seen_;
      if (in_.active()) in_.finish();
      sample();
      sampled_at_exit_ = true;
      return true;
    }
    return pid1_exited_ && Clock::now() - exit_seen_ > kLinger;
  }

  // This turn's fds, in the order their handlers must run: the payload's execve (EOF on the
  // error pipe) precedes its exit (the status), or a wake-up that brings both would time the run
  // as ending before it began.
  void arm() {
    poll_.clear();
    if (in_.wants_read()) poll_.add(in_.src, POLLIN, [this](short) { in_.read_some(); });
    else if (in_.wants_write()) poll_.add(in_.dst->get(), POLLOUT, [this](short) { in_.write_some(); });
    for (OutputStream& s : streams_)
      if (s.open) poll_.add(s.fd, POLLIN, [&s](short) { s.pump(); });
    if (fds_.error_read) poll_.add(fds_.error_read.get(), POLLIN, [this](short) { on_setup_word(); });
    if (fds_.status_read) poll_.add(fds_.status_read.get(), POLLIN, [this](short) { on_status(); });
    if (fds_.control_read) poll_.add(fds_.control_read.get(), POLLIN, [this](short) { on_control(); });
    if (fds_.notify_read) poll_.add(fds_.notify_read.get(), POLLIN, [this](short) { on_listener(); });
    if (const int lfd = denied_.poll_fd(Clock::now()); lfd >= 0)
      poll_.add(lfd, POLLIN, [this](short revents) { denied_.handle(revents); });
    if (signals_.fd() >= 0) poll_.add(signals_.fd(), POLLIN, [this](short) { on_signal(); });
    if (req_.cancel_fd >= 0 && !cancelled_) poll_.add(req_.cancel_fd, POLLIN, [this](short) { on_cancel(); });
    if (waiting_for_pid1() && fds_.pidfd) poll_.add(fds_.pidfd.get(), POLLIN, [this](short) { pid_ready_ = true; });
  }

  int timeout_ms(Clock::time_point now) const {
    auto wake = std::min(deadline_, next_sample_);
    if (denied_.throttled(now)) wake = std::min(wake, denied_.throttled_until());
    if (pid1_exited_) wake = std::min(wake, exit_seen_ + kLinger);
    if (payload_done()) wake = std::min(wake, status_seen_ + kLinger);
    const int64_t ms = std::chrono::duration_cast<milliseconds>(wake - now).count() + 1;
    int timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX));
    if (!fds_.pidfd && !pid1_exited_) timeout = std::min(timeout, 50);  // old kernels: poll waitpid
    return timeout;
  }

  // The setup's last word: a ChildError, or EOF when the payload's execve succeeded.
  void on_setup_word() {
    ChildError e{};
    const ssize_t got = ::read(fds_.error_read.get(), &e, sizeof e);
    if (got == sizeof e && e.degraded) {
      e.detail[sizeof e.detail - 1] = 0;
      out_.degradations.push_back(std::string(e.detail) + " (" + std::strerror(e.err) + ")");
      return;  // setup goes on: the next report, or EOF at the payload's execve
    }
    if (got == sizeof e) {
      e.stage[sizeof e.stage - 1] = 0;
      e.detail[sizeof e.detail - 1] = 0;
      setup_error_ = std::string("sandbox setup failed at '") + e.stage + "' (" + e.detail + "): " + std::strerror(e.err);
      kill_sandbox();
    } else if (got == 0) {
      exec_seen_ = Clock::now();
      if (req_.after_exec) req_.after_exec();
    }
    fds_.error_read.reset();
  }

  // The payload's wait status, sent by pid 1.
  void on_status() {
    int st;
    if (::read(fds_.status_read.get(), &st, sizeof st) == sizeof st) {
      wait_status_ = st;
      status_known_ = true;
      status_seen_ = Clock::now();
    }
    fds_.status_read.reset();
  }

  // One message per fd the sandbox passes (proxy socket, /work); EOF once pid 1 has execve'd.
  void on_control() {
    char tag = 0;
    UniqueFd passed = receive_fd(fds_.control_read.get(), &tag);
    if (!passed) fds_.control_read.reset();
    else if (tag == kProxySocketTag && req_.on_proxy_socket) req_.on_proxy_socket(std::move(passed));
    else if (tag == kWorkDirTag && req_.on_work_dir) req_.on_work_dir(std::move(passed));
  }

  // The payload's seccomp listener, once it has loaded its filter.
  void on_listener() {
    if (UniqueFd listener = receive_fd(fds_.notify_read.get())) denied_.attach(std::move(listener));
    fds_.notify_read.reset();
  }

  void on_signal() {
    if (const int sig = signals_.take()) {
      killed_by_signal_ = sig;
      setup_error_ = "interrupted by signal " + std::to_string(sig) + "; the sandbox was killed";
      kill_sandbox();
    }
  }

  // The caller withdrew the request (an MCP client's notifications/cancelled): as a SIGTERM.
  void on_cancel() {
    cancelled_ = true;
    killed_by_signal_ = SIGTERM;
    setup_error_ = "cancelled by the caller; the sandbox was killed";
    kill_sandbox();
  }

  void reap_if_gone() {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid1_), &info, WEXITED | WNOHANG) != 0 || info.si_pid != pid1_) return;
    pid1_exited_ = true;
    exit_seen_ = Clock::now();
    if (in_.active()) in_.finish();    // no reader is left
    if (cgroup_) cgroup_->kill_all();  // stragglers that escaped the pid namespace cannot exist; belt and braces
    sample();
    sampled_at_exit_ = true;
  }

  void time_out() {
    timed_out_ = true;
    // Still setting up when time ran out: say where, so a hang in setup can be diagnosed.
    if (exec_seen_ == Clock::time_point{} && fds_.error_read) setup_error_ = describe_stuck_setup(pid1_);
    sample();
    kill_sandbox();
    // Wait for pid 1 to be reaped (SIGKILL is immediate, even for stopped processes).
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid1_), &info, WEXITED) == 0) {
      pid1_exited_ = true;
      exit_seen_ = Clock::now();
    }
  }

  void kill_sandbox() {
    ::kill(pid1_, SIGKILL);  // pid 1 of a pid namespace: the kernel kills every process in it
    if (cgroup_) cgroup_->kill_all();
  }

  void sample() {
    if (!cgroup_) return;
    merge_usage(out_.usage, cgroup_->sample());
    if (req_.on_sample) req_.on_sample(out_.usage, std::chrono::duration_cast<milliseconds>(Clock::now() - started_));
  }

  // A message still queued on the control socket (pid 1 ended before the loop read it): the
  // /work fd must reach its caller whatever happened.
  void drain_control() {
    if (fds_.control_read) ::fcntl(fds_.control_read.get(), F_SETFL, O_NONBLOCK);
    while (fds_.control_read) {
      char tag = 0;
      UniqueFd passed = receive_fd(fds_.control_read.get(), &tag);
      if (!passed) fds_.control_read.reset();
      else if (tag == kWorkDirTag && req_.on_work_dir) req_.on_work_dir(std::move(passed));
    }
  }

  void finish() {
    // Anything still buffered in the status pipe (pid 1 may have written just before exit).
    if (fds_.status_read && !status_known_) {
      int st;
      if (::read(fds_.status_read.get(), &st, sizeof st) == sizeof st) {
        wait_status_ = st;
        status_known_ = true;
      }
    }
    if (cgroup_ && !sampled_at_exit_) merge_usage(out_.usage, cgroup_->sample());
    out_.duration = std::chrono::duration_cast<milliseconds>(Clock::now() - started_);
    using std::chrono::microseconds;
    if (exec_seen_ != Clock::time_point{}) {
      out_.timings.spawn = std::chrono::duration_cast<microseconds>(exec_seen_ - started_);
      if (exit_seen_ != Clock::time_point{})
        out_.timings.run = std::chrono::duration_cast<microseconds>(exit_seen_ - exec_seen_);
    }
    classify();
  }

  // What the run came to: its status, exit code and error.
  void classify() {
    out_.interrupted_by = killed_by_signal_;
    if (!setup_error_.empty() && !status_known_ && !timed_out_) {
      out_.status = RunStatus::error;
      out_.exit_code = killed_by_signal_ ? 128 + killed_by_signal_ : exit_code::setup_failed;
      out_.error = setup_error_;
    } else if (timed_out_) {
      out_.status = RunStatus::timeout;
      out_.exit_code = 124;
      out_.error = setup_error_;
    } else if (status_known_ && WIFEXITED(wait_status_)) {
      out_.status = RunStatus::exited;
      out_.exit_code = WEXITSTATUS(wait_status_);
    } else if (status_known_ && WIFSIGNALED(wait_status_)) {
      out_.signal = WTERMSIG(wait_status_);
      out_.exit_code = 128 + out_.signal;
      // OOM is read from the cgroup's memory events, never guessed from SIGKILL.
      out_.status = out_.usage.oom_kills > 0 && out_.signal == SIGKILL ? RunStatus::oom : RunStatus::signaled;
      out_.denied.killed_by_seccomp = out_.signal == SIGSYS;
    } else if (out_.usage.oom_kills > 0) {
      out_.status = RunStatus::oom;  // pid 1 itself was chosen by the OOM killer
      out_.exit_code = 128 + SIGKILL;
      out_.signal = SIGKILL;
    } else {
      out_.status = RunStatus::error;
      out_.exit_code = exit_code::setup_failed;
      out_.error = "the sandbox ended without reporting the program's status";
    }
  }

  const LaunchRequest& req_;
  const pid_t pid1_;
  MonitorFds& fds_;
  Cgroup* const cgroup_;
  RunOutcome& out_;
  const Clock::time_point started_;
  bool cancelled_ = false;
  const SignalGuard& signals_;
  OutputStream streams_[2]{};
  Clock::time_point deadline_{}, next_sample_{};
  StdinPump in_;
  DeniedListener denied_;
  PollSet poll_;
  bool pid1_exited_ = false, status_known_ = false, timed_out_ = false, sampled_at_exit_ = false, pid_ready_ = false;
  int killed_by_signal_ = 0, wait_status_ = 0;
  std::string setup_error_;
  Clock::time_point exit_seen_{}, exec_seen_{}, status_seen_{};
};

}  // namespace

bool monitor_sandbox(const LaunchRequest& req, pid_t pid1, MonitorFds& fds, Cgroup* cgroup, RunOutcome& out,
                     Clock::time_point started, const SignalGuard& signals) {
  return Monitor(req, pid1, fds, cgroup, out, started, signals).run();
}

}  // namespace sandboxrun::launch
