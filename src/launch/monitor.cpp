// Parent side: one poll loop over the sandbox's pipes, a sampling timer, the timeout and our own
// termination signals. Output is bounded in memory whatever the payload writes.
#include "monitor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "fd_passing.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "seccomp_notify.hpp"

namespace sandboxrun::launch {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Stream {
  int fd;
  int sink;          // streaming: where to copy; capture: -1
  std::string* buf;  // capture buffer
  bool* truncated;
  uint64_t limit;
  bool open = true;
  uint64_t streamed = 0;  // bytes copied to sink so far
};

// Returns false at EOF or error.
bool pump(Stream& s) {
  char chunk[65536];
  ssize_t n = ::read(s.fd, chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  auto len = static_cast<size_t>(n);
  if (s.sink >= 0) {
    // Past output_limit the stream is cut with one line saying so, and drained to nowhere.
    const size_t room = s.streamed < s.limit ? static_cast<size_t>(s.limit - s.streamed) : 0;
    write_all(s.sink, chunk, std::min(len, room));  // a closed caller stdout must not stop the drain
    s.streamed += std::min(len, room);
    if (len > room && !*s.truncated) {
      *s.truncated = true;
      const std::string notice =
          "\n[sandboxrun: output cut at output_limit (" + std::to_string(s.limit) + " bytes)]\n";
      write_all(s.sink, notice.data(), notice.size());
    }
  } else {
    size_t room = s.buf->size() < s.limit ? static_cast<size_t>(s.limit - s.buf->size()) : 0;
    if (len > room) *s.truncated = true;
    s.buf->append(chunk, std::min(len, room));
  }
  return true;
}

void merge_usage(CgroupUsage& acc, const CgroupUsage& now) {
  acc.memory_current = now.memory_current;
  acc.memory_peak = std::max({acc.memory_peak, now.memory_peak, now.memory_current});
  acc.cpu_usec = std::max(acc.cpu_usec, now.cpu_usec);
  acc.pids_current = now.pids_current;
  acc.pids_peak = std::max({acc.pids_peak, now.pids_peak, now.pids_current});
  acc.oom_kills = std::max(acc.oom_kills, now.oom_kills);
  acc.pids_max_hits = std::max(acc.pids_max_hits, now.pids_max_hits);
}

class SignalGuard {
 public:
  SignalGuard() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    fd_.reset(::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
    // SIGPIPE too (not read from the signalfd): a program that closes its stdin turns our next
    // write into EPIPE, which the stdin pump handles, instead of killing the launcher.
    sigaddset(&set_, SIGPIPE);
    ::sigprocmask(SIG_BLOCK, &set_, &old_);
  }
  ~SignalGuard() {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    const timespec now{0, 0};
    while (::sigtimedwait(&pipe_only, nullptr, &now) == SIGPIPE) {}  // discard, do not deliver
    ::sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  int fd() const { return fd_.get(); }

 private:
  sigset_t set_, old_;
  UniqueFd fd_;
};

// The launcher's stdin (or the caller's bytes) -> the program's stdin pipe, never blocking the
// loop: one chunk at a time, read only when the previous one is written. EOF (or the program
// closing its end: EPIPE is no error) closes ours.
struct StdinPump {
  int src = -1;
  UniqueFd* dst = nullptr;
  std::string chunk_buf;
  std::string_view pending;  // chunk_buf, or the caller's bytes (LaunchRequest::stdin_data)
  size_t done = 0;
  bool src_open = false;

  bool active() const { return dst && *dst; }
  bool wants_read() const { return active() && src_open && done == pending.size(); }
  bool wants_write() const { return active() && done < pending.size(); }
  void finish() { dst->reset(); }
  void read_some() {
    char chunk[65536];
    ssize_t n = ::read(src, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      src_open = false;
      finish();  // EOF passed on
      return;
    }
    chunk_buf.assign(chunk, static_cast<size_t>(n));
    pending = chunk_buf;
    done = 0;
  }
  void write_some() {
    ssize_t n = ::write(dst->get(), pending.data() + done, pending.size() - done);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n < 0) return finish();  // EPIPE: the program closed its stdin
    done += static_cast<size_t>(n);
    if (done == pending.size() && !src_open) finish();
  }
};

}  // namespace

namespace {

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

}  // namespace

bool monitor_sandbox(const LaunchRequest& req, pid_t pid1, MonitorFds& fds, Cgroup* cgroup, RunOutcome& out,
                     Clock::time_point started) {
  SignalGuard signals;
  const auto& lim = req.spec.limits;
  Stream streams[2] = {
      {fds.stdout_read.get(), req.capture ? -1 : req.stdout_fd, &out.stdout_data, &out.stdout_truncated,
       lim.output_bytes},
      {fds.stderr_read.get(), req.capture ? -1 : req.stderr_fd, &out.stderr_data, &out.stderr_truncated,
       lim.output_bytes},
  };
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(lim.timeout_s));
  const auto interval = req.spec.monitor_interval;
  StdinPump in;
  if (fds.stdin_write) {
    in.dst = &fds.stdin_write;
    if (req.stdin_data) {
      in.pending = *req.stdin_data;
      if (in.pending.empty()) in.finish();  // nothing to write: EOF at once
    } else {
      in.src = req.stdin_fd;
      in.src_open = true;
    }
  }
  auto next_sample = Clock::now() + interval;

  DeniedListener denied(out.denied);
  bool pid1_exited = false, status_known = false, timed_out = false, sampled_at_exit = false;
  int killed_by_signal = 0;
  int wait_status = 0;
  std::string setup_error;
  Clock::time_point exit_seen{}, exec_seen{};

  auto kill_sandbox = [&] {
    ::kill(pid1, SIGKILL);  // pid 1 of a pid namespace: the kernel kills every process in it
    if (cgroup) cgroup->kill_all();
  };
  auto sample = [&] {
    if (!cgroup) return;
    merge_usage(out.usage, cgroup->sample());
    if (req.on_sample) req.on_sample(out.usage, std::chrono::duration_cast<milliseconds>(Clock::now() - started));
  };

  // defer_teardown: once pid 1 has sent the payload's status the run is over but for its output,
  // and pid 1 (on its way out) is left to the caller: never reaped here, whenever it exits, so
  // that the caller always gets it. Its exit kills whatever still holds the output open.
  Clock::time_point status_seen{};
  auto payload_done = [&] { return req.defer_teardown && status_known && !pid1_exited && setup_error.empty(); };
  for (;;) {
    bool streams_open = streams[0].open || streams[1].open;
    if (pid1_exited && !streams_open) break;
    // The setup's last word (an execve error) and the seccomp listener arrive before their EOF;
    // as after pid 1's exit, a writer that lingers gets two seconds.
    if (payload_done() && ((!streams_open && !fds.error_read && !fds.notify_read) ||
                           Clock::now() - status_seen > milliseconds(2000))) {
      exit_seen = status_seen;
      if (in.active()) in.finish();
      sample();
      sampled_at_exit = true;
      break;
    }
    // After pid 1 is gone, every writer is dead; give the pipes a moment to drain.
    if (pid1_exited && Clock::now() - exit_seen > milliseconds(2000)) break;

    pollfd pfd[10];
    int n = 0;
    int idx_out = -1, idx_err = -1, idx_pid = -1, idx_status = -1, idx_error = -1, idx_ctl = -1, idx_sig = -1;
    int idx_in = -1, idx_notify = -1, idx_listener = -1;
    if (in.wants_read()) { idx_in = n; pfd[n++] = {in.src, POLLIN, 0}; }
    else if (in.wants_write()) { idx_in = n; pfd[n++] = {in.dst->get(), POLLOUT, 0}; }
    if (streams[0].open) { idx_out = n; pfd[n++] = {streams[0].fd, POLLIN, 0}; }
    if (streams[1].open) { idx_err = n; pfd[n++] = {streams[1].fd, POLLIN, 0}; }
    if (!pid1_exited && !payload_done() && fds.pidfd) { idx_pid = n; pfd[n++] = {fds.pidfd.get(), POLLIN, 0}; }
    if (fds.status_read) { idx_status = n; pfd[n++] = {fds.status_read.get(), POLLIN, 0}; }
    if (fds.error_read) { idx_error = n; pfd[n++] = {fds.error_read.get(), POLLIN, 0}; }
    if (fds.control_read) { idx_ctl = n; pfd[n++] = {fds.control_read.get(), POLLIN, 0}; }
    if (fds.notify_read) { idx_notify = n; pfd[n++] = {fds.notify_read.get(), POLLIN, 0}; }
    auto now = Clock::now();
    if (int lfd = denied.poll_fd(now); lfd >= 0) { idx_listener = n; pfd[n++] = {lfd, POLLIN, 0}; }
    idx_sig = n;
    pfd[n++] = {signals.fd(), POLLIN, 0};

    auto wake = std::min(deadline, next_sample);
    if (denied.throttled(now)) wake = std::min(wake, denied.throttled_until());
    if (pid1_exited) wake = std::min(wake, exit_seen + milliseconds(2000));
    if (payload_done()) wake = std::min(wake, status_seen + milliseconds(2000));
    int timeout_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<milliseconds>(wake - now).count() + 1));
    if (!fds.pidfd && !pid1_exited) timeout_ms = std::min(timeout_ms, 50);  // old kernels: poll waitpid
    int r = ::poll(pfd, static_cast<nfds_t>(n), timeout_ms);
    if (r < 0 && errno != EINTR) break;

    auto ready = [&](int i) { return i >= 0 && r > 0 && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)); };
    if (idx_in >= 0 && r > 0 && pfd[idx_in].revents) {
      if (pfd[idx_in].events == POLLIN) in.read_some();
      else in.write_some();
    }
    if (ready(idx_out) && !pump(streams[0])) streams[0].open = false;
    if (ready(idx_err) && !pump(streams[1])) streams[1].open = false;
    // The payload's execve (EOF here) precedes its exit (the status below): read in that order,
    // or a wake-up that brings both would time the run as ending before it began.
    if (ready(idx_error)) {
      ChildError e{};
      ssize_t got = ::read(fds.error_read.get(), &e, sizeof e);
      if (got == sizeof e) {
        e.stage[sizeof e.stage - 1] = 0;
        e.detail[sizeof e.detail - 1] = 0;
        setup_error = std::string("sandbox setup failed at '") + e.stage + "' (" + e.detail +
                      "): " + std::strerror(e.err);
        kill_sandbox();
      } else if (got == 0) {
        exec_seen = Clock::now();
        if (req.after_exec) req.after_exec();
      }
      fds.error_read.reset();  // EOF: the payload's execve succeeded
    }
    if (ready(idx_status)) {
      int st;
      ssize_t got = ::read(fds.status_read.get(), &st, sizeof st);
      if (got == sizeof st) {
        wait_status = st;
        status_known = true;
        status_seen = Clock::now();
      }
      fds.status_read.reset();
    }
    if (ready(idx_ctl)) {
      // One message per fd the sandbox passes (proxy socket, /work); EOF once pid 1 has execve'd.
      char tag = 0;
      UniqueFd passed = receive_fd(fds.control_read.get(), &tag);
      if (!passed) fds.control_read.reset();
      else if (tag == kProxySocketTag && req.on_proxy_socket) req.on_proxy_socket(std::move(passed));
      else if (tag == kWorkDirTag && req.on_work_dir) req.on_work_dir(std::move(passed));
    }
    if (ready(idx_notify)) {
      UniqueFd listener = receive_fd(fds.notify_read.get());
      if (listener) denied.attach(std::move(listener));
      fds.notify_read.reset();
    }
    if (idx_listener >= 0 && r > 0 && pfd[idx_listener].revents) denied.handle(pfd[idx_listener].revents);
    if (ready(idx_sig)) {
      signalfd_siginfo si;
      if (::read(signals.fd(), &si, sizeof si) == sizeof si) {
        killed_by_signal = static_cast<int>(si.ssi_signo);
        setup_error = "interrupted by signal " + std::to_string(si.ssi_signo) + "; the sandbox was killed";
        kill_sandbox();
      }
    }
    if (!pid1_exited && !payload_done()) {
      bool gone = false;
      if (ready(idx_pid) || !fds.pidfd) {
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(pid1), &info, WEXITED | WNOHANG) == 0 && info.si_pid == pid1)
          gone = true;
      }
      if (gone) {
        pid1_exited = true;
        exit_seen = Clock::now();
        if (in.active()) in.finish();  // no reader is left
        if (cgroup) cgroup->kill_all();  // stragglers that escaped the pid namespace cannot exist; belt and braces
        sample();
        sampled_at_exit = true;
      }
    }
    now = Clock::now();
    if (!pid1_exited && !payload_done() && now >= deadline) {
      timed_out = true;
      // Still setting up when time ran out: say where, so a hang in setup can be diagnosed.
      if (exec_seen == Clock::time_point{} && fds.error_read) setup_error = describe_stuck_setup(pid1);
      sample();
      kill_sandbox();
    }
    if (now >= next_sample) {
      if (!pid1_exited) sample();
      next_sample = now + interval;
    }
    if (timed_out && !pid1_exited) {
      // Wait for pid 1 to be reaped (SIGKILL is immediate, even for stopped processes).
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid1), &info, WEXITED) == 0) {
        pid1_exited = true;
        exit_seen = Clock::now();
      }
    }
  }
  // A message still queued on the control socket (pid 1 ended before the loop read it): the
  // /work fd must reach its caller whatever happened.
  if (fds.control_read) ::fcntl(fds.control_read.get(), F_SETFL, O_NONBLOCK);
  while (fds.control_read) {
    char tag = 0;
    UniqueFd passed = receive_fd(fds.control_read.get(), &tag);
    if (!passed) fds.control_read.reset();
    else if (tag == kWorkDirTag && req.on_work_dir) req.on_work_dir(std::move(passed));
  }
  // Read anything still buffered in the status pipe (pid 1 may have written just before exit).
  if (fds.status_read && !status_known) {
    int st;
    if (::read(fds.status_read.get(), &st, sizeof st) == sizeof st) {
      wait_status = st;
      status_known = true;
    }
  }
  if (cgroup && !sampled_at_exit) merge_usage(out.usage, cgroup->sample());
  out.duration = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
  using std::chrono::microseconds;
  if (exec_seen != Clock::time_point{}) {
    out.timings.spawn = std::chrono::duration_cast<microseconds>(exec_seen - started);
    if (exit_seen != Clock::time_point{})
      out.timings.run = std::chrono::duration_cast<microseconds>(exit_seen - exec_seen);
  }

  if (!setup_error.empty() && !status_known && !timed_out) {
    out.status = RunStatus::error;
    out.exit_code = killed_by_signal ? 128 + killed_by_signal : exit_code::setup_failed;
    out.error = setup_error;
  } else if (timed_out) {
    out.status = RunStatus::timeout;
    out.exit_code = 124;
    out.error = setup_error;
  } else if (status_known && WIFEXITED(wait_status)) {
    out.status = RunStatus::exited;
    out.exit_code = WEXITSTATUS(wait_status);
  } else if (status_known && WIFSIGNALED(wait_status)) {
    out.signal = WTERMSIG(wait_status);
    out.exit_code = 128 + out.signal;
    // OOM is read from the cgroup's memory events, never guessed from SIGKILL.
    out.status = out.usage.oom_kills > 0 && out.signal == SIGKILL ? RunStatus::oom : RunStatus::signaled;
    out.denied.killed_by_seccomp = out.signal == SIGSYS;
  } else if (out.usage.oom_kills > 0) {
    out.status = RunStatus::oom;  // pid 1 itself was chosen by the OOM killer
    out.exit_code = 128 + SIGKILL;
    out.signal = SIGKILL;
  } else {
    out.status = RunStatus::error;
    out.exit_code = exit_code::setup_failed;
    out.error = "the sandbox ended without reporting the program's status";
  }
  return pid1_exited;
}

}  // namespace sandboxrun::launch
