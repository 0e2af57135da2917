// The parsed-settings cache of security.yaml: every setting comes back from it as parsed, an
// edited file is parsed again, the rules file is looked up again, and a damaged entry is
// ignored.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <tuple>

#include "assess/assess_rules.hpp"
#include "assess/config_cache.hpp"
#include "sandboxrun/assess.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using test_util::TempDir;

namespace {

const std::filesystem::path kRoot = SANDBOXRUN_SOURCE_DIR;

static_assert(test_util::member_count<SecurityConfig>() == std::tuple_size_v<decltype(SecurityConfig::fields)> + 4,
              "a SecurityConfig member is missing from its fields (source, rules_path, rules, rules_cache_note "
              "are found at load)");
static_assert(test_util::member_count<OverridePolicy>() == std::tuple_size_v<decltype(OverridePolicy::fields)>);
static_assert(test_util::member_count<assess::AnalyzerLimits>() ==
              std::tuple_size_v<decltype(assess::AnalyzerLimits::fields)>);
static_assert(test_util::member_count<BanditSettings>() == std::tuple_size_v<decltype(BanditSettings::fields)>);
static_assert(test_util::member_count<SemgrepSettings>() == std::tuple_size_v<decltype(SemgrepSettings::fields)>);

// Every setting but the rules themselves, for comparisons.
std::string describe(const SecurityConfig& c) {
  return c.source.string() + ' ' + c.rules_path.string() + ' ' + nlohmann::json(c).dump();
}

// Every key set to something other than its default.
constexpr const char* kEverySetting = R"(rules: rules.yaml
thresholds: {medium: 12, high: 41}
verdicts: {low: unknown, medium: untrusted, high: refuse, blocked: refuse}
override_trust: unknown
override: {min_reason_length: 21}
limits:
  max_bytes: 5m
  long_line: 900
  wide_gap: 70
  blank_run: 33
  entropy_min_length: 150
  entropy_bits: 3.75
  max_nesting: 150
  max_fragment_depth: 2
  max_fragment_bytes: 3m
  max_findings_per_rule: 7
bandit: {enabled: true, command: /opt/bandit, timeout: 12.5, scores: {low: 3, medium: 11, high: 26}}
semgrep: {enabled: true, command: /opt/semgrep, configs: [p/python, p/secrets], timeout: 9, scores: {info: 4, warning: 12, error: 27}}
)";

struct Fixture {
  TempDir d;
  std::filesystem::path yaml, cache = d.path() / "cache";
  Fixture() {
    std::ifstream in(kRoot / "policies/assess-rules.yaml", std::ios::binary);
    d.write("rules.yaml", std::string(std::istreambuf_iterator<char>(in), {}));
    yaml = d.write("security.yaml", kEverySetting);
    ::setenv("SANDBOXRUN_CACHE_DIR", cache.c_str(), 1);
  }
  ~Fixture() { ::unsetenv("SANDBOXRUN_CACHE_DIR"); }
  SecurityConfig load() const { return load_security_config(yaml, d.path()); }
  size_t entries() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(cache))
      n += e.path().filename().string().starts_with("assess-config-");
    return n;
  }
};

}  // namespace

TEST(AssessConfigCache, EverySettingComesBackAsParsed) {
  Fixture f;
  const SecurityConfig parsed = f.load();
  EXPECT_EQ(parsed.medium_threshold, 12);
  EXPECT_EQ(parsed.semgrep.configs.size(), 2u);
  // The fixture sets every setting away from its default, so that one the cache dropped shows.
  const SecurityConfig defaults;
  auto set = [&](const auto& fld) {
    EXPECT_NE(nlohmann::json(parsed.*(fld.member)), nlohmann::json(defaults.*(fld.member))) << fld.name;
  };
  std::apply([&](const auto&... fld) { (set(fld), ...); }, SecurityConfig::fields);
  EXPECT_EQ(f.entries(), 1u);
  SecurityConfig cached;
  ASSERT_TRUE(assess::load_cached_settings(f.yaml, f.d.path(), kEverySetting, f.cache, cached));
  EXPECT_EQ(describe(cached), describe(parsed));
  // And through the public entry point, rules included.
  const SecurityConfig again = f.load();
  EXPECT_EQ(describe(again), describe(parsed));
  ASSERT_TRUE(again.rules);
  EXPECT_EQ(again.rules->rules().size(), parsed.rules->rules().size());
  // The defaults too (the shipped file sets few keys).
  ::setenv("SANDBOXRUN_CACHE_DIR", f.cache.c_str(), 1);
  const SecurityConfig shipped = load_security_config(kRoot / "config/security.yaml", kRoot);
  EXPECT_EQ(describe(load_security_config(kRoot / "config/security.yaml", kRoot)), describe(shipped));
}

// Who may override is given by names resolved against the accounts at load time; a cached
// resolution could outlive an account change, so such a file is parsed every time.
TEST(AssessConfigCache, WhoMayOverrideIsNeverCached) {
  Fixture f;
  std::string text = kEverySetting;
  text.replace(text.find("override: {"), 11, "override: {allowed_uids: [root], allowed_groups: [0], ");
  const auto with_lists = f.d.write("lists.yaml", text);
  const SecurityConfig parsed = load_security_config(with_lists, f.d.path());
  ASSERT_TRUE(parsed.override_policy.allowed_uids);
  EXPECT_EQ(parsed.override_policy.min_reason_length, 21u);
  EXPECT_EQ(f.entries(), 0u) << "a security.yaml naming who may override was cached";
}

TEST(AssessConfigCache, AnEditedFileIsParsedAgain) {
  Fixture f;
  EXPECT_EQ(f.load().high_threshold, 41);
  std::string text = kEverySetting;
  text.replace(text.find("high: 41"), 8, "high: 55");
  f.d.write("security.yaml", text);
  EXPECT_EQ(f.load().high_threshold, 55);
  EXPECT_EQ(f.entries(), 2u);
  // A bad edit is an error naming the key, never an older cached answer.
  text.replace(text.find("high: 55"), 8, "high: 5x");
  f.d.write("security.yaml", text);
  EXPECT_THROW(f.load(), Error);
}

TEST(AssessConfigCache, TheRulesFileIsLookedUpAgain) {
  Fixture f;
  f.load();
  std::filesystem::remove(f.d.path() / "rules.yaml");
  try {
    f.load();
    FAIL() << "a missing rules file must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no rules file at"), std::string::npos) << e.describe();
  }
}

TEST(AssessConfigCache, ADamagedEntryIsIgnored) {
  Fixture f;
  const std::string want = describe(f.load());
  for (const auto& e : std::filesystem::directory_iterator(f.cache)) {
    if (!e.path().filename().string().starts_with("assess-config-")) continue;
    std::fstream io(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-3, std::ios::end);
    io.put('\x7f');
  }
  SecurityConfig cached;
  EXPECT_FALSE(assess::load_cached_settings(f.yaml, f.d.path(), kEverySetting, f.cache, cached));
  EXPECT_EQ(describe(f.load()), want);
}

// Every security.yaml at a new path adds an entry (the key includes the path): the cache keeps
// the newest 16 of a kind, so a service that assesses with per-job configurations, or a test
// suite, cannot fill the disk. Dead writers' temporary files go too; other files stay.
TEST(AssessConfigCache, OldEntriesAreRemovedBeyondSixteen) {
  Fixture f;
  f.load();
  // Older than anything below: entries written within one tick of the clock share a time.
  const auto long_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& e : std::filesystem::directory_iterator(f.cache)) std::filesystem::last_write_time(e.path(), long_ago);
  const auto stale_temp = f.d.write("cache/.assess-config-x.bin.99.tmp", "half");
  const auto fresh_temp = f.d.write("cache/.assess-config-y.bin.98.tmp", "half");
  const auto foreign = f.d.write("cache/notes.txt", "mine");
  std::filesystem::last_write_time(stale_temp, long_ago);
  std::filesystem::path last;
  for (int i = 0; i < 24; ++i) {
    last = f.d.path() / ("job" + std::to_string(i)) / "security.yaml";
    std::filesystem::create_directories(last.parent_path());
    std::filesystem::copy_file(f.yaml, last);
    std::filesystem::copy_file(f.d.path() / "rules.yaml", last.parent_path() / "rules.yaml");
    load_security_config(last, f.d.path());
    EXPECT_LE(f.entries(), 16u) << "after " << i + 2 << " configurations";
  }
  EXPECT_EQ(f.entries(), 16u);
  SecurityConfig cached;
  EXPECT_TRUE(assess::load_cached_settings(last, f.d.path(), kEverySetting, f.cache, cached)) << "the newest entry was removed";
  EXPECT_FALSE(assess::load_cached_settings(f.yaml, f.d.path(), kEverySetting, f.cache, cached)) << "the oldest entry was kept";
  EXPECT_FALSE(std::filesystem::exists(stale_temp));
  EXPECT_TRUE(std::filesystem::exists(fresh_temp)) << "a temporary file still being written was removed";
  EXPECT_TRUE(std::filesystem::exists(foreign));
}
