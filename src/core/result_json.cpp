#include "result_json.hpp"

#include "sandboxrun/executor.hpp"

namespace sandboxrun {

using nlohmann::json;

namespace core {

json limits_to_json(const SandboxSpec& spec) {
  const auto& l = spec.limits;
  json adj = json::array();
  for (const auto& a : spec.adjustments)
    adj.push_back({{"limit", a.limit}, {"from", a.from}, {"to", a.to}, {"reason", a.reason}});
  return {{"cpu_count", l.cpus},
          {"mem_limit_bytes", l.memory_bytes},
          {"pids_limit", l.pids},
          {"timeout_s", l.timeout_s},
          {"tmp_size_bytes", l.tmp_bytes},
          {"output_limit_bytes", l.output_bytes},
          {"network_mode", to_string(spec.network.mode)},
          {"adjustments", adj}};
}

json resources_to_json(const CgroupUsage& u) {
  return {{"cpu_ms", u.cpu_usec / 1000},
          {"memory_peak_bytes", u.memory_peak},
          {"pids_peak", u.pids_peak},
          {"oom_kills", u.oom_kills},
          {"pids_limit_hits", u.pids_max_hits}};
}

}  // namespace core

json RunResult::to_json() const {
  const RunOutcome& o = outcome;
  json j = {{"run_id", run_id},
            {"status", sandboxrun::to_string(status)},
            {"exit_code", exit_code},
            {"stdout", o.stdout_data},
            {"stderr", o.stderr_data},
            {"stdout_truncated", o.stdout_truncated},
            {"stderr_truncated", o.stderr_truncated},
            {"duration_ms", o.duration.count()},
            {"resources", core::resources_to_json(o.usage)},
            {"trust_requested", sandboxrun::to_string(decision.requested)},
            {"overridden", decision.overridden},
            {"assessment", assessment.to_json()},
            {"warnings", warnings},
            {"audit_seq", audit_seq ? json(*audit_seq) : json(nullptr)}};
  if (signal) j["signal"] = signal;
  if (!error.empty()) j["error"] = error;
  if (spec) {
    j["trust"] = sandboxrun::to_string(spec->trust);
    j["limits"] = core::limits_to_json(*spec);
    j["cgroup"] = o.cgroup_backend;
    j["degradations"] = o.degradations;
    j["image_digest"] = image_digest;
  } else {
    j["trust"] = nullptr;
    j["limits"] = nullptr;
  }
  if (!network.empty()) j["network"] = network;
  if (!deps.is_null()) j["deps"] = deps;
  auto ms = [](std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1000.0; };
  j["timings_ms"] = {{"prepare", ms(prepare)},          {"cgroup", ms(o.timings.cgroup)},
                     {"spawn", ms(o.timings.spawn)},    {"run", ms(o.timings.run)},
                     {"teardown", ms(o.timings.teardown)}};
  return j;
}

}  // namespace sandboxrun
