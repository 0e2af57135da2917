// security.yaml: rules file, score thresholds, verdict -> trust mapping, analysis limits and
// Bandit settings; and steer_trust, which applies the mapping.
#include <yaml-cpp/yaml.h>

#include "internal.hpp"
#include "sandboxrun/assess.hpp"
#include "assess/assess_rules.hpp"
#include "assess/assess_override.hpp"
#include "assess/assess_rules_cache.hpp"
#include "assess/config_cache.hpp"
#include "common/install_paths.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "common/yaml_strict.hpp"

namespace sandboxrun {

namespace {

// Trust as a rank (untrusted 0 < unknown 1 < trusted 2); -1 is "refuse".
int rank(std::optional<Trust> t) { return t ? static_cast<int>(*t) : -1; }

std::optional<Trust> trust_named(const std::string& s) {
  if (s == "untrusted") return Trust::untrusted;
  if (s == "unknown") return Trust::unknown;
  if (s == "trusted" || s == "keep") return Trust::trusted;
  return std::nullopt;
}

// The settings of security.yaml's `text` (everything but the rules themselves); `tried` gets
// where the rules file was looked for.
SecurityConfig parse_settings(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                              const std::string& text, std::vector<std::filesystem::path>& tried) {
  const StrictYaml y(security_yaml);
  const YAML::Node root = y.parse(text);
  SecurityConfig cfg;
  cfg.source = security_yaml;
  try {
    y.check_keys(root, "", {"rules", "thresholds", "verdicts", "override_trust", "override", "limits",
                          "bandit", "semgrep"});
    {
      const YAML::Node n = y.require(root, "", "rules", "the path of the assessor rules file");
      const std::filesystem::path rel = y.scalar(n, "rules", "a path");
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
        y.fail(n, "rules", "an existing rules file (relative to this file or the project root)",
               "'" + rel.string() + "', but there is no rules file at " + list);
      }
    }
    if (const auto t = root["thresholds"]) {
      y.check_keys(t, "thresholds", {"medium", "high"});
      if (t["medium"]) cfg.medium_threshold = static_cast<int>(y.integer(t["medium"], "thresholds.medium", 1, 100000));
      if (t["high"]) cfg.high_threshold = static_cast<int>(y.integer(t["high"], "thresholds.high", 1, 100000));
      if (cfg.high_threshold < cfg.medium_threshold)
        y.fail(t["high"] ? t["high"] : t, "thresholds.high",
               "at least thresholds.medium (" + std::to_string(cfg.medium_threshold) + ")",
               std::to_string(cfg.high_threshold));
    }
    if (const auto v = root["verdicts"]) {
      y.check_keys(v, "verdicts", {"low", "medium", "high", "blocked"});
      const std::string names[] = {"low", "medium", "high", "blocked"};
      for (size_t i = 0; i < 4; ++i) {
        if (!v[names[i]]) continue;
        const std::string key = "verdicts." + names[i];
        const std::string s = y.scalar(v[names[i]], key);
        if (s == "refuse") cfg.verdict_trust[i] = std::nullopt;
        else if (auto t = trust_named(s)) cfg.verdict_trust[i] = t;
        else y.fail(v[names[i]], key, "keep, trusted, unknown, untrusted or refuse");
      }
      // A riskier verdict may never allow more than a safer one.
      for (size_t i = 1; i < 4; ++i)
        if (rank(cfg.verdict_trust[i]) > rank(cfg.verdict_trust[i - 1]))
          y.fail(v[names[i]] ? v[names[i]] : v, "verdicts." + names[i],
                 "a level at most as permissive as verdicts." + names[i - 1],
                 (v[names[i]] ? "'" + v[names[i]].Scalar() + "'" : std::string("the default")) +
                     ", looser than verdicts." + names[i - 1]);
    }
    if (const auto n = root["override_trust"]) {
      const std::string s = y.scalar(n, "override_trust");
      auto t = trust_named(s);
      if (!t || s == "keep") y.fail(n, "override_trust", "untrusted, unknown or trusted");
      cfg.override_trust = *t;
    }
    if (const auto o = root["override"]) cfg.override_policy = parse_override_policy(y, o);
    if (const auto l = root["limits"]) {
      y.check_keys(l, "limits", {"max_bytes", "long_line", "wide_gap", "blank_run", "entropy_min_length", "entropy_bits", "max_nesting",
                                 "max_fragment_depth", "max_fragment_bytes", "max_findings_per_rule"});
      auto& a = cfg.limits;
      auto u32 = [&](const char* name, uint64_t lo, uint64_t hi) {
        return static_cast<uint32_t>(y.integer(l[name], "limits." + std::string(name), lo, hi));
      };
      if (l["max_bytes"]) cfg.max_bytes = y.size(l["max_bytes"], "limits.max_bytes", 1);
      if (l["long_line"]) a.long_line = u32("long_line", 80, 1 << 24);
      if (l["wide_gap"]) a.wide_gap = u32("wide_gap", 8, 1 << 20);
      if (l["blank_run"]) a.blank_run = u32("blank_run", 8, 1 << 24);
      if (l["entropy_min_length"]) a.entropy_min_length = u32("entropy_min_length", 16, 1 << 24);
      if (l["entropy_bits"]) a.entropy_bits = y.number(l["entropy_bits"], "limits.entropy_bits", 0.5, 8.0);
      if (l["max_nesting"]) a.max_nesting = u32("max_nesting", 8, 100000);
      if (l["max_fragment_depth"]) a.max_fragment_depth = u32("max_fragment_depth", 0, 8);
      if (l["max_fragment_bytes"]) a.max_fragment_bytes = y.size(l["max_fragment_bytes"], "limits.max_fragment_bytes", 1);
      if (l["max_findings_per_rule"]) cfg.max_findings_per_rule = u32("max_findings_per_rule", 1, 10000);
    }
    if (const auto b = root["bandit"]) {
      y.check_keys(b, "bandit", {"enabled", "command", "timeout", "scores"});
      auto& s = cfg.bandit;
      if (b["enabled"]) s.enabled = y.boolean(b["enabled"], "bandit.enabled");
      if (b["command"]) {
        s.command = y.scalar(b["command"], "bandit.command");
        if (s.command.empty()) y.fail(b["command"], "bandit.command", "bandit, or a path to it");
      }
      if (b["timeout"])
        s.timeout = std::chrono::milliseconds(static_cast<int64_t>(y.number(b["timeout"], "bandit.timeout", 0.1, 3600) * 1000));
      if (const auto sc = b["scores"]) {
        y.check_keys(sc, "bandit.scores", {"low", "medium", "high"});
        if (sc["low"]) s.score_low = static_cast<int>(y.integer(sc["low"], "bandit.scores.low", 0, 1000));
        if (sc["medium"]) s.score_medium = static_cast<int>(y.integer(sc["medium"], "bandit.scores.medium", 0, 1000));
        if (sc["high"]) s.score_high = static_cast<int>(y.integer(sc["high"], "bandit.scores.high", 0, 1000));
      }
    }
    if (const auto g = root["semgrep"]) {
      y.check_keys(g, "semgrep", {"enabled", "command", "configs", "timeout", "scores"});
      auto& s = cfg.semgrep;
      if (g["enabled"]) s.enabled = y.boolean(g["enabled"], "semgrep.enabled");
      if (g["command"]) {
        s.command = y.scalar(g["command"], "semgrep.command");
        if (s.command.empty()) y.fail(g["command"], "semgrep.command", "semgrep, or a path to it");
      }
      if (const auto c = g["configs"]) {
        if (!c.IsSequence() || c.size() == 0) y.fail(c, "semgrep.configs", "a list of rule packs or files (p/python)");
        s.configs.clear();
        for (const auto& item : c) s.configs.push_back(y.scalar(item, "semgrep.configs"));
      }
      if (g["timeout"])
        s.timeout = std::chrono::milliseconds(static_cast<int64_t>(y.number(g["timeout"], "semgrep.timeout", 0.1, 3600) * 1000));
      if (const auto sc = g["scores"]) {
        y.check_keys(sc, "semgrep.scores", {"info", "warning", "error"});
        if (sc["info"]) s.score_info = static_cast<int>(y.integer(sc["info"], "semgrep.scores.info", 0, 1000));
        if (sc["warning"]) s.score_warning = static_cast<int>(y.integer(sc["warning"], "semgrep.scores.warning", 0, 1000));
        if (sc["error"]) s.score_error = static_cast<int>(y.integer(sc["error"], "semgrep.scores.error", 0, 1000));
      }
    }
  } catch (const YAML::Exception& e) {
    throw Error(y.where(e.mark) + ": " + e.msg, "fix " + security_yaml.string());
  }
  return cfg;
}

}  // namespace

SecurityConfig load_security_config(const std::filesystem::path& security_yaml,
                                    const std::filesystem::path& project_root) {
  std::string text;
  try {
    text = read_file(security_yaml.string());
  } catch (const Error& e) {
    throw Error(security_yaml.string() + ": cannot read the security configuration",
                "it belongs beside sandbox.yaml: copy the project's config/security.yaml there; `sandboxrun "
                "assess` also takes --config-dir DIR",
                e.sys_errno());
  }
  SecurityConfig cfg;
  const std::optional<std::filesystem::path> cache_dir = parsed_cache_dir();
  if (!cache_dir || !assess::load_cached_settings(security_yaml, project_root, text, *cache_dir, cfg)) {
    std::vector<std::filesystem::path> tried;
    cfg = parse_settings(security_yaml, project_root, text, tried);
    if (cache_dir) assess::store_cached_settings(security_yaml, project_root, text, *cache_dir, cfg, tried);
  }
  if (cache_dir) {
    assess::CachedRules c = assess::load_rules_cached(cfg.rules_path, *cache_dir);
    cfg.rules_cache_note = std::move(c.note);
    cfg.rules = std::make_shared<const assess::RuleSet>(std::move(c.rules));
  } else {
    cfg.rules = std::make_shared<const assess::RuleSet>(assess::RuleSet::load(cfg.rules_path));
  }
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

Decision decide(RiskLevel level, Trust requested, const std::optional<std::string>& override_reason,
                const SecurityConfig& config, const ProcessIdentity& who) {
  Decision d;
  d.requested = requested;
  d.used = steer_trust(level, requested, false, config);
  if (d.used || !override_reason) return d;
  if (auto why = check_override(config.override_policy, *override_reason, who, config.source.string())) {
    d.override_refused = std::move(*why);
    return d;
  }
  d.used = steer_trust(level, requested, true, config);
  d.overridden = true;
  return d;
}

}  // namespace sandboxrun
