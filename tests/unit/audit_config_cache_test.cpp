// The parsed-audit.yaml cache: every setting comes back as parsed, through load_audit_config too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

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
checkpoint: {every: 9, anchor: logs/a.anchor, syslog: true, stream: stderr}
rotation: {max_size: 8k, max_age: 2h, keep_files: 5, keep_age: 3d}
)";

static_assert(test_util::member_count<AuditConfig>() == std::tuple_size_v<decltype(AuditConfig::fields)> + 1,
              "an AuditConfig member is missing from AuditConfig::fields (path_check_interval is not a setting)");

TEST(AuditConfigCache, EverySettingComesBackAsParsed) {
  test_util::TempDir d;
  const auto cache = d / "cache";
  ::setenv("SANDBOXRUN_CACHE_DIR", cache.c_str(), 1);
  const auto yaml = d.write("audit.yaml", kEverySetting);
  const AuditConfig parsed = load_audit_config(yaml);
  EXPECT_EQ(parsed.path, d / "logs/a.log");
  // Every setting away from its default, so that one the cache dropped would show.
  const AuditConfig defaults;
  auto set = [&](const auto& fld) { EXPECT_FALSE(parsed.*(fld.member) == defaults.*(fld.member)) << fld.name; };
  std::apply([&](const auto&... fld) { (set(fld), ...); }, AuditConfig::fields);
  const std::optional<AuditConfig> cached = audit::load_cached_config(yaml, kEverySetting, cache);
  ASSERT_TRUE(cached) << "load_audit_config stored it";
  EXPECT_TRUE(*cached == parsed);
  EXPECT_TRUE(load_audit_config(yaml) == parsed);
  EXPECT_FALSE(audit::load_cached_config(yaml, std::string(kEverySetting) + "#\n", cache)) << "an edit is a miss";
  ::unsetenv("SANDBOXRUN_CACHE_DIR");
}

}  // namespace
}  // namespace sandboxrun
