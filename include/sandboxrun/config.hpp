// sandbox.yaml: parsing, validation and resolution into one SandboxSpec per run.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandboxrun/record.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun {

// The settings' stored form (the parsed-config cache) comes from the `fields` lists below:
// a setting added to a struct and its list is stored and read back with no other change.
// Values a trust level may override; unset fields inherit the base values.
struct LevelSettings {
  std::optional<double> cpu_count;
  std::optional<uint64_t> mem_limit;
  std::optional<uint64_t> pids_limit;
  std::optional<double> timeout;
  std::optional<uint64_t> tmp_size;
  std::optional<uint64_t> output_limit;
  std::optional<uint64_t> work_size;
  std::optional<uint64_t> output_files_limit;
  std::optional<uint64_t> output_bytes_limit;
  std::optional<std::filesystem::path> seccomp_profile;  // from security_opt
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<NetworkMode> network_mode;
  std::optional<std::vector<std::string>> network_allowlist;
  std::optional<std::map<std::string, std::string>> extra_hosts;
  std::optional<std::vector<std::string>> allow_networks;
  std::optional<std::map<std::string, std::string>> environment;
  // pip requirement lines installed in a separate phase (see deps.hpp); checked at load.
  std::optional<std::vector<std::string>> requirements;

  bool operator==(const LevelSettings&) const = default;
  using L = LevelSettings;
  static constexpr auto fields = std::tuple{
      record::field("cpu_count", &L::cpu_count), record::field("mem_limit", &L::mem_limit),
      record::field("pids_limit", &L::pids_limit), record::field("timeout", &L::timeout),
      record::field("tmp_size", &L::tmp_size), record::field("output_limit", &L::output_limit),
      record::field("work_size", &L::work_size), record::field("output_files_limit", &L::output_files_limit),
      record::field("output_bytes_limit", &L::output_bytes_limit),
      record::field("seccomp_profile", &L::seccomp_profile), record::field("uid", &L::uid),
      record::field("gid", &L::gid), record::field("network_mode", &L::network_mode),
      record::field("network_allowlist", &L::network_allowlist), record::field("extra_hosts", &L::extra_hosts),
      record::field("allow_networks", &L::allow_networks), record::field("environment", &L::environment),
      record::field("requirements", &L::requirements)};
};

// `level`'s values where it sets them, `base`'s elsewhere: what a trust level runs with.
LevelSettings overlay(const LevelSettings& base, const LevelSettings& level);

// Where the dependency phase installs from. The url's own host is always on phase 1's
// allowlist; `hosts` adds the hosts the index links to (PyPI serves files from another name).
struct PackageIndex {
  std::string url = "https://pypi.org/simple";
  std::vector<std::string> hosts{"files.pythonhosted.org"};
  bool operator==(const PackageIndex&) const = default;
  static constexpr auto fields =
      std::tuple{record::field("url", &PackageIndex::url), record::field("hosts", &PackageIndex::hosts)};
};

// Sessions (docs/sessions.md): how many an Executor holds, and how long one may last.
struct SessionSettings {
  uint32_t max = 64;               // open at once per Executor
  uint32_t max_per_caller = 16;    // of those, for one caller (RunRequest::caller; none counts as one)
  double idle_timeout_s = 600;     // closed after this long without a cell
  double lifetime_s = 3600;        // closed this long after it started
  bool operator==(const SessionSettings&) const = default;
  using S = SessionSettings;
  static constexpr auto fields = std::tuple{
      record::field("max", &S::max), record::field("max_per_caller", &S::max_per_caller),
      record::field("idle_timeout_s", &S::idle_timeout_s), record::field("lifetime_s", &S::lifetime_s)};
};

struct SandboxConfig {
  std::filesystem::path file;  // the sandbox.yaml it came from
  std::filesystem::path dir;   // its directory (security.yaml, audit.yaml live beside it)
  Trust default_trust = Trust::untrusted;
  std::string image;           // rootfs dir or OCI layout[:tag], resolved against dir
  double host_memory_share = 0.5;
  LevelSettings base;
  std::map<Trust, LevelSettings> levels;
  CgroupSettings cgroup;
  LandlockMode landlock = LandlockMode::best_effort;
  IdRanges id_ranges;
  bool monitoring = true;
  uint32_t monitor_interval_ms = 100;
  std::string digest;          // SHA-256 of the file's bytes, for the audit log
  // --input: what may be copied into /work, read on the host before anything starts.
  uint64_t input_limit = 64ull << 20;  // bytes, all inputs together
  uint64_t input_files_limit = 1000;
  PackageIndex package_index;
  std::optional<std::filesystem::path> cache_dir;  // the dependency cache; $SANDBOXRUN_CACHE_DIR/deps wins
  uint64_t cache_max_size = 4ull << 30;            // dependency cache cap (LRU eviction)
  SessionSettings sessions;

  bool operator==(const SandboxConfig&) const = default;
  // Every setting; file, dir and digest describe where the settings came from instead.
  using C = SandboxConfig;
  static constexpr auto fields = std::tuple{
      record::field("default_trust", &C::default_trust), record::field("image", &C::image),
      record::field("host_memory_share", &C::host_memory_share), record::field("base", &C::base),
      record::field("trust_levels", &C::levels), record::field("cgroup", &C::cgroup),
      record::field("landlock", &C::landlock), record::field("id_ranges", &C::id_ranges),
      record::field("monitoring", &C::monitoring), record::field("monitor_interval_ms", &C::monitor_interval_ms),
      record::field("input_limit", &C::input_limit), record::field("input_files_limit", &C::input_files_limit),
      record::field("package_index", &C::package_index), record::field("cache_dir", &C::cache_dir),
      record::field("cache_max_size", &C::cache_max_size), record::field("sessions", &C::sessions)};
};

// The host part of an http(s) URL ("pypi.org" of https://pypi.org:443/simple), lower-cased;
// empty when `url` is not http(s)://HOST[:PORT][/PATH] without credentials.
std::string url_host(const std::string& url);

// Where the config is looked for, in order: --config PATH (a file, or a directory holding
// sandbox.yaml); $SANDBOXRUN_CONFIG; /etc/sandboxrun/sandbox.yaml; the project's config/
// directory this binary was built from.
std::filesystem::path find_config(const std::optional<std::string>& cli_path);

// Throws Error naming the file, the key (dotted path) and the line, and what was expected.
SandboxConfig load_sandbox_config(const std::filesystem::path& file);
SandboxConfig parse_sandbox_config(const std::string& yaml_text, const std::filesystem::path& file);

// Per-run requests from the CLI; they may only tighten the trust level's values.
struct RunOverrides {
  std::optional<double> timeout_s;
  std::optional<uint64_t> memory_bytes;
  std::optional<double> cpus;
  std::optional<uint64_t> pids;
};

// What the host offers, measured once by the caller (kept separate so tests can vary it).
struct HostResources {
  double cpus_available = 1;        // CPUs in our affinity mask
  uint64_t memory_available = 0;    // MemAvailable
};
HostResources probe_host_resources();

// Resolves the config for a trust level into the spec (limits clamped to the host, adjustments
// recorded). The rootfs is left empty: the caller resolves `image`.
SandboxSpec resolve_spec(const SandboxConfig& cfg, Trust trust, const RunOverrides& overrides,
                         const HostResources& host);

}  // namespace sandboxrun
