// sandbox.yaml: the shipped file parses, bad input is refused with file/key/line, and resolution
// only tightens.
#include <gtest/gtest.h>

#include "sandboxrun/config.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"
#include "test_util.hpp"

using namespace sandboxrun;

namespace {

SandboxConfig parse(const std::string& text) { return parse_sandbox_config(text, "/etc/sr/sandbox.yaml"); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

HostResources big_host() { return {64, 1ull << 40}; }

}  // namespace

TEST(ConfigSize, ParsesDockerSizes) {
  EXPECT_EQ(parse_size("1g"), 1ull << 30);
  EXPECT_EQ(parse_size("512m"), 512ull << 20);
  EXPECT_EQ(parse_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_size("1048576"), 1048576u);
  EXPECT_EQ(parse_size(" 64k "), 65536u);
  for (const char* bad : {"1x", "", "-1", "g", "1..5m", ".5g", "1e3m", "99999999999t"})
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
  EXPECT_EQ(format_size(256ull << 20), "256MiB");
}

TEST(Config, ShippedConfigParsesWithTheOriginalDefaults) {
  SandboxConfig cfg = load_sandbox_config(SANDBOXRUN_SOURCE_DIR "/config/sandbox.yaml");
  EXPECT_EQ(cfg.default_trust, Trust::untrusted);
  auto trusted = resolve_spec(cfg, Trust::trusted, {}, big_host());
  EXPECT_EQ(trusted.limits.cpus, 2.0);
  EXPECT_EQ(trusted.limits.memory_bytes, 1ull << 30);
  EXPECT_EQ(trusted.limits.timeout_s, 120.0);
  auto untrusted = resolve_spec(cfg, Trust::untrusted, {}, big_host());
  auto unknown = resolve_spec(cfg, Trust::unknown, {}, big_host());
  // Strictly smaller the less trusted the code is.
  EXPECT_LT(untrusted.limits.memory_bytes, unknown.limits.memory_bytes);
  EXPECT_LT(unknown.limits.memory_bytes, trusted.limits.memory_bytes);
  EXPECT_LT(untrusted.limits.timeout_s, unknown.limits.timeout_s);
  EXPECT_LT(untrusted.limits.pids, unknown.limits.pids);
  EXPECT_LE(untrusted.limits.cpus, unknown.limits.cpus);
  EXPECT_EQ(untrusted.seccomp_profile.filename(), "untrusted.json");
  EXPECT_EQ(trusted.seccomp_profile.filename(), "default.json");
  EXPECT_EQ(untrusted.uid, 1000u);
  EXPECT_EQ(untrusted.network.mode, NetworkMode::none);
}

TEST(Config, RelativePathsResolveBesideTheFileThenInTheDataDirectory) {
  test_util::TempDir dir;
  test_util::put(dir.path() / "mine.json", "{}");
  auto parse_in = [&](const std::string& text) { return parse_sandbox_config(text, dir.path() / "sandbox.yaml"); };
  // Beside the file first.
  auto beside = parse_in("security_opt: [seccomp=mine.json]\nimage: ./img\n");
  EXPECT_EQ(resolve_spec(beside, Trust::trusted, {}, big_host()).seccomp_profile, dir.path() / "mine.json");
  EXPECT_EQ(beside.image, (dir.path() / "img").string());  // a path: relative to the file
  // Then in the data directory (for a binary in the source tree: the tree itself).
  auto shipped = parse_in("security_opt: [seccomp=policies/untrusted.json]\nimage: science\n");
  EXPECT_EQ(resolve_spec(shipped, Trust::trusted, {}, big_host()).seccomp_profile,
            std::filesystem::path(SANDBOXRUN_SOURCE_DIR) / "policies/untrusted.json");
  EXPECT_EQ(shipped.image, "science");  // a bare name: looked up in the image store at run time
  // Neither: the error names both places.
  try {
    parse_in("security_opt: [seccomp=policies/nope.json]\n");
    FAIL() << "a missing profile was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir.path() / "policies/nope.json").string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(SANDBOXRUN_SOURCE_DIR "/policies/nope.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sandbox.yaml:1"), std::string::npos) << e.what();
  }
}

TEST(Config, BadInputNamesFileLineKeyAndExpectation) {
  struct Case {
    const char* yaml;
    const char* must_contain;
  } cases[] = {
      {"mem_limit: 1x\n", "'mem_limit': expected a size"},
      {"cpu_count: lots\n", "'cpu_count': expected a number"},
      {"cpu_count: 0\n", "'cpu_count'"},
      {"pids_limit: -3\n", "'pids_limit'"},
      {"timeout: [1]\n", "got a list"},
      {"memory: 1g\n", "'memory'"},
      {"trust_levels:\n  untrusted:\n    mem_limt: 1g\n", "trust_levels.untrusted.mem_limt"},
      {"trust_levels:\n  paranoid: {}\n", "trust_levels.paranoid"},
      {"user: root\n", "'user'"},
      {"user: \"0:0\"\n", "never runs as root"},
      {"read_only: false\n", "read_only"},
      {"security_opt: [seccomp=unconfined]\n", "unconfined is refused"},
      {"security_opt: [apparmor=x]\n", "not supported"},
      {"cap_drop: [NET_RAWW]\n", "NET_RAWW"},
      {"network_mode: host\n", "none or allowlist"},
      {"monitoring:\n  interval: 1\n", "monitoring.interval"},
      {"cgroup:\n  parnet: x\n", "cgroup.parnet"},
      {"default_trust: maybe\n", "default_trust"},
      {"landlock: maybe\n", "required, best_effort or off"},
      {"id_ranges:\n  base: 1000\n", "id_ranges.base"},
      {"id_ranges:\n  size: 2\n  slot_size: 4\n", "size >= slot_size"},
      {"id_ranges:\n  slot_size: 1\n", "id_ranges.slot_size"},
      {"id_ranges:\n  bsae: 1\n", "id_ranges.bsae"},
      {"a: [\n", "invalid YAML"},
      {"- just\n- a list\n", "(top level)"},
  };
  for (const auto& c : cases) {
    std::string err = error_of(c.yaml);
    EXPECT_NE(err.find("/etc/sr/sandbox.yaml"), std::string::npos) << c.yaml << " -> " << err;
    EXPECT_NE(err.find(c.must_contain), std::string::npos) << c.yaml << " -> " << err;
  }
  EXPECT_NE(error_of("cpu_count: 1\nmem_limit: 1x\n").find("sandbox.yaml:2"), std::string::npos)
      << "the line of the bad value must be named";
}

TEST(Config, LandlockAndIdRangesReachTheSpec) {
  SandboxConfig cfg = parse("landlock: required\nid_ranges:\n  base: 300000000\n  size: 64\n  slot_size: 4\n");
  SandboxSpec s = resolve_spec(cfg, Trust::untrusted, {}, big_host());
  EXPECT_EQ(s.landlock, LandlockMode::required);
  EXPECT_EQ(s.id_ranges.base, 300000000u);
  EXPECT_EQ(s.id_ranges.slots(), 16u);
  EXPECT_TRUE(s.test_extra_writable_bind.empty()) << "the fault injection is never set from a config";
  EXPECT_EQ(parse("landlock: off\n").landlock, LandlockMode::off);
  EXPECT_EQ(parse("cpu_count: 1\n").landlock, LandlockMode::best_effort);
}

TEST(Config, LevelsOverrideTheBase) {
  auto cfg = parse("mem_limit: 512m\nnetwork_mode: none\ntrust_levels:\n  trusted:\n    mem_limit: 1g\n"
                   "    network_mode: allowlist\n    network_allowlist: [pypi.org]\n");
  auto t = resolve_spec(cfg, Trust::trusted, {}, big_host());
  EXPECT_EQ(t.limits.memory_bytes, 1ull << 30);
  EXPECT_EQ(t.network.mode, NetworkMode::allowlist);
  EXPECT_EQ(t.network.allowlist, std::vector<std::string>{"pypi.org"});
  auto u = resolve_spec(cfg, Trust::untrusted, {}, big_host());
  EXPECT_EQ(u.limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(u.network.mode, NetworkMode::none);
}

TEST(Config, CliMayOnlyTightenAndEveryAdjustmentIsRecorded) {
  auto cfg = parse("mem_limit: 256m\ntimeout: 30\ncpu_count: 1\npids_limit: 64\n");
  RunOverrides tighter{5, 64ull << 20, 0.5, 16};
  auto s = resolve_spec(cfg, Trust::untrusted, tighter, big_host());
  EXPECT_EQ(s.limits.timeout_s, 5);
  EXPECT_EQ(s.limits.memory_bytes, 64ull << 20);
  EXPECT_EQ(s.limits.cpus, 0.5);
  EXPECT_EQ(s.limits.pids, 16u);
  EXPECT_TRUE(s.adjustments.empty());
  RunOverrides looser{300, 8ull << 30, 8, 4096};
  auto l = resolve_spec(cfg, Trust::untrusted, looser, big_host());
  EXPECT_EQ(l.limits.timeout_s, 30);
  EXPECT_EQ(l.limits.memory_bytes, 256ull << 20);
  EXPECT_EQ(l.limits.cpus, 1);
  EXPECT_EQ(l.limits.pids, 64u);
  EXPECT_EQ(l.adjustments.size(), 4u);
}

TEST(Config, LimitsAreClampedToTheHost) {
  auto cfg = parse("cpu_count: 8\nmem_limit: 8g\nhost_memory_share: 0.5\n");
  auto s = resolve_spec(cfg, Trust::trusted, {}, HostResources{2, 4ull << 30});
  EXPECT_EQ(s.limits.cpus, 2);
  EXPECT_EQ(s.limits.memory_bytes, 2ull << 30);
  ASSERT_EQ(s.adjustments.size(), 2u);
  EXPECT_EQ(s.adjustments[0].limit, "cpu_count");
  EXPECT_EQ(s.adjustments[1].limit, "mem_limit");
}

TEST(Config, CallerEnvironmentIsNeverPartOfTheSpec) {
  setenv("SANDBOXRUN_UNIT_SECRET", "x", 1);
  auto s = resolve_spec(parse("environment:\n  FOO: bar\n"), Trust::untrusted, {}, big_host());
  EXPECT_EQ(s.env.count("SANDBOXRUN_UNIT_SECRET"), 0u);
  EXPECT_EQ(s.env.at("FOO"), "bar");
  EXPECT_EQ(s.env.at("HOME"), "/tmp");
}

TEST(Config, WorkDirectoryAndJobLimits) {
  auto s = resolve_spec(parse("tmp_size: 32m\n"), Trust::untrusted, {}, big_host());
  EXPECT_EQ(s.limits.work_bytes, 32ull << 20) << "work_size defaults to tmp_size";
  EXPECT_EQ(s.limits.output_files, 1000u);
  EXPECT_EQ(s.limits.output_total_bytes, 64ull << 20);
  EXPECT_EQ(s.workdir, "/work");
  EXPECT_EQ(s.env.at("MPLBACKEND"), "Agg");
  auto cfg = parse("work_size: 8m\ninput_limit: 1m\ninput_files_limit: 5\noutput_files_limit: 7\n"
                   "output_bytes_limit: 2m\ntrust_levels:\n  trusted:\n    work_size: 16m\n");
  EXPECT_EQ(cfg.input_limit, 1ull << 20);
  EXPECT_EQ(cfg.input_files_limit, 5u);
  s = resolve_spec(cfg, Trust::untrusted, {}, big_host());
  EXPECT_EQ(s.limits.work_bytes, 8ull << 20);
  EXPECT_EQ(s.limits.output_files, 7u);
  EXPECT_EQ(s.limits.output_total_bytes, 2ull << 20);
  EXPECT_EQ(resolve_spec(cfg, Trust::trusted, {}, big_host()).limits.work_bytes, 16ull << 20);
  EXPECT_THROW(parse("output_files_limit: 0\n"), Error);
}

TEST(Config, ExtraHostsAcceptDockersListAndMappingForms) {
  const std::map<std::string, std::string> want{
      {"pypi.internal", "10.0.0.5"}, {"v6.internal", "fd00::1"}, {"db_1", "::ffff:10.1.2.3"}};
  EXPECT_EQ(parse("extra_hosts:\n  pypi.internal: 10.0.0.5\n  v6.internal: \"fd00::1\"\n"
                  "  db_1: \"::ffff:10.1.2.3\"\n")
                .base.extra_hosts,
            want);
  // The list splits at the first colon, as Docker does: the rest is the (IPv6) address.
  EXPECT_EQ(parse("extra_hosts: [\"pypi.internal:10.0.0.5\", \"v6.internal:fd00::1\", "
                  "\"db_1:::ffff:10.1.2.3\"]\n")
                .base.extra_hosts,
            want);
  EXPECT_EQ(parse("extra_hosts:\n  - \"a:1.2.3.4\"\n  - \"a:1.2.3.4\"\n").base.extra_hosts,
            (std::map<std::string, std::string>{{"a", "1.2.3.4"}}));
  EXPECT_TRUE(parse("extra_hosts: []\n").base.extra_hosts->empty());
  EXPECT_TRUE(parse("extra_hosts:\n").base.extra_hosts->empty());
  auto s = resolve_spec(parse("trust_levels:\n  untrusted:\n    extra_hosts: [\"x.test:127.0.0.2\"]\n"),
                        Trust::untrusted, {}, big_host());
  EXPECT_EQ(s.network.extra_hosts.at("x.test"), "127.0.0.2");

  struct Bad {
    const char* yaml;
    const char* message;
  };
  const Bad bad[] = {
      {"extra_hosts: [\"nocolon\"]\n",
       "sandbox.yaml:1: key 'extra_hosts[0]': expected \"NAME:ADDRESS\", e.g. \"pypi.internal:10.0.0.5\", got 'nocolon'"},
      {"extra_hosts:\n  - \"a:1.2.3.4\"\n  - \"b:not-an-ip\"\n",
       "sandbox.yaml:3: key 'extra_hosts[1]': expected an IPv4 or IPv6 address for 'b', got 'not-an-ip'"},
      {"extra_hosts: [\":1.2.3.4\"]\n", "key 'extra_hosts[0]': expected a host name"},
      {"extra_hosts: [\"bad name:1.2.3.4\"]\n", "got 'bad name'"},
      {"extra_hosts: [[a, b]]\n", "key 'extra_hosts[0]': expected \"NAME:ADDRESS\""},
      {"extra_hosts: [\"a:1.2.3.4\", \"a:1.2.3.5\"]\n",
       "expected one address per name, got 'a' mapped to both 1.2.3.4 and 1.2.3.5"},
      {"extra_hosts:\n  a: 1.2.3.4.5\n", "sandbox.yaml:2: key 'extra_hosts.a': expected an IPv4 or IPv6 address"},
      {"extra_hosts:\n  \"a\\nb\": 1.2.3.4\n", "expected a host name"},
      {"extra_hosts: pypi:1.2.3.4\n",
       "key 'extra_hosts': expected a list of \"NAME:ADDRESS\" strings or a mapping of names to addresses"},
      {"trust_levels:\n  trusted:\n    extra_hosts: [\"x\"]\n", "key 'trust_levels.trusted.extra_hosts[0]'"},
  };
  for (const auto& b : bad) {
    const std::string err = error_of(b.yaml);
    EXPECT_NE(err.find("/etc/sr/sandbox.yaml"), std::string::npos) << b.yaml << " -> " << err;
    EXPECT_NE(err.find(b.message), std::string::npos) << b.yaml << " -> " << err;
  }
}

TEST(Config, SearchOrderPrefersTheCliThenTheEnvironment) {
  const std::string file = SANDBOXRUN_SOURCE_DIR "/config/sandbox.yaml";
  EXPECT_EQ(find_config(file), file);
  EXPECT_EQ(find_config(std::string(SANDBOXRUN_SOURCE_DIR "/config")), std::filesystem::path(file));
  test_util::TempDir d;
  const auto other = d.write("other.yaml", "{}\n");
  setenv("SANDBOXRUN_CONFIG", other.c_str(), 1);
  EXPECT_EQ(find_config(std::nullopt), other);
  EXPECT_EQ(find_config(file), file) << "--config wins over the environment";
  unsetenv("SANDBOXRUN_CONFIG");
}

// A path given by the caller that holds no sandbox.yaml is an error naming it, not a search
// elsewhere or a later error about security.yaml beside it.
TEST(Config, AGivenPathWithoutSandboxYamlIsAnErrorNamingIt) {
  test_util::TempDir d;
  for (const std::string& p : {std::string("/nonexistent/sandbox.yaml"), d.path().string()}) {
    try {
      find_config(p);
      FAIL() << p;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no sandbox.yaml at "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--config"), std::string::npos) << e.what();
    }
  }
  setenv("SANDBOXRUN_CONFIG", "/nonexistent", 1);
  EXPECT_THROW(find_config(std::nullopt), Error);
  unsetenv("SANDBOXRUN_CONFIG");
}

TEST(Config, DependencySettingsParseAndResolvePerLevel) {
  auto cfg = parse("requirements: [requests==2.31.0]\n"
                   "package_index: {url: 'http://pkgs.test:8080/simple', hosts: [files.pkgs.test]}\n"
                   "cache_dir: cache\ncache_max_size: 2g\n"
                   "trust_levels:\n  trusted:\n    requirements: ['numpy>=1.26 ; python_version>\"3.8\"']\n");
  EXPECT_EQ(cfg.package_index.url, "http://pkgs.test:8080/simple");
  EXPECT_EQ(cfg.package_index.hosts, std::vector<std::string>{"files.pkgs.test"});
  EXPECT_EQ(cfg.cache_dir, std::filesystem::path("/etc/sr/cache"));
  EXPECT_EQ(cfg.cache_max_size, 2ull << 30);
  EXPECT_EQ(resolve_spec(cfg, Trust::untrusted, {}, big_host()).requirements,
            std::vector<std::string>{"requests==2.31.0"});
  EXPECT_EQ(resolve_spec(cfg, Trust::trusted, {}, big_host()).requirements.size(), 1u);
  EXPECT_EQ(url_host(cfg.package_index.url), "pkgs.test");
  EXPECT_EQ(url_host("https://PyPI.org/simple"), "pypi.org");
  EXPECT_EQ(url_host("https://user:pw@pypi.org/simple"), "");
  EXPECT_EQ(url_host("ftp://pypi.org/"), "");
  auto defaults = parse("{}\n");
  EXPECT_EQ(defaults.package_index.url, "https://pypi.org/simple");
  EXPECT_EQ(defaults.package_index.hosts, std::vector<std::string>{"files.pythonhosted.org"});
}

TEST(Config, BadDependencySettingsNameTheKeyAndLine) {
  struct Case {
    const char* yaml;
    const char* must_contain;
  } cases[] = {
      {"requirements: ['-r other.txt']\n", "'requirements[0]'"},
      {"requirements: ['pkg @ https://evil/pkg.whl']\n", "direct URL"},
      {"trust_levels:\n  trusted:\n    requirements: ['--index-url http://x']\n", "trust_levels.trusted.requirements[0]"},
      {"package_index: {url: 'pypi.org/simple'}\n", "package_index.url"},
      {"package_index: {url: 'https://a:b@pypi.org/simple'}\n", "no credentials"},
      {"package_index: {hosts: ['https://x/']}\n", "package_index.hosts[0]"},
      {"package_index: {mirror: x}\n", "package_index.mirror"},
      {"cache_max_size: 1k\n", "cache_max_size"},
      {"cache_dir: ''\n", "cache_dir"},
  };
  for (const auto& c : cases) {
    std::string err = error_of(c.yaml);
    EXPECT_NE(err.find("/etc/sr/sandbox.yaml:"), std::string::npos) << c.yaml << " -> " << err;
    EXPECT_NE(err.find(c.must_contain), std::string::npos) << c.yaml << " -> " << err;
  }
}

// A key given twice is refused with both lines: YAML itself lets the last one win, so the
// README's way to raise a limit (a line added at the top of a copied config) silently did nothing.
TEST(Config, AKeyGivenTwiceNamesBothLines) {
  const std::string e = error_of("output_limit: 10m\ncpu_count: 1\noutput_limit: 1m\n");
  EXPECT_NE(e.find("/etc/sr/sandbox.yaml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("'output_limit' is given twice (first at line 1)"), std::string::npos) << e;
  // Inside a level too.
  const std::string nested = error_of("trust_levels:\n  trusted:\n    timeout: 5\n    timeout: 50\n");
  EXPECT_NE(nested.find(":4: key 'timeout' is given twice (first at line 3)"), std::string::npos) << nested;
  // The same key in two different mappings is fine.
  EXPECT_EQ(error_of("timeout: 5\ntrust_levels:\n  trusted:\n    timeout: 50\n"), "");
}

TEST(Config, AnUnknownKeySuggestsTheNearestKnownOne) {
  const std::string top = error_of("mem_limt: 1g\n");
  EXPECT_NE(top.find("did you mean 'mem_limit'?"), std::string::npos) << top;
  const std::string level = error_of("trust_levels:\n  trusted:\n    timout: 5\n");
  EXPECT_NE(level.find("trust_levels.trusted.timout"), std::string::npos) << level;
  EXPECT_NE(level.find("did you mean 'timeout'?"), std::string::npos) << level;
  // A level names only the per-level keys: image is not one.
  const std::string not_level = error_of("trust_levels:\n  trusted:\n    image: x\n");
  EXPECT_NE(not_level.find("unknown key"), std::string::npos) << not_level;
  EXPECT_EQ(not_level.find("default_trust"), std::string::npos) << not_level;
  // Nothing near: no guess.
  const std::string far = error_of("frobnicate: 1\n");
  EXPECT_NE(far.find("unknown key"), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

// What shapes a sandbox before its release is compared whole: a sandbox set up ahead never runs a
// request whose /etc/hosts, binds or limits differ; what comes with the release does not count.
TEST(SandboxShape, EverySettingBeforeTheReleaseCountsAndNothingElse) {
  SandboxSpec a = resolve_spec(parse("timeout: 5\n"), Trust::untrusted, {}, big_host());
  SandboxSpec b = a;
  b.env["API_URL"] = "http://x";
  b.requirements = {"six"};
  b.adjustments.push_back({"mem_limit", "2g", "1g", "host", false});
  EXPECT_TRUE(a.shape() == b.shape());
  b = a;
  b.network.extra_hosts["pypi.internal"] = "10.0.0.5";
  EXPECT_FALSE(a.shape() == b.shape());
  b = a;
  b.run_binds.push_back({"/var/cache/x", "deps", false});
  EXPECT_FALSE(a.shape() == b.shape());
  b = a;
  b.limits.tmp_bytes += 1;
  EXPECT_FALSE(a.shape() == b.shape());
  b = a;
  b.seccomp_profile = "/other.json";
  EXPECT_FALSE(a.shape() == b.shape());
}

// Asking for more than the level allows is refused with where the limit is raised.
TEST(Config, AskingForMoreSaysWhereTheLimitIsRaised) {
  RunOverrides ov;
  ov.timeout_s = 10000;
  ov.memory_bytes = 1ull << 40;
  const SandboxSpec s = resolve_spec(parse("timeout: 5\n"), Trust::unknown, ov, big_host());
  ASSERT_EQ(s.adjustments.size(), 2u);
  EXPECT_TRUE(s.adjustments[0].requested);
  EXPECT_NE(s.adjustments[0].reason.find("set trust_levels.unknown.timeout in a copy of sandbox.yaml and pass --config"),
            std::string::npos)
      << s.adjustments[0].reason;
  EXPECT_NE(s.adjustments[1].reason.find("trust_levels.unknown.mem_limit"), std::string::npos) << s.adjustments[1].reason;
}
