#include "assess/config_cache.hpp"

#include "common/cache_io.hpp"
#include "common/record_cbor.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::assess {

namespace {

constexpr std::string_view kMagic = "SRCONFIG\x05";  // bump the last byte when the encoding changes

using record::from_json;  // for Stored, which lives in this unnamed namespace
using record::to_json;

// A cache entry: the settings, and where the rules file may be (looked up again at load).
struct Stored {
  std::vector<std::filesystem::path> rules_candidates;
  SecurityConfig settings;
  static constexpr auto fields = std::tuple{record::field("rules_candidates", &Stored::rules_candidates),
                                            record::field("settings", &Stored::settings)};
};

std::string key_of(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                   const std::string& text) {
  static const std::string layout = cache::layout_of<SecurityConfig, OverridePolicy, AnalyzerLimits,
                                                     BanditSettings, SemgrepSettings>();
  std::string material(kMagic);
  material += layout;
  material += security_yaml.string();
  material += '\0';
  material += project_root.string();
  material += '\0';
  material += text;
  return sha256_hex(material);
}

}  // namespace

bool load_cached_settings(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                          const std::string& text, const std::filesystem::path& cache_dir, SecurityConfig& cfg) {
  const std::optional<cache::Entry> payload =
      cache::read_keyed(cache_dir, "assess-config-", kMagic, key_of(security_yaml, project_root, text));
  std::optional<Stored> stored = payload ? cache::decode_record<Stored>(payload->payload()) : std::nullopt;
  if (!stored) return false;
  SecurityConfig& c = stored->settings;
  // The same search as the parser's: the first candidate that is a regular file.
  for (const auto& p : stored->rules_candidates) {
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
  cache::write_keyed(cache_dir, "assess-config-", kMagic, key_of(security_yaml, project_root, text),
                     cache::encode_record(Stored{rules_candidates, cfg}));
}

}  // namespace sandboxrun::assess
