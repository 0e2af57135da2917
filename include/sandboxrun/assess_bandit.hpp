// Bandit and Semgrep as optional second opinions: `bandit -f json -q FILE` run without a shell, with a
// timeout; its findings merge in as rule ids "bandit:B602". A missing or failing Bandit is a
// note in the assessment, never an error.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandboxrun/assess.hpp"

namespace sandboxrun::assess {

struct BanditResult {
  std::vector<Finding> findings;
  int score = 0;  // settings' score per distinct test id, by its highest severity
  std::vector<std::string> notes;
};

// Runs Bandit on `file` (fork/exec/poll, no shell; killed at the timeout).
BanditResult run_bandit(const std::filesystem::path& file, const BanditSettings& settings);

// Converts Bandit's JSON report; a note instead when it is not a report.
BanditResult parse_bandit_report(std::string_view json, const BanditSettings& settings);

// A second-opinion tool run without a shell, killed (with its process group) at the timeout.
struct ToolRun {
  bool exited = false;  // false: not started or timed out (error says which)
  int status = 0;       // waitpid status when exited
  std::string out, err;
  std::string error;
};
ToolRun run_tool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);
// "exit 2: first line of stderr" / "signal 9"
std::string describe_failure(const ToolRun& run);

// Semgrep (`semgrep scan --json --config PACK... FILE`): findings merge in as "semgrep:CHECK_ID".
BanditResult run_semgrep(const std::filesystem::path& file, const SemgrepSettings& settings);
// Converts Semgrep's JSON output ({"results": [{check_id, start: {line}, extra: {message,
// severity}}], "errors": [...]}); a note instead when it is not a report.
BanditResult parse_semgrep_report(std::string_view json, const SemgrepSettings& settings);

// `command` itself when it contains a '/', else its first executable match in $PATH.
std::optional<std::filesystem::path> find_executable(const std::string& command);

}  // namespace sandboxrun::assess
