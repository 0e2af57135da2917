// SandboxSpec: everything one run needs, resolved from the config, the trust level, the
// assessment and the CLI. Nothing after resolution reads YAML or the environment.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sandboxrun {

enum class Trust { untrusted, unknown, trusted };
NLOHMANN_JSON_SERIALIZE_ENUM(Trust, {{Trust::untrusted, "untrusted"}, {Trust::unknown, "unknown"},
                                     {Trust::trusted, "trusted"}})
const char* to_string(Trust t);
std::optional<Trust> parse_trust(const std::string& s);
// untrusted < unknown < trusted; the stricter of two.
Trust stricter(Trust a, Trust b);

enum class NetworkMode { none, allowlist };
NLOHMANN_JSON_SERIALIZE_ENUM(NetworkMode, {{NetworkMode::none, "none"}, {NetworkMode::allowlist, "allowlist"}})
const char* to_string(NetworkMode m);

struct Limits {
  double cpus = 1.0;                 // cpu_count; fractional allowed
  uint64_t memory_bytes = 256 << 20; // mem_limit
  uint64_t pids = 64;                // pids_limit
  double timeout_s = 30;             // wall clock
  uint64_t tmp_bytes = 64 << 20;     // tmpfs /tmp size
  uint64_t output_bytes = 1 << 20;   // output kept per stream (captured, or streamed)
  uint64_t work_bytes = 64 << 20;    // tmpfs /work size (work_size; default: tmp_size)
  uint64_t output_files = 1000;      // --output: files copied back (output_files_limit)
  uint64_t output_total_bytes = 64 << 20;  // --output: bytes copied back (output_bytes_limit)
  bool operator==(const Limits&) const = default;
};

// One adjustment the launcher made to a requested limit (host clamp, CLI tighten).
struct LimitAdjustment {
  std::string limit;  // "cpu_count", "mem_limit", ...
  std::string from;
  std::string to;
  std::string reason;
  bool requested = false;  // the caller asked for `from` (--timeout ...) and did not get it
};

// per_run: each run gets a cgroup of its own under a parent sandboxrun may write (root, a
// delegated subtree). enclosing: one run per container (a Kubernetes Job, `podman run`): the
// run uses the cgroup sandboxrun itself runs in, never writes to cgroupfs, and refuses unless
// that cgroup holds nothing else and its limits are at least as tight as the run's
// (src/cgroup/cgroup_enclosing.cpp).
enum class CgroupMode { per_run, enclosing };
NLOHMANN_JSON_SERIALIZE_ENUM(CgroupMode, {{CgroupMode::per_run, "per_run"}, {CgroupMode::enclosing, "enclosing"}})

struct CgroupSettings {
  CgroupMode mode = CgroupMode::per_run;
  std::string parent;           // configured parent (v2 path relative to the mount, or v1 name); empty = auto
  bool allow_degraded = false;  // run untrusted code without enforced memory/pids limits
  bool operator==(const CgroupSettings&) const = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CgroupSettings, mode, parent, allow_degraded)

struct NetworkSettings {
  NetworkMode mode = NetworkMode::none;
  std::vector<std::string> allowlist;              // "pypi.org", "*.pythonhosted.org"
  std::map<std::string, std::string> extra_hosts;  // name -> address
  std::vector<std::string> allow_networks;         // CIDRs the proxy may reach despite private ranges
  uint32_t max_connections = 32;
  uint64_t max_bytes = 1ull << 30;
  uint32_t idle_timeout_s = 60;
  bool operator==(const NetworkSettings&) const = default;
};

// A host directory bound at /run/NAME inside the sandbox (installed dependencies, phase 1's
// output directory). /run is the sandbox's own tmpfs, so the mount point never touches the image.
struct RunBind {
  std::filesystem::path source;  // an existing host directory
  std::string name;              // one path component, not "sandbox" or "sandboxrun"
  bool writable = false;
  bool operator==(const RunBind&) const = default;
};

// Landlock, the second wall behind the mount namespace (see src/launch/landlock.cpp).
enum class LandlockMode { required, best_effort, off };
NLOHMANN_JSON_SERIALIZE_ENUM(LandlockMode, {{LandlockMode::required, "required"},
                                            {LandlockMode::best_effort, "best_effort"},
                                            {LandlockMode::off, "off"}})
const char* to_string(LandlockMode m);

// Host ids reserved for sandboxes (id_slots.hpp): each live run maps its user namespace onto
// its own slot of slot_size ids (inside 0 -> the slot's first id, the sandbox user -> the next).
struct IdRanges {
  uint32_t base = 100000000;
  uint32_t size = 2048;
  uint32_t slot_size = 2;
  uint32_t slots() const { return size / slot_size; }
  bool operator==(const IdRanges&) const = default;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IdRanges, base, size, slot_size)

// What shapes a sandbox before its release: namespaces, ids, cgroup and limits, mounts, /etc
// files, Landlock and the seccomp program. A sandbox set up ahead (ExecutorOptions::warm) runs a
// request exactly when their shapes are equal; the environment, argv and script come with the
// release. A setting added here is compared without anyone having to remember it.
struct SandboxShape {
  Trust trust = Trust::untrusted;
  Limits limits;
  std::filesystem::path rootfs;     // unpacked image, mounted read-only
  std::string hostname = "sandbox";
  uid_t uid = 1000;
  gid_t gid = 1000;
  std::filesystem::path seccomp_profile;  // Docker JSON profile
  NetworkSettings network;
  std::string python = "/usr/bin/python3";
  std::string workdir = "/work";   // a tmpfs holding the script and the inputs
  std::vector<RunBind> run_binds;
  CgroupSettings cgroup;
  LandlockMode landlock = LandlockMode::best_effort;
  IdRanges id_ranges;
  // Test-only fault injection, never set from a config file: a host directory bound writable at
  // /mnt, the mistake the mount code must never make, to prove that Landlock still refuses it.
  std::string test_extra_writable_bind;
  bool operator==(const SandboxShape&) const = default;
};

// Everything one run needs: its sandbox's shape and what comes with the release or after it.
// The image is always mounted read-only, every capability is dropped and no_new_privs is set:
// there are no settings for those (sandbox.yaml's read_only, cap_drop and security_opt are
// checked when read and accept only what the sandbox does anyway).
struct SandboxSpec : SandboxShape {
  std::vector<LimitAdjustment> adjustments;
  std::map<std::string, std::string> env;  // the complete environment of the payload
  std::vector<std::string> requirements;  // pip requirement lines from the config (deps.hpp)
  // Periodic samples of the cgroup every monitor_interval (LaunchRequest::on_sample, --stats);
  // off, the loop does not wake to sample and the final usage is read at the end all the same.
  bool monitoring = true;
  std::chrono::milliseconds monitor_interval{100};
  const SandboxShape& shape() const { return *this; }
};

}  // namespace sandboxrun
