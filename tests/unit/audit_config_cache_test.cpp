// The parsed-audit.yaml cache: every setting comes back as parsed, through load_audit_config too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "audit/config_cache.hpp"
#include "sandboxrun/audit.hpp"
#include "test_util.hpp"

namespace sandboxrun {
namespace {

constexpr const char* kEverySetting = R"(path: logs/a.log
sync: each
sync_batch: 7
key_file: keys/k
store_code: false
store_files: false
checkpoint: {every: 9, anchor: logs/a.anchor, syslog: true}
rotation: {max_size: 8k, max_age: 2h, keep_files: 5, keep_age: 3d}
)";

std::string describe(const AuditConfig& c) {
  std::ostringstream o;
  o << c.path << "|" << to_string(c.sync) << "|" << c.sync_batch << "|" << c.key_file << "|" << c.store_code << "|"
    << c.store_files << "|" << c.checkpoint_every << "|" << c.anchor << "|" << c.syslog << "|" << c.rotate_max_bytes
    << "|" << c.rotate_max_age.count() << "|" << c.keep_files << "|" << c.keep_age.count() << "|"
    << c.path_check_interval.count();
  return o.str();
}

TEST(AuditConfigCache, EverySettingComesBackAsParsed) {
  test_util::TempDir d;
  const auto cache = d / "cache";
  ::setenv("SANDBOXRUN_CACHE_DIR", cache.c_str(), 1);
  const auto yaml = d.write("audit.yaml", kEverySetting);
  const AuditConfig parsed = load_audit_config(yaml);
  EXPECT_EQ(parsed.path, d / "logs/a.log");
  EXPECT_NE(describe(parsed), describe(AuditConfig{}));
  const std::optional<AuditConfig> cached = audit::load_cached_config(yaml, kEverySetting, cache);
  ASSERT_TRUE(cached) << "load_audit_config stored it";
  EXPECT_EQ(describe(*cached), describe(parsed));
  EXPECT_EQ(describe(load_audit_config(yaml)), describe(parsed));
  EXPECT_FALSE(audit::load_cached_config(yaml, std::string(kEverySetting) + "#\n", cache)) << "an edit is a miss";
  ::unsetenv("SANDBOXRUN_CACHE_DIR");
}

}  // namespace
}  // namespace sandboxrun
