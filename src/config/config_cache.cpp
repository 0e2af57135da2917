#include "config/config_cache.hpp"

#include "common/cache_io.hpp"
#include "common/install_paths.hpp"
#include "common/record_cbor.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::config_cache {

namespace {

constexpr std::string_view kMagic = "SRSANDBOX\x04";  // bump the last byte when the encoding changes
constexpr std::string_view kKind = "sandbox-config-";

std::string key_of(const std::filesystem::path& file, const std::string& text) {
  // CgroupSettings and IdRanges name their members in the JSON of the defaults.
  static const std::string layout = cache::layout_of<SandboxConfig, LevelSettings, PackageIndex, SessionSettings>() +
                                    nlohmann::json(SandboxConfig{}).dump();
  std::string material(kMagic);
  material += layout;
  material += file.string();
  material += '\0';
  material += install_paths().data_dir.string();
  material += '\0';
  material += text;
  return sha256_hex(material);
}

// A profile found in the data directory while the same name beside sandbox.yaml did not exist:
// if that file exists now, the parser would pick it instead. A profile that is gone is the
// parser's error to report.
bool same_profile(const std::filesystem::path& dir, const std::optional<std::filesystem::path>& profile) {
  if (!profile) return true;
  std::error_code ec;
  if (!std::filesystem::exists(*profile, ec)) return false;
  const std::filesystem::path& data = install_paths().data_dir;
  if (data.empty()) return true;
  const std::filesystem::path rel = profile->lexically_relative(data);
  if (rel.empty() || *rel.begin() == "..") return true;
  return !std::filesystem::exists((dir / rel).lexically_normal(), ec);
}

}  // namespace

std::string encode(const SandboxConfig& cfg) { return cache::encode_record(cfg); }

std::optional<SandboxConfig> load(const std::filesystem::path& file, const std::string& text,
                                  const std::filesystem::path& cache_dir) {
  const std::optional<cache::Entry> entry = cache::read_keyed(cache_dir, kKind, kMagic, key_of(file, text));
  std::optional<SandboxConfig> c = entry ? cache::decode_record<SandboxConfig>(entry->payload()) : std::nullopt;
  if (!c) return std::nullopt;
  c->file = file;
  c->dir = file.parent_path();
  c->digest = sha256_hex(text);
  if (!same_profile(c->dir, c->base.seccomp_profile)) return std::nullopt;
  for (const auto& [t, l] : c->levels)
    if (!same_profile(c->dir, l.seccomp_profile)) return std::nullopt;
  return c;
}

void store(const std::filesystem::path& file, const std::string& text, const std::filesystem::path& cache_dir,
           const SandboxConfig& cfg) {
  cache::write_keyed(cache_dir, kKind, kMagic, key_of(file, text), cache::encode_record(cfg));
}

}  // namespace sandboxrun::config_cache
