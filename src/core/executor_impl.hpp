// The Executor's state (open() loads it once) and one run's audit records, shared by
// executor.cpp (open, assessment, decision) and executor_launch.cpp (spec, launch, result).
#pragma once

#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "warm_pool.hpp"
#include "launch/netns_pool.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/audit_events.hpp"
#include "sandboxrun/executor.hpp"
#include "sandboxrun/seccomp.hpp"

namespace sandboxrun {

using nlohmann::json;

// A profile compiled at open(), or why it could not be: the error surfaces only in a run that
// uses that profile, so a broken profile of one level does not stop the others.
struct CompiledProfile {
  std::optional<SeccompProgram> program;
  std::exception_ptr error;
};

inline bool is_python(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".py") == 0;
}

struct Executor::Impl {
  class RunRecords;
  SandboxConfig cfg;
  SecurityConfig security;
  HostResources host;
  // Every trust level's, by path, compiled at open; a single run's only when a run needs it (its
  // own level, or the untrusted one of a dependency phase), not every level's.
  mutable std::map<std::filesystem::path, CompiledProfile> profiles;
  mutable std::mutex profiles_mu;
  std::filesystem::path seccomp_cache;
  // One writer handle for every thread: appends are serialised here (and across processes by
  // the log's own flock).
  mutable std::mutex audit_mu;
  mutable std::optional<AuditLog> audit;
  // Network namespaces made between runs (as root): a run's clone enters one instead of
  // making its own, the costliest part of the clone.
  std::unique_ptr<launch::NetnsPool> netns;
  // The host's cgroup side (probe, parents, sweep), worked out at open instead of every run.
  std::shared_ptr<const CgroupHost> cgroups;

  // The compiled profile at `path` (a reference that stays valid: map nodes do not move).
  const SeccompProgram& profile(const std::filesystem::path& path) const {
    std::lock_guard lock(profiles_mu);
    auto it = profiles.find(path);
    if (it == profiles.end()) it = profiles.emplace(path, compile_profile(path)).first;
    if (it->second.error) std::rethrow_exception(it->second.error);
    return *it->second.program;
  }
  CompiledProfile compile_profile(const std::filesystem::path& path) const {
    CompiledProfile c;
    try {
      c.program = load_or_compile_seccomp_profile(path, SeccompContext{}, seccomp_cache);
    } catch (const Error&) {
      c.error = std::current_exception();
    }
    return c;
  }

  // Every record of a run carries who it is for.
  template <class E>
  uint64_t append(E e, const RunResult& r) const {
    e.run.caller = r.caller;
    e.run.labels = r.labels;
    std::lock_guard lock(audit_mu);
    try {
      return audit::append_event(*audit, r.run_id, e);
    } catch (Error& err) {
      throw std::move(err).as(ErrorKind::audit);
    }
  }
  // Claims the run id in the audit log's index: false when a record or an earlier claim has it.
  bool claim_run_id(const std::string& id) const {
    std::lock_guard lock(audit_mu);
    return audit->claim_run_id(id);
  }
  CodeRef code_ref(std::string_view code, const std::string& name) const { return audit->code_ref(code, name); }
  CodeRef store_code(std::string_view code, const std::string& name) const {
    std::lock_guard lock(audit_mu);
    return audit->store_code(code, name);
  }
  bool store_file(std::string_view data, const std::string& sha256, bool code = false) const {
    std::lock_guard lock(audit_mu);
    return audit->store_file(data, sha256, code);
  }
  std::optional<CodeDiff> version_diff(const RunRequest& req, const RunResult& r) const {
    std::lock_guard lock(audit_mu);
    return audit->version_diff(r.caller, req.name, req.code);
  }
  void set_latest_version(const RunRequest& req, RunResult& r, const std::string& sha256) const {
    try {
      std::lock_guard lock(audit_mu);
      audit->set_latest_version(r.caller, req.name, sha256, r.run_id);
    } catch (const Error& e) {
      r.warnings.push_back("audit: the next run of " + req.name + " will not diff against this one: " + e.describe());
    }
  }

  // A session's sandbox (session.cpp): its program is the driver, not assessed (its cells are);
  // it lasts lifetime_s; on_started gets pid 1. Null for a run.
  struct SessionPlan {
    double lifetime_s = 0;
    std::function<void(pid_t)> on_started;
  };
  // Executor::run, and a session's sandbox when `session` is set.
  RunResult execute(const RunRequest& req, const SessionPlan* session) const;
  Assessment assess_text(std::string_view source) const;
  // Open sessions, all and by caller ("" for none): bounded by sandbox.yaml's sessions.
  mutable std::mutex sessions_mu;
  mutable size_t sessions_open = 0;
  mutable std::map<std::string, size_t> sessions_by_caller;

  // The script and every .py input, assessed: the most severe verdict wins, and an input's
  // findings name its file. Each of them is kept in the code store (refs in `stored`).
  Assessment assess_job(const RunRequest& req, std::vector<CodeRef>& stored) const;
  // The run's sandbox spec, image and seccomp program (everything but the launch). Throws Error.
  // `deps`, when set, runs the dependency phase for a spec (with its image) that has
  // requirements, and returns the installed set to bind. The spec is then final (finalize_spec).
  using DepsStep = std::function<std::optional<RunBind>(const SandboxSpec&)>;
  void prepare_launch(const RunRequest& req, RunResult& r, LaunchRequest& launch, const DepsStep& deps) const;
  // A sandbox for trust level `t` set up ahead (on the warm pool's thread), as prepare_launch
  // would set one up for a request that fits it (core::fits_warm). Throws Error.
  core::WarmSandbox prepare_warm(Trust t) const;
  // Copies what the program left in /work to the output directory (also after a timeout, an
  // OOM kill or a signal: the fd outlives the sandbox).
  // `stored` says, per copied file, whether the object store kept it.
  void collect_job_outputs(const RunRequest& req, RunResult& r, const UniqueFd& work_dir, const UniqueFd& out_dir,
                           std::vector<bool>& stored) const;
  // Launches the prepared request (in `warm` when set) and records what happened.
  void launch_and_record(const RunRequest& req, RunResult& r, LaunchRequest& launch, const CodeRef& code,
                         RunRecords& log, UniqueFd out_dir, std::chrono::steady_clock::time_point entered,
                         core::WarmSandbox* warm) const;
  // ExecutorOptions::warm: declared late, so that its thread stops before the rest goes.
  std::unique_ptr<core::WarmPool> warm_pool;
  // ExecutorOptions::single_run: what is left of its run (pid 1 on its way out, the cgroup), kept
  // until the Executor goes, so that the caller reports the result while pid 1's exit tears the
  // sandbox's namespaces down. Declared last: dropped first.
  bool single_run = false;
  bool stop_signals = true;  // ExecutorOptions::stop_signals
  mutable std::mutex remains_mu;
  mutable std::vector<std::shared_ptr<void>> single_remains;
};

// One run's audit records, in order. The steps up to run_start may wait (defer): the launcher
// takes them while the sandbox sets itself up (before_exec), before it releases the payload, and
// any record appended earlier takes them first, so the log's order is the order of events and
// no program starts unrecorded. A step is dropped only once it succeeded.
class Executor::Impl::RunRecords {
 public:
  RunRecords(const Impl& im, const RunResult& r) : im_(im), r_(r) {}
  void defer(std::function<void()> step) { pending_.push_back(std::move(step)); }
  template <class E>
  void defer_record(E e) {
    defer([this, e = std::move(e)] { im_.append(e, r_); });
  }
  void flush() {
    for (; !pending_.empty(); pending_.pop_front()) pending_.front()();
  }
  template <class E>
  uint64_t append(E e) {
    flush();
    return im_.append(std::move(e), r_);
  }

 private:
  const Impl& im_;
  const RunResult& r_;
  std::deque<std::function<void()>> pending_;
};

}  // namespace sandboxrun
