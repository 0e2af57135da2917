// A session's state (session.cpp: opening, cells, closing; session_files.cpp: /work).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "executor_impl.hpp"
#include "sandboxrun/executor.hpp"
#include "sandboxrun/session_limits.hpp"
#include "session/protocol.hpp"

namespace sandboxrun {

struct Session::Impl {
  using Clock = std::chrono::steady_clock;

  // A place among the Executor's open sessions (sandbox.yaml's sessions.max and max_per_caller),
  // held for the session's life.
  class Slot {
   public:
    Slot() = default;
    Slot(const Executor::Impl& ex, const std::string& caller) : ex_(&ex), caller_(caller) {
      std::lock_guard lock(ex.sessions_mu);
      size_t& mine = ex.sessions_by_caller[caller];
      check_session_limits(ex.cfg, ex.sessions_open, mine, caller, "close one");
      ++mine;
      ++ex.sessions_open;
    }
    Slot(Slot&& o) noexcept : ex_(std::exchange(o.ex_, nullptr)), caller_(std::move(o.caller_)) {}
    Slot& operator=(Slot&& o) noexcept {
      release();
      ex_ = std::exchange(o.ex_, nullptr);
      caller_ = std::move(o.caller_);
      return *this;
    }
    ~Slot() { release(); }
    void release() {
      if (!ex_) return;
      std::lock_guard lock(ex_->sessions_mu);
      --ex_->sessions_open;
      if (--ex_->sessions_by_caller[caller_] == 0) ex_->sessions_by_caller.erase(caller_);
      ex_ = nullptr;
    }

   private:
    const Executor::Impl* ex_ = nullptr;
    std::string caller_;
  };

  const Executor::Impl* ex = nullptr;
  Slot slot;
  // The idle watchdog: closes the session after idle_timeout without a cell. Its own lock, so
  // that it never waits for a running cell (which holds `mu`).
  std::thread watchdog;
  std::mutex idle_mu;
  std::condition_variable idle_cv;
  bool stopping = false, busy = false;
  Clock::time_point last_active = Clock::now();
  double idle_timeout_s = 600;
  std::atomic<bool> idled{false};
  UniqueFd watchdog_pid1;  // its own pidfd of pid 1
  RunResult who;  // run_id, caller and labels: what every record of the session carries
  Trust trust = Trust::untrusted;
  double cell_timeout_s = 30;
  session::ReplyLimits limits;
  UniqueFd to_driver, from_driver;  // our ends of the program's stdin and stdout
  UniqueFd stdin_read, stdout_write, stderr_write, stderr_read;  // the run's ends
  session::FrameReader frames{0};
  std::thread runner;
  std::mutex mu;  // one cell at a time; guards what follows
  std::condition_variable started_cv;
  bool started = false, ended = false;
  UniqueFd pid1_fd;
  std::atomic<pid_t> pid1{0};
  RunResult result;  // the sandbox's, once ended
  bool lost = false;
  std::string lost_why;
  std::string code_so_far;  // the cells that ran and the .py files put, for the next verdict
  uint64_t cells = 0;
  uint64_t requests = 0;     // file requests: ids after the cells' (2^32 + n), never equal
  uint64_t input_limit = 0, output_bytes = 0, output_files = 0;
  // The monitor's last sample of the session's cgroup (monitoring on).
  std::mutex usage_mu;
  std::optional<CgroupUsage> usage;
  std::optional<CgroupUsage> last_usage() {
    std::lock_guard lock(usage_mu);
    return usage;
  }

  void kill_sandbox();
  // SIGINT to pid 1's children (the driver, and orphans of the cells): KeyboardInterrupt.
  void interrupt();
  // The session can no longer run cells: says why, kills the sandbox.
  void lose(const std::string& why);
  // Waits for the next frame (at most `max_frame` bytes) until `deadline`; nullopt at the
  // deadline. Throws Error when the driver ended or sent a frame over the limit.
  std::optional<std::string> await_frame(Clock::time_point deadline, size_t max_frame);
  // Sends a request and waits for its frame, under `mu`, the session alive. Throws Error (host)
  // when the driver does not answer within the cell timeout (the session is then lost).
  std::string exchange(const std::string& frame, size_t max_frame);
  // Throws Error (host) unless cells can run; `mu` held.
  void check_alive() const;
  std::string ended_message() const;
  // A file operation's request and reply; `mu` held.
  session::FileReply file_request(session::FileOp op, const std::string& path, std::string_view data,
                                  uint64_t limit);
  // Assesses `code` (a cell's, or a .py file's) with the session's code so far.
  struct Verdict {
    Assessment assessment;
    Decision decision;
    std::string refusal;  // empty: it may run
  };
  Verdict judge(std::string_view code, const std::optional<std::string>& override_reason) const;
  std::string driver_stderr();
  // Marks the session busy (the idle watchdog waits) for its life; active again at its end.
  class Busy {
   public:
    explicit Busy(Impl& si);
    ~Busy();
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    Impl& si_;
  };
};

}  // namespace sandboxrun
