#pragma once

#include <nlohmann/json.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "sandboxrun/launch.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun::cli {

// Everything the `--json` result and the run_end audit record say about one run.
struct RunReport {
  std::string run_id;
  Trust trust_requested = Trust::untrusted;
  const SandboxSpec* spec = nullptr;  // null when the run never got a spec (blocked, bad config)
  RunOutcome outcome;
  nlohmann::json assessment = nlohmann::json::object();
  nlohmann::json network = nlohmann::json::object();
  std::optional<uint64_t> audit_seq;
  // Launcher entry to the start of the launch: config, rules, assessment, audit, seccomp.
  std::chrono::microseconds prepare{0};
};

nlohmann::json limits_to_json(const SandboxSpec& spec);
nlohmann::json resources_to_json(const CgroupUsage& u);
nlohmann::json report_to_json(const RunReport& r);
// JSON text, invalid UTF-8 from the program's output replaced rather than fatal.
std::string dump_json(const nlohmann::json& j);

}  // namespace sandboxrun::cli
