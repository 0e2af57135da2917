// create_cgroup and CgroupHost: plan (cgroup_probe.cpp), prepare the parent, sweep stale runs,
// build the backend. Fails closed unless the settings allow a degraded run.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

using namespace cgroup_detail;

namespace {

constexpr const char* kFixHint =
    "run as root, or from a systemd unit with Delegate=yes, or set cgroup.parent to a delegated "
    "cgroup; or set cgroup.allow_degraded: true in sandbox.yaml to run without those limits";

// Errors that say the host (permissions, delegation, missing controller files) cannot give us a
// cgroup, as opposed to a caller mistake such as a reused run id.
bool host_lacks(int err) {
  return err == EACCES || err == EPERM || err == EROFS || err == ENOENT || err == EBUSY ||
         err == ENOSPC || err == EOPNOTSUPP;
}

// Makes the parents (v2: enabling the controllers on the way down; the v1 backend makes its
// own) and removes stale runs of dead launchers under them (v2 parents first: cgroup.kill
// there empties the v1 twins too).
void prepare(const Plan& plan, std::vector<std::string>* warnings) {
  if (plan.enclosing) return;  // nothing of ours to make or sweep
  if (plan.version == "v2") {
    prepare_v2_parent(plan);
    sweep_stale({{plan.v2_parent, true}}, warnings);
    return;
  }
  std::vector<SweepParent> parents;
  if (!plan.unified_parent.empty()) parents.push_back({plan.unified_parent, true});
  for (const auto& [ctrl, dir] : plan.v1_parents) parents.push_back({dir, false});
  sweep_stale(parents, warnings);
}

std::unique_ptr<Cgroup> make(const Plan& plan, const std::string& name, const Limits& limits) {
  return plan.version == "v2" ? make_v2_cgroup(plan, name, limits) : make_v1_cgroup(plan, name, limits);
}

}  // namespace

struct CgroupHost::State {
  CgroupSettings settings;
  Plan plan;
  Owner owner;
  std::exception_ptr setup_error;  // the probe or the owner tag failed: every create() says so
  std::mutex mu;                   // guards the rest
  // When the parents were last made and swept; unset: not yet, or that failed.
  std::optional<std::chrono::steady_clock::time_point> swept;
  std::vector<std::string> warnings;  // from the construction's sweep, for the next create()
  // cgroup.mode enclosing: set while a run holds the container's cgroup.
  std::shared_ptr<std::atomic<bool>> enclosing_busy = std::make_shared<std::atomic<bool>>(false);
};

CgroupHost::CgroupHost(const CgroupSettings& settings) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.settings = settings;
  try {
    s.plan = plan_host_cgroups(settings);
    s.owner = self_owner();
  } catch (...) {
    s.setup_error = std::current_exception();
    return;
  }
  if (s.plan.version == "none") return;
  try {
    prepare(s.plan, &s.warnings);
    s.swept = std::chrono::steady_clock::now();
  } catch (const Error&) {
    // create() prepares again and reports the failure for its run, degraded or refused.
  }
}

CgroupHost::~CgroupHost() = default;

const CgroupSettings& CgroupHost::settings() const noexcept { return state_->settings; }

std::unique_ptr<Cgroup> CgroupHost::create(const std::string& run_id, const Limits& limits,
                                           std::string* degraded_reason,
                                           std::vector<std::string>* warnings) const {
  validate_run_id(run_id);
  State& s = *state_;
  if (s.setup_error) std::rethrow_exception(s.setup_error);
  const Plan& plan = s.plan;
  if (plan.version == "none") {
    if (s.settings.allow_degraded) {
      if (degraded_reason) *degraded_reason = plan.detail;
      return nullptr;
    }
    // plan.detail already says what is missing and how to fix it.
    throw Error("cannot limit memory and pids: " + plan.detail,
                "or set cgroup.allow_degraded: true in sandbox.yaml to run without those limits")
        .as(ErrorKind::limits);
  }
  // Refusals of the enclosing cgroup (not alone, looser limits) are never "degraded": its
  // limits exist and must be right, and allow_degraded is for hosts that have none.
  if (plan.enclosing) return make_enclosing_cgroup(plan, limits, s.enclosing_busy);
  try {
    const std::string name = run_dir_name(run_id, s.owner);
    const auto prepare_locked = [&](bool always) {
      std::lock_guard<std::mutex> lock(s.mu);
      if (warnings) warnings->insert(warnings->end(), s.warnings.begin(), s.warnings.end());
      s.warnings.clear();
      const auto now = std::chrono::steady_clock::now();
      if (always || !s.swept || now - *s.swept >= std::chrono::seconds(kSweepIntervalSeconds)) {
        prepare(plan, warnings);
        s.swept = now;
      }
    };
    prepare_locked(false);
    try {
      return make(plan, name, limits);
    } catch (const Error& e) {
      // The parent went away under a long-lived host (an administrator, another tool): make
      // it again, once.
      if (e.sys_errno() != ENOENT) throw;
      prepare_locked(true);
      return make(plan, name, limits);
    }
  } catch (const Error& e) {
    if (!host_lacks(e.sys_errno())) throw;
    if (s.settings.allow_degraded) {
      if (degraded_reason) *degraded_reason = e.describe();
      return nullptr;
    }
    if (!e.hint().empty()) throw Error(e).as(ErrorKind::limits);
    throw Error(std::string("cannot set up the run's cgroup: ") + e.what(), kFixHint).as(ErrorKind::limits);
  }
}

std::unique_ptr<Cgroup> create_cgroup(const std::string& run_id, const Limits& limits,
                                      const CgroupSettings& settings, std::string* degraded_reason,
                                      std::vector<std::string>* warnings) {
  validate_run_id(run_id);
  return CgroupHost(settings).create(run_id, limits, degraded_reason, warnings);
}

}  // namespace sandboxrun
