#include "result_json.hpp"

#include <tuple>

#include "common/libcrypto.hpp"
#include "common/utf8.hpp"
#include "sandboxrun/error.hpp"
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
          {"work_size_bytes", l.work_bytes},
          {"output_files_limit", l.output_files},
          {"output_bytes_limit", l.output_total_bytes},
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

json id_slot_to_json(const IdSlotInfo& slot) {
  return {{"slot", slot.slot}, {"host_uid", slot.host_user}, {"host_gid", slot.host_user},
          {"host_root_uid", slot.host_root}};
}

json denied_to_json(const DeniedReport& d, const json& network) {
  json calls = json::array();
  for (const auto& s : d.syscalls) calls.push_back({{"name", s.name}, {"count", s.count}, {"first_args", s.first_args}});
  json refused = json::array();
  uint64_t refused_count = 0;
  if (network.is_object() && network.contains("connections"))
    for (const auto& c : network["connections"])
      if (c.value("verdict", "") != "allowed" && ++refused_count <= kMaxRefusedListed)
        refused.push_back({{"host", c.value("host", "")}, {"port", c.value("port", 0)}, {"reason", c.value("reason", "")}});
  if (calls.empty() && d.other_count == 0 && !d.killed_by_seccomp && refused.empty()) return nullptr;
  json j = {{"syscalls", calls}, {"network", refused}, {"answer", "EPERM"}};
  // Listed up to a bound: 10,000 refusals made a record too large for the log, and the run's
  // run_end was never written.
  if (refused_count > refused.size()) j["network_refused_count"] = refused_count;
  if (d.other_count) j["syscalls_other_count"] = d.other_count;
  // A kill action cannot be answered; the payload's death by SIGSYS is how it shows.
  if (d.killed_by_seccomp) j["killed"] = {{"signal", "SIGSYS"}, {"reason", "a call the profile kills (foreign ABI, TIOCSTI ...)"}};
  return j;
}

std::string denied_summary(const json& denied) {
  if (!denied.is_object()) return {};
  std::string line;
  auto add = [&](const std::string& part) { line += (line.empty() ? "" : "; ") + part; };
  std::string calls;
  for (const auto& s : denied["syscalls"])
    calls += (calls.empty() ? "" : ", ") + s["name"].get<std::string>() + " x" + std::to_string(s["count"].get<uint64_t>());
  if (denied.contains("syscalls_other_count"))
    calls += (calls.empty() ? "" : ", ") + std::string("others x") + std::to_string(denied["syscalls_other_count"].get<uint64_t>());
  if (!calls.empty()) add("syscalls " + calls + " (EPERM)");
  if (!denied["network"].empty())
    add("network " + std::to_string(denied.value("network_refused_count", denied["network"].size())) +
        " connection(s) refused");
  if (denied.contains("killed")) add("killed by seccomp (SIGSYS)");
  return line.empty() ? line : "denied: " + line;
}

}  // namespace core

namespace {

std::string base64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  const int n = libcrypto().EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                            reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

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
  // JSON strings are text: bytes that are not UTF-8 would come out as U+FFFD, so such a stream
  // is also given exactly, in base64 (a sequence cut by the output limit still counts as text).
  for (const auto& [name, data, cut] : {std::tuple{"stdout_base64", &o.stdout_data, o.stdout_truncated},
                                        std::tuple{"stderr_base64", &o.stderr_data, o.stderr_truncated}})
    if (!valid_utf8(cut ? std::string_view(*data).substr(0, utf8_complete_prefix(*data)) : std::string_view(*data))) {
      try {
        j[name] = base64(*data);
      } catch (const Error& e) {  // no libcrypto: the lossy text is all there is, and why
        j["warnings"].push_back(std::string(name) + " not given: " + e.describe());
      }
    }
  if (signal) j["signal"] = signal;
  if (!error.empty()) j["error"] = error;
  if (decision.override_refused) j["override_refused"] = *decision.override_refused;
  if (spec) {
    j["trust"] = sandboxrun::to_string(spec->trust);
    j["limits"] = core::limits_to_json(*spec);
    j["cgroup"] = o.cgroup_backend;
    j["degradations"] = o.degradations;
    j["image_digest"] = image_digest;
    j["id_slot"] = o.id_slot ? core::id_slot_to_json(*o.id_slot) : json(nullptr);
    j["landlock"] = {{"mode", sandboxrun::to_string(spec->landlock)},
                     {"abi", o.landlock_abi},
                     {"enforced", o.landlock_enforced}};
  } else {
    j["trust"] = nullptr;
    j["limits"] = nullptr;
  }
  if (!network.empty()) j["network"] = network;
  j["caller"] = caller ? json(*caller) : json(nullptr);
  j["labels"] = labels;
  json in = json::array();
  for (const auto& f : inputs) in.push_back(sandboxrun::to_json(f));
  j["inputs"] = in;
  if (outputs) {
    json files = json::array(), skipped = json::array();
    for (const auto& f : outputs->files) files.push_back(sandboxrun::to_json(f));
    for (const auto& s : outputs->skipped) skipped.push_back({{"path", s.path}, {"reason", s.reason}});
    j["outputs"] = files;
    j["outputs_truncated"] = outputs->truncated;
    j["outputs_skipped"] = skipped;
    j["outputs_skipped_count"] = outputs->skipped_count;
    if (!outputs->error.empty()) j["outputs_error"] = outputs->error;
  }
  if (json d = core::denied_to_json(o.denied, network); !d.is_null()) j["denied"] = d;
  if (!deps.is_null()) j["deps"] = deps;
  auto ms = [](std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1000.0; };
  j["timings_ms"] = {{"prepare", ms(prepare)},          {"cgroup", ms(o.timings.cgroup)},
                     {"spawn", ms(o.timings.spawn)},    {"run", ms(o.timings.run)},
                     {"teardown", ms(o.timings.teardown)}};
  return j;
}

}  // namespace sandboxrun
