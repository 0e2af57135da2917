// The parsed-sandbox.yaml cache: a cached config is the parsed one, setting by setting; a
// seccomp profile that would now be found elsewhere, an edit and a damaged entry are misses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "config/config_cache.hpp"
#include "sandboxrun/config.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using namespace test_util;

namespace {

// Every key, none at its default (the member counts below catch a member left out of a fields
// list; the test below, a field this file forgets).
constexpr const char* kEverySetting = R"(default_trust: unknown
image: ./rootfs/here
cpu_count: 0.75
mem_limit: 300m
pids_limit: 70
timeout: 33.5
tmp_size: 65m
output_limit: 2k
work_size: 66m
input_limit: 63m
input_files_limit: 999
output_files_limit: 998
output_bytes_limit: 62m
host_memory_share: 0.4
security_opt: [no-new-privileges, seccomp=prof.json]
cap_drop: [ALL, NET_RAW]
read_only: true
user: "1001:1002"
network_mode: allowlist
network_allowlist: [pypi.org, example.com]
extra_hosts: {pypi.internal: 10.0.0.5}
allow_networks: [10.0.0.0/8]
environment: {A: "1", B: two}
requirements: [requests==2.31.0]
package_index: {url: "https://index.example/simple", hosts: [files.example]}
cache_dir: ./deps-cache
cache_max_size: 5g
cgroup: {parent: mine, allow_degraded: true}
landlock: required
id_ranges: {base: 200000000, size: 4096, slot_size: 4}
monitoring: {enabled: false, interval: 250}
sessions: {max: 5, max_per_caller: 2, idle_timeout: 30, lifetime: 90.5}
trust_levels:
  untrusted: {cpu_count: 0.5, mem_limit: 128m, environment: {C: "3"}, extra_hosts: ["a.internal:10.0.0.6"]}
  trusted: {network_mode: none, user: "1003:1004", security_opt: [seccomp=prof.json], requirements: []}
)";

static_assert(test_util::member_count<LevelSettings>() == std::tuple_size_v<decltype(LevelSettings::fields)>,
              "a LevelSettings member is missing from LevelSettings::fields");
static_assert(test_util::member_count<PackageIndex>() == std::tuple_size_v<decltype(PackageIndex::fields)>,
              "a PackageIndex member is missing from PackageIndex::fields");
static_assert(test_util::member_count<SessionSettings>() == std::tuple_size_v<decltype(SessionSettings::fields)>,
              "a SessionSettings member is missing from SessionSettings::fields");
static_assert(test_util::member_count<SandboxConfig>() == std::tuple_size_v<decltype(SandboxConfig::fields)> + 3,
              "a SandboxConfig member is missing from SandboxConfig::fields (file, dir, digest are not stored)");

struct Fixture {
  TempDir d;
  std::filesystem::path cache = d / "cache";
  std::filesystem::path yaml = d.write("sandbox.yaml", kEverySetting);
  Fixture() { d.write("prof.json", "{}"); }
};

}  // namespace

TEST(SandboxConfigCache, EverySettingComesBackAsParsed) {
  Fixture f;
  const SandboxConfig parsed = parse_sandbox_config(kEverySetting, f.yaml);
  EXPECT_EQ(parsed.levels.size(), 2u);
  EXPECT_FALSE(config_cache::load(f.yaml, kEverySetting, f.cache)) << "nothing stored yet";
  config_cache::store(f.yaml, kEverySetting, f.cache, parsed);
  const std::optional<SandboxConfig> cached = config_cache::load(f.yaml, kEverySetting, f.cache);
  ASSERT_TRUE(cached);
  EXPECT_TRUE(*cached == parsed);
  EXPECT_EQ(config_cache::encode(*cached), config_cache::encode(parsed));
  // And the fixture sets every field away from its default.
  const SandboxConfig defaults;
  auto set = [&](const auto& fld) { EXPECT_FALSE(parsed.*(fld.member) == defaults.*(fld.member)) << fld.name; };
  std::apply([&](const auto&... fld) { (set(fld), ...); }, SandboxConfig::fields);
  auto set_in_base = [&](const auto& fld) { EXPECT_TRUE((parsed.base.*(fld.member)).has_value()) << fld.name; };
  std::apply([&](const auto&... fld) { (set_in_base(fld), ...); }, LevelSettings::fields);
  EXPECT_EQ(cached->levels.at(Trust::untrusted).extra_hosts->at("a.internal"), "10.0.0.6");
  EXPECT_EQ(*cached->base.uid, 1001u);
  EXPECT_EQ(cached->id_ranges.slot_size, 4u);
  EXPECT_EQ(cached->monitor_interval_ms, 250u);
  EXPECT_EQ(*cached->base.seccomp_profile, f.d / "prof.json");
}

TEST(SandboxConfigCache, AnEditedFileIsParsedAgain) {
  Fixture f;
  config_cache::store(f.yaml, kEverySetting, f.cache, parse_sandbox_config(kEverySetting, f.yaml));
  const std::string edited = std::string(kEverySetting) + "# a comment\n";
  EXPECT_FALSE(config_cache::load(f.yaml, edited, f.cache));
  EXPECT_FALSE(config_cache::load(f.d / "other.yaml", kEverySetting, f.cache)) << "another path resolves differently";
}

// seccomp=policies/default.json is found in the data directory (the source tree here) while no
// file of that name is beside sandbox.yaml; once one is, the parser picks it, and so must a load.
TEST(SandboxConfigCache, AProfileNowFoundBesideTheFileIsAMiss) {
  TempDir d;
  ::setenv("SANDBOXRUN_CACHE_DIR", (d / "cache").c_str(), 1);
  const auto yaml = d.write("sandbox.yaml", "security_opt: [seccomp=policies/default.json]\n");
  const SandboxConfig first = load_sandbox_config(yaml);
  EXPECT_EQ(*first.base.seccomp_profile, std::filesystem::path(SANDBOXRUN_SOURCE_DIR) / "policies/default.json");
  EXPECT_TRUE(config_cache::load(yaml, "security_opt: [seccomp=policies/default.json]\n", d / "cache")) << "stored";
  std::filesystem::create_directories(d / "policies");
  d.write("policies/default.json", "{}");
  EXPECT_EQ(*load_sandbox_config(yaml).base.seccomp_profile, d / "policies/default.json");
  ::unsetenv("SANDBOXRUN_CACHE_DIR");
}

// A cache reached through a symlink (or a directory others can write) is not used: whoever
// controls the path could serve a different parse of sandbox.yaml.
TEST(SandboxConfigCache, ACacheBehindASymlinkIsNotUsed) {
  TempDir d;
  std::filesystem::create_directories(d / "real");
  std::filesystem::create_directory_symlink(d / "real", d / "link");
  ::setenv("SANDBOXRUN_CACHE_DIR", (d / "link/cache").c_str(), 1);
  const auto yaml = d.write("sandbox.yaml", "timeout: 12\n");
  EXPECT_EQ(*load_sandbox_config(yaml).base.timeout, 12);
  EXPECT_EQ(*load_sandbox_config(yaml).base.timeout, 12);
  size_t entries = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(d / "real/cache", ec)) entries += !e.path().empty();
  EXPECT_EQ(entries, 0u) << "an entry was written through the symlink";
  ::unsetenv("SANDBOXRUN_CACHE_DIR");
}

TEST(SandboxConfigCache, ADamagedEntryIsAMissAndTheFileIsParsed) {
  TempDir d;
  ::setenv("SANDBOXRUN_CACHE_DIR", (d / "cache").c_str(), 1);
  const auto yaml = d.write("sandbox.yaml", "timeout: 12\n");
  EXPECT_EQ(*load_sandbox_config(yaml).base.timeout, 12);
  size_t damaged = 0;
  for (const auto& e : std::filesystem::directory_iterator(d / "cache")) {
    if (!e.path().filename().string().starts_with("sandbox-config-")) continue;
    std::string bytes = slurp(e.path());
    bytes.back() ^= 1;
    put(e.path(), bytes, 0600);
    ++damaged;
  }
  EXPECT_EQ(damaged, 1u);
  EXPECT_FALSE(config_cache::load(yaml, "timeout: 12\n", d / "cache"));
  EXPECT_EQ(*load_sandbox_config(yaml).base.timeout, 12);
  ::unsetenv("SANDBOXRUN_CACHE_DIR");
}
