// security.yaml: rules file, score thresholds, verdict -> trust mapping, analysis limits and
// Bandit settings; and steer_trust, which applies the mapping.
#include <yaml-cpp/yaml.h>

#include "internal.hpp"
#include "sandboxrun/assess.hpp"
#include "sandboxrun/assess_rules.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"
#include "yaml_util.hpp"

namespace sandboxrun {

namespace {

using assess::detail::boolean;
using assess::detail::check_keys;
using assess::detail::Ctx;
using assess::detail::integer;
using assess::detail::number;
using assess::detail::scalar;

// Trust as a rank (untrusted 0 < unknown 1 < trusted 2); -1 is "refuse".
int rank(std::optional<Trust> t) { return t ? static_cast<int>(*t) : -1; }

std::optional<Trust> trust_named(const std::string& s) {
  if (s == "untrusted") return Trust::untrusted;
  if (s == "unknown") return Trust::unknown;
  if (s == "trusted" || s == "keep") return Trust::trusted;
  return std::nullopt;
}

uint64_t size_value(const YAML::Node& n, const Ctx& c) {
  const std::string s = scalar(n, c, "a size such as 32m");
  auto v = parse_size(s);
  if (!v || *v == 0) c.fail("'" + s + "'", "a size such as 512k, 32m or 1g");
  return *v;
}

}  // namespace

SecurityConfig load_security_config(const std::filesystem::path& security_yaml,
                                    const std::filesystem::path& project_root) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(security_yaml.string());
  } catch (const YAML::BadFile&) {
    throw Error(security_yaml.string() + ": cannot read the security configuration",
                "create it or point --config-dir at the directory that holds it", ENOENT);
  } catch (const YAML::Exception& e) {
    throw Error(security_yaml.string() + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg, "fix the YAML syntax");
  }
  SecurityConfig cfg;
  cfg.source = security_yaml;
  const Ctx top{security_yaml, "security.yaml"};
  try {
    check_keys(root, {"rules", "thresholds", "verdicts", "override_trust", "limits", "bandit"}, top);
    if (!root["rules"]) top.fail("missing rules", "rules: path of the assessor rules file");
    {
      const std::filesystem::path rel = scalar(root["rules"], top / "rules", "a path");
      std::vector<std::filesystem::path> tried;
      if (rel.is_absolute()) {
        tried.push_back(rel);
      } else {
        tried.push_back(security_yaml.parent_path() / rel);
        tried.push_back(project_root / rel);
      }
      for (const auto& p : tried)
        if (cfg.rules_path.empty() && std::filesystem::is_regular_file(p)) cfg.rules_path = p;
      if (cfg.rules_path.empty()) {
        std::string list;
        for (const auto& p : tried) list += (list.empty() ? "" : " or ") + p.string();
        (top / "rules").fail("no rules file at " + list, "an existing rules file (relative to this file or the project root)");
      }
    }
    if (const auto t = root["thresholds"]) {
      const Ctx c = top / "thresholds";
      check_keys(t, {"medium", "high"}, c);
      if (t["medium"]) cfg.medium_threshold = integer(t["medium"], c / "medium", 1, 100000);
      if (t["high"]) cfg.high_threshold = integer(t["high"], c / "high", 1, 100000);
      if (cfg.high_threshold < cfg.medium_threshold)
        (c / "high").fail(std::to_string(cfg.high_threshold) + " is below medium " + std::to_string(cfg.medium_threshold),
                          "high >= medium");
    }
    if (const auto v = root["verdicts"]) {
      const Ctx c = top / "verdicts";
      check_keys(v, {"low", "medium", "high", "blocked"}, c);
      const char* names[] = {"low", "medium", "high", "blocked"};
      for (size_t i = 0; i < 4; ++i) {
        if (!v[names[i]]) continue;
        const std::string s = scalar(v[names[i]], c / names[i]);
        if (s == "refuse") cfg.verdict_trust[i] = std::nullopt;
        else if (auto t = trust_named(s)) cfg.verdict_trust[i] = t;
        else (c / names[i]).fail("'" + s + "'", "keep, trusted, unknown, untrusted or refuse");
      }
      // A riskier verdict may never allow more than a safer one.
      for (size_t i = 1; i < 4; ++i)
        if (rank(cfg.verdict_trust[i]) > rank(cfg.verdict_trust[i - 1]))
          (c / names[i]).fail("looser than verdicts." + std::string(names[i - 1]),
                              "each level at most as permissive as the level below it");
    }
    if (root["override_trust"]) {
      const std::string s = scalar(root["override_trust"], top / "override_trust");
      auto t = trust_named(s);
      if (!t || s == "keep") (top / "override_trust").fail("'" + s + "'", "untrusted, unknown or trusted");
      cfg.override_trust = *t;
    }
    if (const auto l = root["limits"]) {
      const Ctx c = top / "limits";
      check_keys(l, {"max_bytes", "long_line", "wide_gap", "entropy_min_length", "entropy_bits", "max_nesting",
                     "max_fragment_depth", "max_fragment_bytes", "max_findings_per_rule"},
                 c);
      auto& a = cfg.limits;
      if (l["max_bytes"]) cfg.max_bytes = size_value(l["max_bytes"], c / "max_bytes");
      if (l["long_line"]) a.long_line = static_cast<uint32_t>(integer(l["long_line"], c / "long_line", 80, 1 << 24));
      if (l["wide_gap"]) a.wide_gap = static_cast<uint32_t>(integer(l["wide_gap"], c / "wide_gap", 8, 1 << 20));
      if (l["entropy_min_length"])
        a.entropy_min_length = static_cast<uint32_t>(integer(l["entropy_min_length"], c / "entropy_min_length", 16, 1 << 24));
      if (l["entropy_bits"]) a.entropy_bits = number(l["entropy_bits"], c / "entropy_bits", 0.5, 8.0);
      if (l["max_nesting"]) a.max_nesting = static_cast<uint32_t>(integer(l["max_nesting"], c / "max_nesting", 8, 100000));
      if (l["max_fragment_depth"])
        a.max_fragment_depth = static_cast<uint32_t>(integer(l["max_fragment_depth"], c / "max_fragment_depth", 0, 8));
      if (l["max_fragment_bytes"]) a.max_fragment_bytes = size_value(l["max_fragment_bytes"], c / "max_fragment_bytes");
      if (l["max_findings_per_rule"])
        cfg.max_findings_per_rule = static_cast<uint32_t>(integer(l["max_findings_per_rule"], c / "max_findings_per_rule", 1, 10000));
    }
    if (const auto b = root["bandit"]) {
      const Ctx c = top / "bandit";
      check_keys(b, {"enabled", "command", "timeout", "scores"}, c);
      auto& s = cfg.bandit;
      if (b["enabled"]) s.enabled = boolean(b["enabled"], c / "enabled");
      if (b["command"]) {
        s.command = scalar(b["command"], c / "command");
        if (s.command.empty()) (c / "command").fail("empty", "bandit, or a path to it");
      }
      if (b["timeout"])
        s.timeout = std::chrono::milliseconds(static_cast<int64_t>(number(b["timeout"], c / "timeout", 0.1, 3600) * 1000));
      if (const auto sc = b["scores"]) {
        const Ctx cs = c / "scores";
        check_keys(sc, {"low", "medium", "high"}, cs);
        if (sc["low"]) s.score_low = integer(sc["low"], cs / "low", 0, 1000);
        if (sc["medium"]) s.score_medium = integer(sc["medium"], cs / "medium", 0, 1000);
        if (sc["high"]) s.score_high = integer(sc["high"], cs / "high", 0, 1000);
      }
    }
  } catch (const YAML::Exception& e) {
    throw Error(security_yaml.string() + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg, "fix security.yaml");
  }
  cfg.rules = std::make_shared<const assess::RuleSet>(assess::RuleSet::load(cfg.rules_path));
  return cfg;
}

std::optional<Trust> steer_trust(RiskLevel level, Trust requested, bool override_given, const SecurityConfig& config) {
  std::optional<Trust> cap = config.verdict_trust[static_cast<size_t>(level)];
  if (!cap) {
    if (!override_given) return std::nullopt;
    cap = config.override_trust;
  }
  return rank(cap) < rank(requested) ? *cap : requested;
}

}  // namespace sandboxrun
