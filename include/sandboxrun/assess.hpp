// The security assessor: scores a Python file LOW / MEDIUM / HIGH / BLOCKED before it runs,
// and turns that verdict into the trust level the run may use (see docs/assess.md).
#pragma once

#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandboxrun/assess_analyzer.hpp"
#include "sandboxrun/record.hpp"
#include "sandboxrun/override_policy.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun {

namespace assess {
class RuleSet;
}

struct Finding {
  std::string rule;      // "SR-PROC-003", "bandit:B602"
  std::string severity;  // info | low | medium | high | critical
  int line = 0;          // 1-based; 0 when the finding is about the whole file
  std::string message;
  static constexpr auto fields = std::tuple{record::field("rule", &Finding::rule), record::field("severity", &Finding::severity),
                                            record::field("line", &Finding::line), record::field("message", &Finding::message)};
  bool operator==(const Finding&) const = default;
};

enum class RiskLevel { low, medium, high, blocked };
const char* to_string(RiskLevel level) noexcept;  // "LOW" ... "BLOCKED"
std::optional<RiskLevel> parse_risk_level(std::string_view s) noexcept;  // any case

struct Assessment {
  RiskLevel level = RiskLevel::low;
  int score = 0;
  std::vector<Finding> findings;   // in line order
  std::vector<std::string> notes;  // e.g. "bandit not found on PATH; built-in rules only"
  // {level, score, findings[{rule, severity, line, message}], notes}
  nlohmann::json to_json() const;
};

struct BanditSettings {
  bool enabled = false;
  std::string command = "bandit";  // a name looked up in PATH, or a path
  std::chrono::milliseconds timeout{30000};
  int score_low = 2, score_medium = 10, score_high = 25;  // per distinct bandit test id

  using B = BanditSettings;
  static constexpr auto fields = std::tuple{
      record::field("enabled", &B::enabled), record::field("command", &B::command), record::field("timeout", &B::timeout),
      record::field("score_low", &B::score_low), record::field("score_medium", &B::score_medium),
      record::field("score_high", &B::score_high)};
};

struct SemgrepSettings {
  bool enabled = false;
  std::string command = "semgrep";                  // a name looked up in PATH, or a path
  std::vector<std::string> configs{"p/python"};     // rule packs or files, one --config each
  std::chrono::milliseconds timeout{60000};
  int score_info = 2, score_warning = 10, score_error = 25;  // per distinct check id

  using S = SemgrepSettings;
  static constexpr auto fields = std::tuple{
      record::field("enabled", &S::enabled), record::field("command", &S::command),
      record::field("configs", &S::configs), record::field("timeout", &S::timeout),
      record::field("score_info", &S::score_info), record::field("score_warning", &S::score_warning),
      record::field("score_error", &S::score_error)};
};

struct SecurityConfig {
  std::filesystem::path source;      // the security.yaml it came from
  std::filesystem::path rules_path;  // resolved rules file
  std::shared_ptr<const assess::RuleSet> rules;
  std::string rules_cache_note;  // why the compiled-rules cache was bypassed or rebuilt, if it was
  int medium_threshold = 10;  // total score at which MEDIUM starts
  int high_threshold = 40;    // and HIGH; BLOCKED comes only from critical rules
  // The loosest trust each level allows, indexed by RiskLevel; nullopt refuses the run.
  std::array<std::optional<Trust>, 4> verdict_trust{Trust::trusted, Trust::unknown, Trust::untrusted,
                                                    std::nullopt};
  Trust override_trust = Trust::untrusted;  // a refused level run with --override
  OverridePolicy override_policy;           // who may override, and what a reason must say
  uint64_t max_bytes = 32ull << 20;         // larger files: the head is assessed, and flagged
  uint32_t max_findings_per_rule = 10;
  assess::AnalyzerLimits limits;
  BanditSettings bandit;
  SemgrepSettings semgrep;

  // The settings of security.yaml (its cached form); source, rules_path, rules and
  // rules_cache_note are found or made at load.
  using C = SecurityConfig;
  static constexpr auto fields = std::tuple{
      record::field("medium_threshold", &C::medium_threshold), record::field("high_threshold", &C::high_threshold),
      record::field("verdict_trust", &C::verdict_trust), record::field("override_trust", &C::override_trust),
      record::field("override_policy", &C::override_policy), record::field("max_bytes", &C::max_bytes),
      record::field("max_findings_per_rule", &C::max_findings_per_rule), record::field("limits", &C::limits),
      record::field("bandit", &C::bandit), record::field("semgrep", &C::semgrep)};
};

// Reads security.yaml and the rules file it names. A relative rules path is looked up next to
// security.yaml first, then under project_root. Throws sandboxrun::Error naming the file, the
// key and what was expected (unknown keys included).
SecurityConfig load_security_config(const std::filesystem::path& security_yaml,
                                    const std::filesystem::path& project_root);

// Built-in analysis only; never throws on any input (size, encoding, syntax).
Assessment assess_source(std::string_view source, const SecurityConfig& config);

// Reads the file (bounded by max_bytes), assesses it, and adds Bandit's findings when enabled
// and installed. Throws sandboxrun::Error (with errno) when the file cannot be read.
Assessment assess_file(const std::filesystem::path& file, const SecurityConfig& config);

// The trust level a run may use after this verdict: the stricter of the request and the
// level's cap; nullopt when the level refuses the run and no override was given.
std::optional<Trust> steer_trust(RiskLevel level, Trust requested, bool override_given,
                                 const SecurityConfig& config);

// What a run may do after its verdict.
struct Decision {
  Trust requested = Trust::untrusted;
  std::optional<Trust> used;        // unset: the run was refused (BLOCKED without an override)
  bool overridden = false;          // a refused verdict ran because of override_reason
  // Set when override_reason was needed but security.yaml's override policy refused it (who
  // may override, what a reason must say): why, and what is required. The run is refused (126).
  std::optional<std::string> override_refused;
  bool refused() const noexcept { return !used.has_value(); }
};

// The decision on a run whose code was assessed `level`: the trust level it runs at (the
// stricter of the request and the level's cap), or why it does not run. An override reason is
// weighed only where the verdict needs one, and then only as security.yaml's override policy
// allows for the process `who`.
Decision decide(RiskLevel level, Trust requested, const std::optional<std::string>& override_reason,
                const SecurityConfig& config, const ProcessIdentity& who);

}  // namespace sandboxrun
