#include "audit/config_cache.hpp"

#include "common/cache_io.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::audit {

namespace {

constexpr std::string_view kMagic = "SRAUDITCFG\x02";  // bump the last byte when the encoding changes
constexpr std::string_view kKind = "audit-config-";

// Every setting must be written and read below: a changed size means one was added or removed
// (path_check_interval is not a setting of the file and keeps its default).
static_assert(sizeof(AuditConfig) == 200, "AuditConfig changed: store the new setting in config_cache.cpp");

std::string key_of(const std::filesystem::path& file, const std::string& text) {
  return sha256_hex(std::string(kMagic) + file.string() + '\0' + text);
}

std::string put(const AuditConfig& c) {
  cache::Writer w;
  w.str(c.path.string());
  w.u32(static_cast<uint32_t>(c.sync));
  w.u64(c.sync_batch);
  w.str(c.key_file.string());
  w.u32(c.store_code);
  w.u32(c.store_files);
  w.u64(c.checkpoint_every);
  w.str(c.anchor.string());
  w.u32(c.syslog);
  w.u64(c.rotate_max_bytes);
  w.u64(static_cast<uint64_t>(c.rotate_max_age.count()));
  w.u64(c.keep_files);
  w.u64(static_cast<uint64_t>(c.keep_age.count()));
  return w.take();
}

std::optional<AuditConfig> get(std::string_view payload) {
  cache::Reader in(payload);
  AuditConfig c;
  c.path = in.str();
  c.sync = static_cast<AuditSync>(in.below(3));
  c.sync_batch = in.u64();
  c.key_file = in.str();
  c.store_code = in.below(2) != 0;
  c.store_files = in.below(2) != 0;
  c.checkpoint_every = in.u64();
  c.anchor = in.str();
  c.syslog = in.below(2) != 0;
  c.rotate_max_bytes = in.u64();
  c.rotate_max_age = std::chrono::seconds(static_cast<int64_t>(in.u64()));
  c.keep_files = in.u64();
  c.keep_age = std::chrono::seconds(static_cast<int64_t>(in.u64()));
  if (!in.done()) return std::nullopt;
  return c;
}

}  // namespace

std::optional<AuditConfig> load_cached_config(const std::filesystem::path& file, const std::string& text,
                                              const std::filesystem::path& cache_dir) {
  const std::optional<cache::Entry> entry = cache::read_keyed(cache_dir, kKind, kMagic, key_of(file, text));
  return entry ? get(entry->payload()) : std::nullopt;
}

void store_cached_config(const std::filesystem::path& file, const std::string& text,
                         const std::filesystem::path& cache_dir, const AuditConfig& cfg) {
  cache::write_keyed(cache_dir, kKind, kMagic, key_of(file, text), put(cfg));
}

}  // namespace sandboxrun::audit
