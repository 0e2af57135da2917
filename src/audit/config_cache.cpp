#include "audit/config_cache.hpp"

#include "common/cache_io.hpp"
#include "common/record_cbor.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::audit {

namespace {

constexpr std::string_view kMagic = "SRAUDITCFG\x03";  // bump the last byte when the encoding changes
constexpr std::string_view kKind = "audit-config-";

std::string key_of(const std::filesystem::path& file, const std::string& text) {
  static const std::string layout = cache::layout_of<AuditConfig>();
  return sha256_hex(std::string(kMagic) + layout + file.string() + '\0' + text);
}

}  // namespace

std::optional<AuditConfig> load_cached_config(const std::filesystem::path& file, const std::string& text,
                                              const std::filesystem::path& cache_dir) {
  const std::optional<cache::Entry> entry = cache::read_keyed(cache_dir, kKind, kMagic, key_of(file, text));
  return entry ? cache::decode_record<AuditConfig>(entry->payload()) : std::nullopt;
}

void store_cached_config(const std::filesystem::path& file, const std::string& text,
                         const std::filesystem::path& cache_dir, const AuditConfig& cfg) {
  cache::write_keyed(cache_dir, kKind, kMagic, key_of(file, text), cache::encode_record(cfg));
}

}  // namespace sandboxrun::audit
