// create_cgroup: plan (cgroup_probe.cpp), prepare the parent, sweep stale runs, build the
// backend. Fails closed unless the settings allow a degraded run.
#include <cerrno>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

using namespace cgroup_detail;

namespace {

constexpr const char* kFixHint =
    "run as root, or from a systemd unit with Delegate=yes, or set cgroup.parent to a delegated "
    "cgroup; or allow a degraded run without limits in the config";

// Errors that say the host (permissions, delegation, missing controller files) cannot give us a
// cgroup, as opposed to a caller mistake such as a reused run id.
bool host_lacks(int err) {
  return err == EACCES || err == EPERM || err == EROFS || err == ENOENT || err == EBUSY ||
         err == ENOSPC || err == EOPNOTSUPP;
}

std::unique_ptr<Cgroup> build(const Plan& plan, const std::string& name, const Limits& limits,
                              std::vector<std::string>* warnings) {
  if (plan.version == "v2") {
    prepare_v2_parent(plan);
    sweep_stale({{plan.v2_parent, true}}, warnings);
    return make_v2_cgroup(plan, name, limits);
  }
  std::vector<SweepParent> parents;
  if (!plan.unified_parent.empty()) parents.push_back({plan.unified_parent, true});
  for (const auto& [ctrl, dir] : plan.v1_parents) parents.push_back({dir, false});
  sweep_stale(parents, warnings);
  return make_v1_cgroup(plan, name, limits);
}

}  // namespace

std::unique_ptr<Cgroup> create_cgroup(const std::string& run_id, const Limits& limits,
                                      const CgroupSettings& settings, std::string* degraded_reason,
                                      std::vector<std::string>* warnings) {
  validate_run_id(run_id);
  Plan plan = plan_host_cgroups(settings);
  if (plan.version == "none") {
    if (settings.allow_degraded) {
      if (degraded_reason) *degraded_reason = plan.detail;
      return nullptr;
    }
    // plan.detail already says what is missing and how to fix it.
    throw Error("cannot limit memory and pids: " + plan.detail,
                "or allow a degraded run without limits in the config");
  }
  try {
    return build(plan, run_dir_name(run_id, self_owner()), limits, warnings);
  } catch (const Error& e) {
    if (!host_lacks(e.sys_errno())) throw;
    if (settings.allow_degraded) {
      if (degraded_reason) *degraded_reason = e.describe();
      return nullptr;
    }
    if (!e.hint().empty()) throw;
    throw Error(std::string("cannot set up the run's cgroup: ") + e.what(), kFixHint);
  }
}

}  // namespace sandboxrun
