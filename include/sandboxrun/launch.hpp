// The launcher: one sandboxed run of a Python file, from clone() to the last byte of output.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/job_io.hpp"
#include "sandboxrun/id_slots.hpp"
#include "sandboxrun/seccomp.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun {

struct LaunchRequest {
  SandboxSpec spec;
  std::string run_id;
  std::string script_name;     // file name shown inside the sandbox (/work/NAME)
  std::string script;          // the exact bytes that were assessed; copied in, never re-read
  std::vector<std::string> args;
  const SeccompProgram* seccomp = nullptr;  // compiled from spec.seccomp_profile; required
  bool capture = false;        // --json: capture (bounded) instead of streaming
  int stdout_fd = 1;           // where streamed output goes
  int stderr_fd = 2;
  // Called from the monitor loop at each sample (for --stats); may be empty.
  std::function<void(const CgroupUsage&, std::chrono::milliseconds elapsed)> on_sample;
  // Called once the sandbox network is ready when spec.network.mode == allowlist: receives the
  // listening socket inside the sandbox (127.0.0.1:3128), to serve from the host side.
  std::function<void(UniqueFd listen_fd)> on_proxy_socket;
  // Files written into /work (the cwd, a tmpfs of spec.limits.work_bytes) beside the script;
  // the caller keeps them alive until run_sandbox returns. May be null.
  const std::vector<InputFile>* inputs = nullptr;
  // When set, called with an O_PATH fd of the run's /work once it is ready: the fd keeps that
  // tmpfs readable after the sandbox is gone (for --output).
  std::function<void(UniqueFd work_dir)> on_work_dir;
  // Streamed to the program's stdin until EOF; -1: the program's stdin is /dev/null.
  int stdin_fd = -1;
  // Instead of stdin_fd: these bytes are the program's stdin, then EOF (the caller keeps them
  // alive until run_sandbox returns). May be null.
  const std::string* stdin_data = nullptr;
  // argv/environ strings of the launcher, wiped in the sandbox's pid 1 so that /proc/1/cmdline
  // shows nothing of the caller.
  char* wipe_begin = nullptr;
  char* wipe_end = nullptr;
  // Runs while the sandbox sets itself up (mounts, network, credentials), before its payload may
  // execve: pid 1 does not fork the payload until this returns. For work that must finish before
  // any untrusted code runs but need not delay the setup, such as making the run_start audit
  // record durable. If it throws, the sandbox is killed before the payload exists and the error
  // propagates. May be empty.
  std::function<void()> before_exec;
  // Called once on the launcher's thread when the payload's execve succeeded: work that must not
  // delay the program and need not precede it. Must not throw. May be empty.
  std::function<void()> after_exec;
  // As root: the id slot claimed by the caller (to audit it before the launch). Unset: the
  // launcher claims one itself for the run.
  std::shared_ptr<const IdSlot> id_slot;
  // As root: an fd of a network namespace to run in instead of a new one, made for this run
  // alone with only `lo`, up (a long-lived caller's pool of them: the Executor's). The caller
  // keeps it open until run_sandbox returns and never hands it to another run. -1: the clone
  // makes a new namespace.
  int netns_fd = -1;
  // The host's cgroup side, worked out once by a long-lived caller (the Executor's). Used when
  // its settings are the spec's; unset or different: the launcher works it out for this run.
  std::shared_ptr<const CgroupHost> cgroup_host;
  // The largest script the sandbox will take (sizes its /run); 0: this request's script. A
  // sandbox prepared ahead (PreparedSandbox) has no script yet.
  size_t max_script = 0;
  // When set, run_sandbox returns once the payload's exit status and output are in, without
  // waiting for pid 1 to finish exiting (its exit tears down the sandbox's namespaces) or for
  // the cgroup's removal: what is left of the run goes to this function instead. Releasing the
  // last reference to it kills and reaps pid 1 if it is still there, then removes the cgroup
  // and frees the id slot, as run_sandbox otherwise does before it returns; a long-lived caller
  // drops it on a thread of its own. Runs that end otherwise (timeout, signal, setup error) are
  // torn down before run_sandbox returns, as always. May be empty.
  std::function<void(std::shared_ptr<void> remains)> defer_teardown;
  // A session's sandbox (docs/sessions.md): the run lasts until this wall-clock bound instead
  // of spec.limits.timeout_s (which bounds each cell), and streamed output is not cut at
  // output_limit (the driver cuts each cell's; the session bounds its frames).
  std::optional<double> lifetime_s;
  // Called once with pid 1's pid (as this process sees it) when the sandbox exists: a session
  // signals its interpreter (pid 1's child) and kills the sandbox through it. May be empty.
  std::function<void(pid_t pid1)> on_started;
  // SIGINT, SIGTERM and SIGHUP sent to this process while the run lasts end the run: blocked in
  // the thread that runs it and read from a signalfd, which also takes a process-directed one
  // that another thread was meant to get. false: left alone (only SIGPIPE is held), for a service
  // that stops on them itself and withdraws its runs through cancel_fd.
  bool stop_signals = true;
  // Readable (an eventfd written, a pipe closed): the caller withdrew the request; the sandbox
  // is killed as on SIGTERM (interrupted_by SIGTERM). -1: none.
  int cancel_fd = -1;
};

// blocked: the assessor refused the file and nothing was launched.
enum class RunStatus { exited, signaled, timeout, oom, blocked, error };
const char* to_string(RunStatus s);

// Where the launcher's time went, for `--json` (timings_ms) and the benchmark. Zero when a
// phase did not happen (e.g. setup failed before the payload's execve).
struct LaunchTimings {
  std::chrono::microseconds cgroup{0};    // create the run's cgroup(s) and apply limits (0 in a
                                          // sandbox prepared ahead: made before the run)
  std::chrono::microseconds spawn{0};     // clone (all namespaces) -> placement, mounts,
                                          // pivot_root, credentials, seccomp -> payload execve
  std::chrono::microseconds run{0};       // payload execve -> pid 1 gone
  std::chrono::microseconds teardown{0};  // pid 1 gone -> cgroup killed, sampled and removed
};

// A syscall the seccomp profile denied, reported by the sandbox's user-notification listener.
struct DeniedSyscall {
  std::string name;
  uint64_t count = 0;
  std::vector<std::vector<uint64_t>> first_args;  // the first few calls' first three arguments
};

// What the payload tried and was refused, bounded whatever it tries.
struct DeniedReport {
  std::vector<DeniedSyscall> syscalls;  // at most kMaxNames distinct names, in first-seen order
  uint64_t other_count = 0;             // denials beyond kMaxNames names (counted, not named)
  bool killed_by_seccomp = false;       // the payload died of SIGSYS: a kill action (foreign ABI, TIOCSTI)
  bool notify = false;                  // denials were routed to the launcher (the profile allows it)
  static constexpr size_t kMaxNames = 64;
  static constexpr size_t kMaxDetails = 3;
  uint64_t total() const {
    uint64_t n = other_count;
    for (const auto& d : syscalls) n += d.count;
    return n;
  }
};

struct RunOutcome {
  RunStatus status = RunStatus::error;
  int exit_code = exit_code::setup_failed;
  int signal = 0;                  // when signaled
  std::chrono::milliseconds duration{0};
  CgroupUsage usage;
  std::string cgroup_backend;      // "v2", "v1", or "none (degraded)"
  std::vector<std::string> degradations;  // limits not enforced exactly, each with its fix
  std::vector<std::string> warnings;      // host problems that did not affect this run
  std::string stdout_data, stderr_data;
  bool stdout_truncated = false, stderr_truncated = false;
  std::string error;               // set when status == error: what failed in setup
  int interrupted_by = 0;          // SIGINT, SIGTERM or SIGHUP to the launcher, which killed the sandbox
  int landlock_abi = 0;            // the ruleset's ABI; 0 when Landlock was not applied
  bool landlock_enforced = false;  // the payload started under the ruleset
  std::optional<IdSlotInfo> id_slot;  // as root: the host ids the sandbox ran as
  DeniedReport denied;
  LaunchTimings timings;
  bool prepared = false;           // ran in a sandbox set up ahead: spawn counts from its release
};

// The script's file name inside /work: `name` with anything but [A-Za-z0-9._-] replaced.
std::string sandbox_script_name(const std::string& name);

// Runs the request to completion. Never throws for failures inside the sandbox (they are in the
// outcome); throws Error when the sandbox cannot be set up on the host side (exit 125).
RunOutcome run_sandbox(const LaunchRequest& req);

// A sandbox set up before its run is known (a warm sandbox of a long-lived Executor): its cgroup
// (named base.run_id), pid 1 cloned into its namespaces, its filesystem built; pid 1 waits for
// the release, which run() sends with the run's script, argv and environment once before_exec
// returned. `base` is a request without a script, inputs or stdin (those shape the sandbox
// before its release); its max_script bounds the script; its on_work_dir, when set, only asks
// for /work to be passed, to the run's own on_work_dir. pid 1 dies with the thread
// that prepared it (PR_SET_PDEATHSIG): that thread must outlive the sandbox.
class PreparedSandbox {
 public:
  struct State;
  // Throws Error like run_sandbox when the sandbox cannot be set up.
  static std::unique_ptr<PreparedSandbox> prepare(const LaunchRequest& base);
  // Runs `req` to completion, once. It must carry the base's run id, spec and seccomp program;
  // throws Error when it does not fit (and then nothing runs).
  RunOutcome run(const LaunchRequest& req);
  ~PreparedSandbox();  // never run: pid 1 killed, its cgroup removed, its id slot freed
  PreparedSandbox(const PreparedSandbox&) = delete;
  PreparedSandbox& operator=(const PreparedSandbox&) = delete;

 private:
  PreparedSandbox();
  std::shared_ptr<State> s_;  // shared with a deferred teardown (LaunchRequest::defer_teardown)
};

// Checks that a rootfs can host a run (mount points, interpreter), adding the empty /work mount
// point when the image has none; throws Error with the fix.
void validate_rootfs(const std::string& rootfs, const std::string& python);

}  // namespace sandboxrun
