// Resolution of the config for one trust level into a SandboxSpec: base values, the level's
// overrides, CLI requests (which may only tighten), then clamps to what the host has.
#include <sched.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/install_paths.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

HostResources probe_host_resources() {
  HostResources h;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) h.cpus_available = CPU_COUNT(&set);
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) {
      h.memory_available = kb * 1024;
      break;
    }
  }
  return h;
}

SandboxSpec resolve_spec(const SandboxConfig& cfg, Trust trust, const RunOverrides& ov,
                         const HostResources& host) {
  auto it = cfg.levels.find(trust);
  const LevelSettings v = it == cfg.levels.end() ? cfg.base : overlay(cfg.base, it->second);
  SandboxSpec s;
  s.trust = trust;
  Limits defaults;
  s.limits.cpus = v.cpu_count.value_or(defaults.cpus);
  s.limits.memory_bytes = v.mem_limit.value_or(defaults.memory_bytes);
  s.limits.pids = v.pids_limit.value_or(defaults.pids);
  s.limits.timeout_s = v.timeout.value_or(defaults.timeout_s);
  s.limits.tmp_bytes = v.tmp_size.value_or(defaults.tmp_bytes);
  s.limits.output_bytes = v.output_limit.value_or(defaults.output_bytes);
  s.limits.work_bytes = v.work_size.value_or(s.limits.tmp_bytes);
  s.limits.output_files = v.output_files_limit.value_or(defaults.output_files);
  s.limits.output_total_bytes = v.output_bytes_limit.value_or(defaults.output_total_bytes);
  s.seccomp_profile = v.seccomp_profile.value_or(install_paths().data_dir / "policies/default.json");
  s.uid = v.uid.value_or(1000u);
  s.gid = v.gid.value_or(1000u);
  s.network.mode = v.network_mode.value_or(NetworkMode::none);
  s.network.allowlist = v.network_allowlist.value_or(std::vector<std::string>{});
  s.network.extra_hosts = v.extra_hosts.value_or(std::map<std::string, std::string>{});
  s.network.allow_networks = v.allow_networks.value_or(std::vector<std::string>{});
  s.requirements = v.requirements.value_or(std::vector<std::string>{});
  s.cgroup = cfg.cgroup;
  s.landlock = cfg.landlock;
  s.id_ranges = cfg.id_ranges;
  s.monitoring = cfg.monitoring;
  s.monitor_interval = std::chrono::milliseconds(cfg.monitor_interval_ms);

  // The payload's environment: fixed basics plus what the config names. Nothing of the caller's.
  s.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
           {"HOME", "/tmp"},
           {"LANG", "C.UTF-8"},
           {"TMPDIR", "/tmp"},
           {"PYTHONDONTWRITEBYTECODE", "1"},
           {"PYTHONUNBUFFERED", "1"},
           // Plotting scripts write files instead of failing for want of a display.
           {"MPLBACKEND", "Agg"}};
  if (v.environment)
    for (const auto& [name, value] : *v.environment) s.env[name] = value;

  auto adjust = [&](const std::string& name, const std::string& from, const std::string& to,
                    const std::string& why, bool requested = false) {
    s.adjustments.push_back({name, from, to, why, requested});
  };
  // A caller who asked for more is told where the limit is raised.
  const std::string level = to_string(trust);
  auto tighten_only = [&](const char* option, const char* key) {
    return std::string(option) + " may only tighten the trust level's limit; to raise it, set trust_levels." + level +
           "." + key + " in a copy of sandbox.yaml and pass --config DIR";
  };

  if (ov.timeout_s) {
    if (*ov.timeout_s < s.limits.timeout_s) s.limits.timeout_s = *ov.timeout_s;
    else if (*ov.timeout_s > s.limits.timeout_s)
      adjust("timeout", num(*ov.timeout_s), num(s.limits.timeout_s), tighten_only("--timeout", "timeout"), true);
  }
  if (ov.memory_bytes) {
    if (*ov.memory_bytes < s.limits.memory_bytes) s.limits.memory_bytes = *ov.memory_bytes;
    else if (*ov.memory_bytes > s.limits.memory_bytes)
      adjust("mem_limit", format_size(*ov.memory_bytes), format_size(s.limits.memory_bytes),
             tighten_only("--memory", "mem_limit"), true);
  }
  if (ov.cpus) {
    if (*ov.cpus < s.limits.cpus) s.limits.cpus = *ov.cpus;
    else if (*ov.cpus > s.limits.cpus)
      adjust("cpu_count", num(*ov.cpus), num(s.limits.cpus), tighten_only("--cpus", "cpu_count"), true);
  }
  if (ov.pids) {
    if (*ov.pids < s.limits.pids) s.limits.pids = *ov.pids;
    else if (*ov.pids > s.limits.pids)
      adjust("pids_limit", std::to_string(*ov.pids), std::to_string(s.limits.pids),
             tighten_only("--pids", "pids_limit"), true);
  }

  if (host.cpus_available > 0 && s.limits.cpus > host.cpus_available) {
    adjust("cpu_count", num(s.limits.cpus), num(host.cpus_available), "clamped to the CPUs this process may use");
    s.limits.cpus = host.cpus_available;
  }
  if (host.memory_available > 0) {
    auto cap = static_cast<uint64_t>(static_cast<double>(host.memory_available) * cfg.host_memory_share);
    if (s.limits.memory_bytes > cap) {
      adjust("mem_limit", format_size(s.limits.memory_bytes), format_size(cap),
             "clamped to host_memory_share (" + num(cfg.host_memory_share) + ") of available memory");
      s.limits.memory_bytes = cap;
    }
  }
  return s;
}

}  // namespace sandboxrun
