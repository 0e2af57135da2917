// Bandit as an optional second opinion: `bandit -f json -q FILE` run without a shell, with a
// timeout; its findings merge in as rule ids "bandit:B602". A missing or failing Bandit is a
// note in the assessment, never an error.
#pragma once

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

// `command` itself when it contains a '/', else its first executable match in $PATH.
std::optional<std::filesystem::path> find_executable(const std::string& command);

}  // namespace sandboxrun::assess
