#include "result_json.hpp"

namespace sandboxrun::cli {

using nlohmann::json;

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

json report_to_json(const RunReport& r) {
  const RunOutcome& o = r.outcome;
  json j = {{"run_id", r.run_id},
            {"status", to_string(o.status)},
            {"exit_code", o.exit_code},
            {"stdout", o.stdout_data},
            {"stderr", o.stderr_data},
            {"stdout_truncated", o.stdout_truncated},
            {"stderr_truncated", o.stderr_truncated},
            {"duration_ms", o.duration.count()},
            {"resources", resources_to_json(o.usage)},
            {"trust_requested", to_string(r.trust_requested)},
            {"assessment", r.assessment},
            {"audit_seq", r.audit_seq ? json(*r.audit_seq) : json(nullptr)}};
  if (o.signal) j["signal"] = o.signal;
  if (!o.error.empty()) j["error"] = o.error;
  if (r.spec) {
    j["trust"] = to_string(r.spec->trust);
    j["limits"] = limits_to_json(*r.spec);
    j["cgroup"] = o.cgroup_backend;
    j["degradations"] = o.degradations;
  } else {
    j["trust"] = nullptr;
    j["limits"] = nullptr;
  }
  if (!r.network.empty()) j["network"] = r.network;
  auto ms = [](std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1000.0; };
  j["timings_ms"] = {{"prepare", ms(r.prepare)},          {"cgroup", ms(o.timings.cgroup)},
                     {"spawn", ms(o.timings.spawn)},       {"run", ms(o.timings.run)},
                     {"teardown", ms(o.timings.teardown)}};
  return j;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace sandboxrun::cli
