#include "sandboxrun/result_records.hpp"

#include <tuple>

#include "common/base64.hpp"
#include "common/utf8.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/executor.hpp"

namespace sandboxrun {

using nlohmann::json;

LimitsRecord LimitsRecord::of(const SandboxSpec& spec) {
  const auto& l = spec.limits;
  LimitsRecord r{l.cpus,           l.memory_bytes, l.pids,         l.timeout_s,
                 l.tmp_bytes,      l.output_bytes, l.work_bytes,   l.output_files,
                 l.output_total_bytes, to_string(spec.network.mode), {}};
  for (const auto& a : spec.adjustments) r.adjustments.push_back({a.limit, a.from, a.to, a.reason});
  return r;
}

ResourcesRecord ResourcesRecord::of(const CgroupUsage& u) {
  return {u.cpu_usec / 1000, u.memory_peak, u.pids_peak, u.oom_kills, u.pids_max_hits};
}

IdSlotRecord IdSlotRecord::of(const IdSlotInfo& slot) {
  return {slot.slot, slot.host_user, slot.host_user, slot.host_root};
}

std::optional<DeniedRecord> DeniedRecord::of(const DeniedReport& d, const std::optional<NetworkReport>& network) {
  DeniedRecord r;
  for (const auto& s : d.syscalls) r.syscalls.push_back({s.name, s.count, s.first_args});
  uint64_t refused = 0;
  if (network)
    for (const auto& c : network->connections)
      if (c.verdict != "allowed" && ++refused <= kMaxRefusedListed) r.network.push_back({c.host, c.port, c.reason});
  if (r.syscalls.empty() && d.other_count == 0 && !d.killed_by_seccomp && r.network.empty()) return std::nullopt;
  // Listed up to a bound: 10,000 refusals made a record too large for the log, and the run's
  // run_end was never written.
  if (refused > r.network.size()) r.network_refused_count = refused;
  r.syscalls_other_count = d.other_count;
  // A kill action cannot be answered; the payload's death by SIGSYS is how it shows.
  if (d.killed_by_seccomp) r.killed = KilledRecord{"SIGSYS", "a call the profile kills (foreign ABI, TIOCSTI ...)"};
  return r;
}

std::string DeniedRecord::summary() const {
  std::string line;
  auto add = [&](const std::string& part) { line += (line.empty() ? "" : "; ") + part; };
  std::string calls;
  for (const auto& s : syscalls) calls += (calls.empty() ? "" : ", ") + s.name + " x" + std::to_string(s.count);
  if (syscalls_other_count) calls += (calls.empty() ? "" : ", ") + std::string("others x") + std::to_string(syscalls_other_count);
  if (!calls.empty()) add("syscalls " + calls + " (EPERM)");
  if (!network.empty())
    add("network " + std::to_string(network_refused_count.value_or(network.size())) + " connection(s) refused");
  if (killed) add("killed by seccomp (SIGSYS)");
  return line.empty() ? line : "denied: " + line;
}

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
            {"resources", ResourcesRecord::of(o.usage)},
            {"trust_requested", sandboxrun::to_string(decision.requested)},
            {"overridden", decision.overridden},
            {"assessment", assessment.to_json()},
            {"warnings", warnings},
            {"audit_seq", audit_seq ? json(*audit_seq) : json(nullptr)}};
  // JSON strings are text: bytes that are not UTF-8 would come out as U+FFFD, so such a stream
  // is also given exactly, in base64 (a sequence cut by the output limit still counts as text).
  for (const auto& [name, data, cut] : {std::tuple{"stdout_base64", &o.stdout_data, o.stdout_truncated},
                                        std::tuple{"stderr_base64", &o.stderr_data, o.stderr_truncated}})
    if (!valid_utf8(cut ? std::string_view(*data).substr(0, utf8_complete_prefix(*data)) : std::string_view(*data))) {
      try {
        j[name] = base64_encode(*data);
      } catch (const Error& e) {  // no libcrypto: the lossy text is all there is, and why
        j["warnings"].push_back(std::string(name) + " not given: " + e.describe());
      }
    }
  if (signal) j["signal"] = signal;
  if (!error.empty()) {
    j["error"] = error;
    j["error_kind"] = sandboxrun::to_string(error_kind);
  }
  if (decision.override_refused) j["override_refused"] = *decision.override_refused;
  if (spec) {
    j["trust"] = sandboxrun::to_string(spec->trust);
    j["limits"] = LimitsRecord::of(*spec);
    j["cgroup"] = o.cgroup_backend;
    j["degradations"] = o.degradations;
    j["image_digest"] = image_digest;
    j["id_slot"] = o.id_slot ? json(IdSlotRecord::of(*o.id_slot)) : json(nullptr);
    j["landlock"] = {{"mode", sandboxrun::to_string(spec->landlock)},
                     {"abi", o.landlock_abi},
                     {"enforced", o.landlock_enforced}};
  } else {
    j["trust"] = nullptr;
    j["limits"] = nullptr;
  }
  if (network) j["network"] = *network;
  j["caller"] = caller ? json(*caller) : json(nullptr);
  j["labels"] = labels;
  j["inputs"] = inputs;
  if (outputs) {
    json skipped = json::array();
    for (const auto& s : outputs->skipped) skipped.push_back({{"path", s.path}, {"reason", s.reason}});
    j["outputs"] = outputs->files;
    j["outputs_truncated"] = outputs->truncated;
    j["outputs_skipped"] = skipped;
    j["outputs_skipped_count"] = outputs->skipped_count;
    if (!outputs->error.empty()) j["outputs_error"] = outputs->error;
  }
  if (auto d = DeniedRecord::of(o.denied, network)) j["denied"] = *d;
  if (deps) j["deps"] = *deps;
  auto ms = [](std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1000.0; };
  j["timings_ms"] = {{"prepare", ms(prepare)},          {"cgroup", ms(o.timings.cgroup)},
                     {"spawn", ms(o.timings.spawn)},    {"run", ms(o.timings.run)},
                     {"teardown", ms(o.timings.teardown)}};
  return j;
}

}  // namespace sandboxrun
