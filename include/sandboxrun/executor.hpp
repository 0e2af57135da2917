// sandboxrun's library core. A service opens one Executor (configuration, assessor rules, host
// probe, every trust level's compiled seccomp program), then calls assess() and run() as often
// as it likes, from as many threads as it likes. The `sandboxrun` command is a thin caller.
//
//   auto ex = sandboxrun::Executor::open({.config = "/etc/sandboxrun"});
//   sandboxrun::RunRequest req;
//   req.code = "print(6 * 7)\n";
//   sandboxrun::RunResult r = ex.run(req);   // r.status, r.exit_code, r.stdout_data ...
//
// Data flows one way: config -> assessment -> Decision -> SandboxSpec -> launch -> RunResult,
// with each step's audit record appended as it happens (a run never starts unaudited).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandboxrun/assess.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/job_io.hpp"
#include "sandboxrun/launch.hpp"
#include "sandboxrun/result_records.hpp"
#include "sandboxrun/session.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun {

struct ExecutorOptions {
  // sandbox.yaml, or the directory holding it (security.yaml and audit.yaml live beside it).
  // Unset: $SANDBOXRUN_CONFIG, /etc/sandboxrun, then the installation's own config directory.
  std::optional<std::filesystem::path> config;
  // The audit log file; unset: the one audit.yaml names.
  std::optional<std::filesystem::path> audit_log;
  // A caller that runs once and exits (the `sandboxrun` command): everything loads on the
  // calling thread, and a run's network namespace is made when it starts, with no spare made
  // ahead or after it (one made and never used costs as much again to tear down). Further runs
  // still work. A run returns once its result is in;
  // its pid 1 (still exiting) and its cgroup are removed when the Executor is destroyed, so the
  // caller reports the result while pid 1's exit tears the namespaces down.
  bool single_run = false;
  // A service: keep one sandbox set up ahead for the next run (cgroup, namespaces, filesystem,
  // made on a thread of the Executor's while the current run goes on). A run that fits it (the
  // default image, the trust level's own limits, no inputs, stdin, requirements or run id of
  // its own, network none; an output directory fits) only sends it its script, argv and
  // environment; the others run as usual. And every run returns once its result is in: the
  // end of its pid 1 (which tears down the namespaces) and the removal of its cgroup finish on
  // that thread, so for a moment after run() returns they may still exist; nothing is left once
  // the Executor is destroyed. Ignored with single_run.
  bool warm = false;
  // SIGINT, SIGTERM and SIGHUP sent to the process while a run or session lasts end that run
  // (LaunchRequest::stop_signals): right for a command, where they mean "stop". false: left to
  // the caller, which stops its runs with RunRequest::cancel_fd and its sessions with close()
  // (`sandboxrun mcp --http` stops the whole server on them).
  bool stop_signals = true;
  // The caller's standard output carries a protocol (MCP over stdio): an audit.yaml whose
  // checkpoint.stream is stdout is refused (ErrorKind::audit), since its lines would corrupt it.
  bool stdout_is_protocol = false;
};

struct RunRequest {
  std::string code;                 // the exact bytes to assess and run
  std::string name = "main.py";     // its file name inside the sandbox and in the audit log
  std::vector<std::string> args;    // sys.argv[1:]
  // Set in the program's environment over the trust level's `environment:` (the variables the
  // run itself needs still win: the proxy's in allowlist mode; /run/deps goes first on
  // PYTHONPATH). Names [A-Za-z_][A-Za-z0-9_]*; values are not audited, only the names.
  std::map<std::string, std::string> env;
  std::optional<Trust> trust;       // unset: default_trust of sandbox.yaml
  RunOverrides limits;              // may only tighten the trust level's limits
  // Run a refused (BLOCKED) verdict anyway, audited; security.yaml's `override:` policy decides
  // whether this process may and whether the reason says enough (see override_policy.hpp).
  std::optional<std::string> override_reason;
  std::optional<std::string> image; // name | rootfs directory | OCI layout[:tag]; unset: sandbox.yaml's
  // pip requirements text, installed in a separate cached phase together with the trust level's
  // `requirements:`; origin names it in errors ("FILE:LINE: ...").
  std::string requirements;
  std::string requirements_origin = "requirements";
  // true: stdout/stderr are captured (bounded by output_limit) into the result; false: streamed
  // to stdout_fd / stderr_fd as they come.
  bool capture = true;
  int stdout_fd = 1;
  int stderr_fd = 2;
  // Copied into /work beside the script (load_input() reads them safely); each .py among them
  // is assessed with the script. Their total is capped by input_limit / input_files_limit.
  std::vector<InputFile> inputs;
  // The program's stdin, one of: stdin_fd, streamed from this fd until EOF; stdin_data, these
  // bytes then EOF (written as the program reads; a program that exits without reading them all
  // is no error). Neither: /dev/null. Both set is a usage error (exit 2).
  int stdin_fd = -1;
  std::optional<std::string> stdin_data;
  // Files the program created or changed under /work are copied here after it ends (created;
  // must not exist or be empty).
  std::optional<std::filesystem::path> output_dir;
  // Who the run is for (a root service running code for many users): recorded in every audit
  // record of the run and in the result. See validate_run_identity() for what is accepted.
  std::optional<std::string> caller;
  std::map<std::string, std::string> labels;
  std::optional<std::string> run_id;  // caller-chosen; refused if the audit log already has it
  // Called from the run's monitor loop at each resource sample (every monitoring.interval) and
  // once at the end; may be empty. Set with monitoring.enabled: false, run() throws Error (usage).
  std::function<void(const CgroupUsage&, std::chrono::milliseconds elapsed)> on_sample;
  // Readable: the caller withdrew the request (an MCP client cancelled it); the run ends as an
  // interrupted one (error_kind interrupted, exit 143), the sandbox killed. -1: none.
  int cancel_fd = -1;
  // For a command-line front end only: its argv/environ strings, wiped inside the sandbox's
  // pid 1 so that /proc/1/cmdline shows nothing of the caller.
  char* wipe_begin = nullptr;
  char* wipe_end = nullptr;
};

// What the assessment did to the requested trust level, decided once per run.

struct RunResult {
  std::string run_id;
  RunStatus status = RunStatus::error;
  int exit_code = exit_code::setup_failed;  // what `sandboxrun run` exits with (see exit_code)
  int signal = 0;                           // when status == signaled (or oom: SIGKILL)
  std::string error;                        // when status == error: what failed and the fix
  ErrorKind error_kind = ErrorKind::other;  // with error: what kind of failure (a service's switch)
  Assessment assessment;
  Decision decision;
  std::optional<SandboxSpec> spec;          // the resolved spec, once there was one
  std::string image_digest;
  RunOutcome outcome;                       // output, usage, timings, degradations
  std::optional<NetworkReport> network;     // allowlist mode: the proxy's counters and records
  std::optional<DepsReport> deps;           // with requirements: the dependency phase
  std::optional<uint64_t> audit_seq;        // seq of the run's last audit record
  std::chrono::microseconds prepare{0};     // request -> launch: assessment, audit, spec
  // Things the caller should know that did not stop the run (the trust level was lowered,
  // a limit was clamped or not enforced), one sentence each.
  std::vector<std::string> warnings;
  std::vector<FileRecord> inputs;           // what went into /work (the script not included)
  std::optional<OutputManifest> outputs;    // with output_dir: what came back out
  std::optional<std::string> caller;
  std::map<std::string, std::string> labels;

  // The `--json` result object (the contract in README.md).
  nlohmann::json to_json() const;
};

// A session (docs/sessions.md): one sandbox with one interpreter, running cells that keep their
// state. The sandbox is made as a run's is, with these options.
struct SessionRequest {
  std::optional<Trust> trust{};       // unset: default_trust of sandbox.yaml; cells never loosen it
  RunOverrides limits{};              // as a run's; the level's timeout bounds each cell
  std::optional<std::string> image{};
  std::map<std::string, std::string> env{};
  // As a run's: copied into /work before the first cell (each .py is part of the session's
  // code, which every cell is assessed with), and pip requirements installed first.
  std::vector<InputFile> inputs{};
  std::string requirements{};
  std::string requirements_origin = "requirements";
  std::optional<std::string> caller{};
  std::map<std::string, std::string> labels{};
  // May only shorten sandbox.yaml's sessions.lifetime and sessions.idle_timeout: the session is
  // closed this long after it started, and after this long without a cell.
  std::optional<double> lifetime_s{};
  std::optional<double> idle_timeout_s{};
  bool svg_figures = false;  // matplotlib figures come back as image/svg+xml too (PNG always)
};

struct CellRequest {
  std::string code{};
  std::string stdin_data{};           // what the cell reads on stdin, then EOF
  std::optional<double> timeout_s{};  // may only shorten the trust level's timeout
  // Run a refused (BLOCKED) verdict on the session's code anyway, as RunRequest::override_reason.
  std::optional<std::string> override_reason{};
};

// ok: the cell ran; error: it raised (output.error); timeout: it was interrupted at its timeout
// (KeyboardInterrupt; the session goes on); blocked: the verdict on the session's code refused
// it (nothing ran); lost: the session ended with it (killed after an ignored interrupt, the
// interpreter died, the driver answered out of protocol, the lifetime or idle timeout ran out).
enum class CellStatus { ok, error, timeout, blocked, lost };
const char* to_string(CellStatus s);

struct CellResult {
  CellStatus status = CellStatus::lost;
  CellOutput output;                 // what the driver reported (ok, error, timeout)
  Assessment assessment;             // of the session's code so far, this cell included
  std::string message;               // blocked, timeout, lost: what happened, and what to do
  std::optional<uint64_t> audit_seq; // the cell's record
  std::chrono::milliseconds duration{0};
  // The session's cgroup after the cell, as last sampled (monitoring.interval; none with
  // monitoring off): cpu_ms the cell's own (between the samples before and after it, so a cell
  // shorter than the interval may show 0), the peaks and OOM kills the session's so far.
  std::optional<ResourcesRecord> resources;

  // One cell as front ends print it: status, stdout, stderr (and their _truncated), result,
  // display, error (CellOutput's JSON), assessment, message (when there is one), duration_ms,
  // resources (or null), audit_seq.
  nlohmann::json to_json() const;
};

// What Session::put_file did. A .py file is part of the session's code: it is assessed with the
// code so far (an `import` of it must not run unassessed code) and refused as a cell would be.
struct FilePut {
  bool refused = false;
  std::string message{};                  // when refused: why, and what to do
  FileRecord file{};                      // path (under /work), size, sha256
  std::optional<Assessment> assessment{}; // .py files only
  std::optional<uint64_t> audit_seq{};    // its file_put record
  nlohmann::json to_json() const;
};

class Executor;

// One session. Cells run one at a time (run() serialises callers). Destroying it closes it.
// The Executor that opened it must outlive it.
class Session {
 public:
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();
  const std::string& id() const;  // the run id of the session's sandbox (its audit records)
  bool alive() const;
  // Assesses the session's code with this cell, records it, runs it, returns what it gave.
  CellResult run(const CellRequest& cell);
  // Files under the session's /work, between cells (done by the sandbox's driver with the
  // sandbox's own rights; `path` is relative to /work, without `..`). put_file is bounded by
  // input_limit, get_file by the level's output_bytes_limit, list_files by output_files_limit;
  // both are audited (file_put, file_get). Throw Error: usage (a bad path), limits (too large),
  // other (the sandbox could not: no such file ...), host (the session is not alive or its
  // driver answered out of protocol: the session is then lost).
  FilePut put_file(const std::string& path, std::string_view data,
                   const std::optional<std::string>& override_reason = std::nullopt);
  std::string get_file(const std::string& path);
  std::vector<WorkFile> list_files(const std::string& dir = "");
  // Ends the session (the interpreter gets EOF; killed if it lingers) and returns the sandbox's
  // run result (run_end is recorded). Later calls return the same.
  const RunResult& close();
  // KeyboardInterrupt to the cell running now (from another thread; a no-op between cells): it
  // ends as `timeout`'s interrupted cells do, or the session is lost if it ignores it until the
  // cell's timeout and grace.
  void interrupt();
  // The session's cgroup as last sampled (monitoring.interval): memory_current is what the
  // session's sandbox holds between cells. None with monitoring off or before the first sample.
  std::optional<CgroupUsage> usage() const;

 private:
  friend class Executor;
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Executor {
 public:
  // Loads everything a run needs; throws Error (file, key, what was expected) when it cannot.
  static Executor open(const ExecutorOptions& options = {});
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;
  ~Executor();

  // The built-in assessment of `source` (plus Bandit when security.yaml enables it).
  Assessment assess(std::string_view source) const;

  // Assesses, decides, launches, monitors and audits one run. Thread-safe. Failures of the run
  // are in the result (status error, blocked ...); throws Error only when the audit log cannot
  // record the run, since no run may go unaudited.
  RunResult run(const RunRequest& request) const;

  // With ExecutorOptions::warm: waits up to `timeout` for the sandbox set up ahead for runs at
  // `trust` (the default level's after open, then the level of the last run); true once it is
  // ready, and the next run at that level that fits takes it. False at once when none is on its
  // way (warm is off, another level's is prepared, or preparing failed: runs then go the usual
  // way and report what is wrong). For a service that starts taking work once it is ready, and
  // for benchmarks. Thread-safe.
  bool wait_warm(Trust trust, std::chrono::milliseconds timeout) const;

  // Starts a session: its sandbox and interpreter, audited as a run (run_start with session:
  // true). Throws Error when the sandbox cannot be made (what a run would report as an error), or
  // of kind limits when sessions.max (or max_per_caller, for this caller) are open.
  Session open_session(const SessionRequest& request) const;

  const SandboxConfig& config() const;
  const std::filesystem::path& audit_log_path() const;

 private:
  friend class Session;  // a session runs its sandbox and records its cells through the Executor's state
  struct Impl;
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The rootfs a run with image `where` gets (see RunRequest::image; an OCI layout is unpacked into
// the image cache first), checked as a launch checks it. Throws Error saying what was looked at
// or what the image lacks.
std::filesystem::path check_image(const std::string& where);

// A fresh random run id (32 hex digits).
std::string new_run_id();

// Checks the request's caller, labels and run id: a run id is 1-64 of [A-Za-z0-9._-]; a caller
// 1-128 printable ASCII characters; at most 32 labels, keys 1-64 of [A-Za-z0-9._-], values at
// most 256 bytes without control characters. Throws Error saying which and what is accepted.
void validate_run_identity(const RunRequest& req);

}  // namespace sandboxrun
