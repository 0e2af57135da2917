#include "assess/config_cache.hpp"

#include "common/cache_io.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::assess {

namespace {

constexpr std::string_view kMagic = "SRCONFIG\x04";  // bump the last byte when the encoding changes

// Every setting must be written and read below. A changed size means a field was added or
// removed: add it to put()/get() and bump kMagic, then update the sizes here. A field added
// into padding keeps the size: the unit test's kEverySetting must set every key too.
static_assert(sizeof(SecurityConfig) == 456 && sizeof(OverridePolicy) == 72 && sizeof(BanditSettings) == 64 && sizeof(SemgrepSettings) == 88 &&
                  sizeof(AnalyzerLimits) == 40,
              "SecurityConfig changed: store the new setting in config_cache.cpp");

std::string key_of(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                   const std::string& text) {
  std::string material(kMagic);
  material += security_yaml.string();
  material += '\0';
  material += project_root.string();
  material += '\0';
  material += text;
  return sha256_hex(material);
}

uint32_t trust_code(std::optional<Trust> t) { return t ? static_cast<uint32_t>(*t) + 1 : 0; }

std::optional<Trust> trust_from(cache::Reader& in) {
  const uint32_t v = in.below(4);
  return v == 0 ? std::nullopt : std::optional<Trust>(static_cast<Trust>(v - 1));
}

std::string put(const SecurityConfig& c, const std::vector<std::filesystem::path>& candidates) {
  cache::Writer w;
  w.u32(static_cast<uint32_t>(candidates.size()));
  for (const auto& p : candidates) w.str(p.string());
  w.u32(static_cast<uint32_t>(c.medium_threshold));
  w.u32(static_cast<uint32_t>(c.high_threshold));
  for (const auto& t : c.verdict_trust) w.u32(trust_code(t));
  w.u32(trust_code(c.override_trust));
  w.u32(c.override_policy.min_reason_length);  // the uid/group lists are never cached (see store)
  w.u64(c.max_bytes);
  w.u32(c.max_findings_per_rule);
  const auto& l = c.limits;
  w.u32(l.long_line);
  w.u32(l.wide_gap);
  w.u32(l.blank_run);
  w.u32(l.entropy_min_length);
  w.f64(l.entropy_bits);
  w.u32(l.max_nesting);
  w.u32(l.max_fragment_depth);
  w.u64(l.max_fragment_bytes);
  const auto& b = c.bandit;
  w.u32(b.enabled);
  w.str(b.command);
  w.u64(static_cast<uint64_t>(b.timeout.count()));
  for (int s : {b.score_low, b.score_medium, b.score_high}) w.u32(static_cast<uint32_t>(s));
  const auto& g = c.semgrep;
  w.u32(g.enabled);
  w.str(g.command);
  w.strs(g.configs);
  w.u64(static_cast<uint64_t>(g.timeout.count()));
  for (int s : {g.score_info, g.score_warning, g.score_error}) w.u32(static_cast<uint32_t>(s));
  return w.take();
}

bool get(std::string_view payload, SecurityConfig& c, std::vector<std::filesystem::path>& candidates) {
  cache::Reader in(payload);
  candidates.resize(in.count());
  for (auto& p : candidates) p = in.str();
  c.medium_threshold = static_cast<int>(in.u32());
  c.high_threshold = static_cast<int>(in.u32());
  for (auto& t : c.verdict_trust) t = trust_from(in);
  const std::optional<Trust> o = trust_from(in);
  if (!o) return false;
  c.override_trust = *o;
  c.override_policy.min_reason_length = in.u32();
  c.max_bytes = in.u64();
  c.max_findings_per_rule = in.u32();
  auto& l = c.limits;
  l.long_line = in.u32();
  l.wide_gap = in.u32();
  l.blank_run = in.u32();
  l.entropy_min_length = in.u32();
  l.entropy_bits = in.f64();
  l.max_nesting = in.u32();
  l.max_fragment_depth = in.u32();
  l.max_fragment_bytes = in.u64();
  auto& b = c.bandit;
  b.enabled = in.below(2) != 0;
  b.command = in.str();
  b.timeout = std::chrono::milliseconds(static_cast<int64_t>(in.u64()));
  for (int* s : {&b.score_low, &b.score_medium, &b.score_high}) *s = static_cast<int>(in.below(1001));
  auto& g = c.semgrep;
  g.enabled = in.below(2) != 0;
  g.command = in.str();
  g.configs = in.strs();
  g.timeout = std::chrono::milliseconds(static_cast<int64_t>(in.u64()));
  for (int* s : {&g.score_info, &g.score_warning, &g.score_error}) *s = static_cast<int>(in.below(1001));
  return in.done();
}

}  // namespace

bool load_cached_settings(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                          const std::string& text, const std::filesystem::path& cache_dir, SecurityConfig& cfg) {
  const std::optional<cache::Entry> payload =
      cache::read_keyed(cache_dir, "assess-config-", kMagic, key_of(security_yaml, project_root, text));
  SecurityConfig c;
  std::vector<std::filesystem::path> candidates;
  if (!payload || !get(payload->payload(), c, candidates)) return false;
  // The same search as the parser's: the first candidate that is a regular file.
  for (const auto& p : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) {
      c.rules_path = p;
      break;
    }
  }
  if (c.rules_path.empty()) return false;  // the parser says what is missing
  c.source = security_yaml;
  cfg = std::move(c);
  return true;
}

void store_cached_settings(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                           const std::string& text, const std::filesystem::path& cache_dir, const SecurityConfig& cfg,
                           const std::vector<std::filesystem::path>& rules_candidates) {
  // Who may override is named by user and group names, resolved to ids at load time: a cached
  // resolution would outlive a change to the accounts (a name deleted, its id given to another).
  if (cfg.override_policy.allowed_uids || cfg.override_policy.allowed_groups) return;
  cache::write_keyed(cache_dir, "assess-config-", kMagic, key_of(security_yaml, project_root, text), put(cfg, rules_candidates));
}

}  // namespace sandboxrun::assess
