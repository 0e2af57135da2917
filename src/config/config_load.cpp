// Parsing and validation of sandbox.yaml. Every unknown key or bad value is an error that names
// the file, the key, the line and what was expected.
#include <arpa/inet.h>
#include <sys/capability.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <span>
#include <string_view>

#include "sandboxrun/config.hpp"
#include "config/config_cache.hpp"
#include "deps/deps.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "common/install_paths.hpp"
#include "common/sha256.hpp"
#include "common/yaml_strict.hpp"

namespace sandboxrun {

namespace {

bool known_capability(const std::string& name) {
  if (name == "ALL") return true;
  std::string lower = "cap_";
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  cap_value_t v;
  return cap_from_name(lower.c_str(), &v) == 0;
}

// extra_hosts, as Docker's --add-host: a mapping of names to addresses, or a list of
// "NAME:ADDRESS" strings (the Docker SDK and compose accept both). The list form splits at the
// first colon, as Docker does, so IPv6 addresses need no quoting of their own. The entries go into
// the sandbox's /etc/hosts (and the proxy's resolver), so each must be one clean name and one
// IP address: nothing else can reach a line of that file.
std::map<std::string, std::string> read_extra_hosts(const StrictYaml& r, const YAML::Node& v,
                                                    const std::string& path) {
  if (v.IsDefined() && v.IsNull()) return {};
  std::map<std::string, std::string> out;
  auto add = [&](const YAML::Node& at, const std::string& key, const std::string& name,
                 const std::string& address) {
    const bool name_ok = !name.empty() && name.size() <= 253 && name.front() != '-' &&
                         name.front() != '.' &&
                         name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                "0123456789.-_") == std::string::npos;
    if (!name_ok)
      r.fail(at, key, "a host name (letters, digits, '.', '-', '_')", "'" + name + "'");
    unsigned char buf[sizeof(in6_addr)];
    if (inet_pton(AF_INET, address.c_str(), buf) != 1 && inet_pton(AF_INET6, address.c_str(), buf) != 1)
      r.fail(at, key, "an IPv4 or IPv6 address for '" + name + "'", "'" + address + "'");
    const auto [it, inserted] = out.emplace(name, address);
    if (!inserted && it->second != address)
      r.fail(at, key, "one address per name", "'" + name + "' mapped to both " + it->second + " and " + address);
  };
  if (v.IsMap()) {
    for (const auto& kv : v) {
      const std::string name = r.scalar(kv.first, path, "a host name");
      add(kv.second, StrictYaml::join(path, name), name,
          r.scalar(kv.second, StrictYaml::join(path, name), "an IP address"));
    }
    return out;
  }
  if (!v.IsSequence())
    r.fail(v, path, "a list of \"NAME:ADDRESS\" strings or a mapping of names to addresses");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string key = path + "[" + std::to_string(i) + "]";
    const std::string entry = r.scalar(v[i], key, "\"NAME:ADDRESS\", e.g. \"pypi.internal:10.0.0.5\"");
    const size_t colon = entry.find(':');
    if (colon == std::string::npos)
      r.fail(v[i], key, "\"NAME:ADDRESS\", e.g. \"pypi.internal:10.0.0.5\"", "'" + entry + "'");
    add(v[i], key, entry.substr(0, colon), entry.substr(colon + 1));
  }
  return out;
}

// Each setting once: its key in sandbox.yaml and how its value is read and checked. These tables
// are the parser, the known-keys message and its "did you mean"; the parsed form is cached and
// resolved through the fields lists of LevelSettings and SandboxConfig (config.hpp).
using LevelReader = void (*)(const StrictYaml& r, const std::string& path, const YAML::Node& v, LevelSettings& out);
struct LevelKey {
  std::string_view name;
  LevelReader read;
};

void read_security_opt(const StrictYaml& r, const std::string& path, const YAML::Node& v, LevelSettings& out) {
  for (const auto& opt : r.strings(v, path)) {
    if (opt == "no-new-privileges" || opt == "no-new-privileges:true") continue;
    if (opt.rfind("seccomp=", 0) == 0) {
      std::string p = opt.substr(8);
      if (p == "unconfined" || p.empty())
        r.fail(v, path, "seccomp=PATH to a Docker-format profile (seccomp=unconfined is refused)");
      try {
        out.seccomp_profile = find_data_file(p, r.file().parent_path(), "seccomp profile");
      } catch (const Error& e) {
        r.fail(v, path, "seccomp=PATH to an existing profile", e.what());
      }
      continue;
    }
    r.fail(v, path, "entries 'no-new-privileges' or 'seccomp=PATH' ('" + opt + "' is not supported)");
  }
}

void read_user(const StrictYaml& r, const std::string& path, const YAML::Node& v, LevelSettings& out) {
  std::string s = r.scalar(v, path, "\"UID:GID\" with numeric ids, e.g. \"1000:1000\"");
  auto colon = s.find(':');
  std::string u = s.substr(0, colon), g = colon == std::string::npos ? u : s.substr(colon + 1);
  auto numeric = [](const std::string& x) {
    return !x.empty() && x.size() < 10 && x.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!numeric(u) || !numeric(g)) r.fail(v, path, "\"UID:GID\" with numeric ids, e.g. \"1000:1000\"");
  uint32_t uid = static_cast<uint32_t>(std::stoul(u)), gid = static_cast<uint32_t>(std::stoul(g));
  if (uid == 0 || gid == 0) r.fail(v, path, "a non-root UID:GID (the sandbox never runs as root)");
  if (uid > 65533 || gid > 65533) r.fail(v, path, "ids below 65534");
  out.uid = uid;
  out.gid = gid;
}

void read_requirements(const StrictYaml& r, const std::string& path, const YAML::Node& v, LevelSettings& out) {
  auto reqs = r.strings(v, path);
  for (size_t i = 0; i < reqs.size(); ++i)
    if (auto why = deps::check_requirement(reqs[i]))
      r.fail(v[i], path + "[" + std::to_string(i) + "]", "a pip requirement such as 'requests==2.31.0'", *why);
  out.requirements = std::move(reqs);
}

using R = const StrictYaml&;
using P = const std::string&;
using V = const YAML::Node&;
using L = LevelSettings&;
constexpr LevelKey kLevelKeys[] = {
    {"cpu_count", [](R r, P p, V v, L o) { o.cpu_count = r.number(v, p, 0.01, 1024); }},
    {"mem_limit", [](R r, P p, V v, L o) { o.mem_limit = r.size(v, p, 16ull << 20); }},
    {"pids_limit", [](R r, P p, V v, L o) { o.pids_limit = r.integer(v, p, 8, 1u << 22); }},
    {"timeout", [](R r, P p, V v, L o) { o.timeout = r.number(v, p, 0.1, 86400 * 7); }},
    {"tmp_size", [](R r, P p, V v, L o) { o.tmp_size = r.size(v, p, 1ull << 20); }},
    {"output_limit", [](R r, P p, V v, L o) { o.output_limit = r.size(v, p, 1024); }},
    {"work_size", [](R r, P p, V v, L o) { o.work_size = r.size(v, p, 1ull << 20); }},
    {"output_files_limit", [](R r, P p, V v, L o) { o.output_files_limit = r.integer(v, p, 1, 1u << 20); }},
    {"output_bytes_limit", [](R r, P p, V v, L o) { o.output_bytes_limit = r.size(v, p, 0); }},
    {"security_opt", read_security_opt},
    // Checked, then nothing more to do: the sandbox drops every capability whatever the list.
    {"cap_drop",
     [](R r, P p, V v, L) {
       for (const auto& c : r.strings(v, p))
         if (!known_capability(c)) r.fail(v, p, "capability names such as ALL or NET_RAW ('" + c + "' is unknown)");
     }},
    {"read_only",
     [](R r, P p, V v, L) {
       if (!r.boolean(v, p))
         r.fail(v, p, "true: the image is shared between runs and always mounted read-only; write to /tmp");
     }},
    {"user", read_user},
    {"network_mode",
     [](R r, P p, V v, L o) {
       const std::string s = r.scalar(v, p, "none or allowlist");
       if (s == "none") o.network_mode = NetworkMode::none;
       else if (s == "allowlist") o.network_mode = NetworkMode::allowlist;
       else r.fail(v, p, "none or allowlist (host and bridge networking are not offered)");
     }},
    {"network_allowlist", [](R r, P p, V v, L o) { o.network_allowlist = r.strings(v, p); }},
    {"extra_hosts", [](R r, P p, V v, L o) { o.extra_hosts = read_extra_hosts(r, v, p); }},
    {"allow_networks", [](R r, P p, V v, L o) { o.allow_networks = r.strings(v, p); }},
    {"environment", [](R r, P p, V v, L o) { o.environment = r.string_map(v, p); }},
    {"requirements", read_requirements},
};

// Reads one key of a level (or of the base); returns false if the key is not a level key.
bool read_level_key(const StrictYaml& r, const std::string& key, const std::string& path, const YAML::Node& v,
                    LevelSettings& out) {
  for (const LevelKey& k : kLevelKeys)
    if (k.name == key) {
      k.read(r, path, v, out);
      return true;
    }
  return false;
}

// The top level's own keys (besides every level key, which sets the base values).
using TopReader = void (*)(const StrictYaml& r, const std::string& key, const YAML::Node& v, SandboxConfig& cfg);
struct TopKey {
  std::string_view name;
  TopReader read;
};
using C = SandboxConfig&;

void read_id_ranges(R r, P key, V v, C cfg) {
  r.check_keys(v, key, {"base", "size", "slot_size"});
  // Host ids below 65536 belong to accounts and system services, but a user-namespaced pod has
  // only those (a run checks that no account owns its range there); below 10000 are the usual
  // accounts'. The top of the range is reserved ((uid_t)-1 and the overflow ids).
  if (const auto b = v["base"]) cfg.id_ranges.base = static_cast<uint32_t>(r.integer(b, "id_ranges.base", 10000, 4000000000u));
  if (const auto z = v["size"]) cfg.id_ranges.size = static_cast<uint32_t>(r.integer(z, "id_ranges.size", 2, 1u << 24));
  if (const auto z = v["slot_size"])
    cfg.id_ranges.slot_size = static_cast<uint32_t>(r.integer(z, "id_ranges.slot_size", 2, 65536));
  if (cfg.id_ranges.size < cfg.id_ranges.slot_size) r.fail(v, key, "a size of at least one slot (size >= slot_size)");
}

void read_package_index(R r, P key, V v, C cfg) {
  r.check_keys(v, key, {"url", "hosts"});
  if (const auto u = v["url"]) {
    cfg.package_index.url = r.scalar(u, "package_index.url", "an http(s) URL");
    if (url_host(cfg.package_index.url).empty())
      r.fail(u, "package_index.url", "an http:// or https:// URL with a host and no credentials, e.g. https://pypi.org/simple");
  }
  if (const auto h = v["hosts"]) {
    cfg.package_index.hosts = r.strings(h, "package_index.hosts");
    for (size_t i = 0; i < cfg.package_index.hosts.size(); ++i)
      if (cfg.package_index.hosts[i].empty() || cfg.package_index.hosts[i].find_first_of("/:@ ") != std::string::npos)
        r.fail(h[i], "package_index.hosts[" + std::to_string(i) + "]", "a host name such as files.pythonhosted.org");
  }
}

void read_trust_levels(R r, P key, V v, C cfg);

constexpr TopKey kTopKeys[] = {
    {"default_trust",
     [](R r, P key, V v, C cfg) {
       auto t = parse_trust(r.scalar(v, key, "untrusted, unknown or trusted"));
       if (!t) r.fail(v, key, "untrusted, unknown or trusted");
       cfg.default_trust = *t;
     }},
    {"image",
     [](R r, P key, V v, C cfg) {
       std::string s = r.scalar(v, key, "an image name, a rootfs directory or an OCI layout path[:tag]");
       if (s.empty()) r.fail(v, key, "an image name (default), a rootfs directory or an OCI layout path[:tag]");
       // A bare name is looked up in the image store at run time; a path is relative to this file.
       cfg.image = s.find('/') == std::string::npos ? s : r.resolve(s).string();
     }},
    {"input_limit", [](R r, P key, V v, C cfg) { cfg.input_limit = r.size(v, key, 0); }},
    {"input_files_limit", [](R r, P key, V v, C cfg) { cfg.input_files_limit = r.integer(v, key, 1, 1u << 20); }},
    {"host_memory_share", [](R r, P key, V v, C cfg) { cfg.host_memory_share = r.number(v, key, 0.01, 1.0); }},
    {"cgroup",
     [](R r, P key, V v, C cfg) {
       r.check_keys(v, key, {"mode", "parent", "allow_degraded"});
       if (const auto m = v["mode"]) {
         const std::string s = r.scalar(m, "cgroup.mode", "per_run or enclosing");
         if (s == "per_run") cfg.cgroup.mode = CgroupMode::per_run;
         else if (s == "enclosing") cfg.cgroup.mode = CgroupMode::enclosing;
         else r.fail(m, "cgroup.mode", "per_run (a cgroup per run) or enclosing (one run per container)");
       }
       if (const auto p = v["parent"]) cfg.cgroup.parent = r.scalar(p, "cgroup.parent", "a cgroup path");
       if (const auto d = v["allow_degraded"]) cfg.cgroup.allow_degraded = r.boolean(d, "cgroup.allow_degraded");
     }},
    {"landlock",
     [](R r, P key, V v, C cfg) {
       const std::string m = r.scalar(v, key, "required, best_effort or off");
       if (m == "required") cfg.landlock = LandlockMode::required;
       else if (m == "best_effort") cfg.landlock = LandlockMode::best_effort;
       else if (m == "off") cfg.landlock = LandlockMode::off;
       else r.fail(v, key, "required, best_effort or off");
     }},
    {"id_ranges", read_id_ranges},
    {"monitoring",
     [](R r, P key, V v, C cfg) {
       r.check_keys(v, key, {"enabled", "interval"});
       if (const auto e = v["enabled"]) cfg.monitoring = r.boolean(e, "monitoring.enabled");
       if (const auto i = v["interval"])
         cfg.monitor_interval_ms = static_cast<uint32_t>(r.integer(i, "monitoring.interval", 10, 60000));
     }},
    {"package_index", read_package_index},
    {"cache_dir",
     [](R r, P key, V v, C cfg) {
       const std::string s = r.scalar(v, key, "a directory for the dependency cache");
       if (s.empty()) r.fail(v, key, "a directory for the dependency cache");
       cfg.cache_dir = r.resolve(s);
     }},
    {"cache_max_size", [](R r, P key, V v, C cfg) { cfg.cache_max_size = r.size(v, key, 16ull << 20); }},
    {"sessions",
     [](R r, P key, V v, C cfg) {
       r.check_keys(v, key, {"max", "max_per_caller", "idle_timeout", "lifetime"});
       SessionSettings& s = cfg.sessions;
       if (const auto m = v["max"]) s.max = static_cast<uint32_t>(r.integer(m, "sessions.max", 1, 4096));
       if (const auto m = v["max_per_caller"])
         s.max_per_caller = static_cast<uint32_t>(r.integer(m, "sessions.max_per_caller", 1, 4096));
       if (const auto t = v["idle_timeout"]) s.idle_timeout_s = r.number(t, "sessions.idle_timeout", 1, 86400 * 7);
       if (const auto t = v["lifetime"]) s.lifetime_s = r.number(t, "sessions.lifetime", 1, 86400 * 30);
     }},
    {"trust_levels", read_trust_levels},
};

// Every key sandbox.yaml knows: the level keys first (all a trust level may set), then the rest.
constexpr auto kKnownKeys = [] {
  std::array<std::string_view, std::size(kLevelKeys) + std::size(kTopKeys)> all{};
  size_t n = 0;
  for (const LevelKey& k : kLevelKeys) all[n++] = k.name;
  for (const TopKey& k : kTopKeys) all[n++] = k.name;
  return all;
}();

void read_trust_levels(R r, P key, V v, C cfg) {
  if (!v.IsMap()) r.fail(v, key, "a mapping of untrusted/unknown/trusted to settings");
  for (const auto& lv : v) {
    std::string name = r.scalar(lv.first, key, "a trust level");
    auto t = parse_trust(name);
    if (!t) r.fail(lv.first, key + "." + name, "untrusted, unknown or trusted", "an unknown trust level");
    if (lv.second.IsNull()) continue;
    if (!lv.second.IsMap()) r.fail(lv.second, key + "." + name, "a mapping of settings");
    LevelSettings& ls = cfg.levels[*t];
    for (const auto& s : lv.second) {
      std::string sk = r.scalar(s.first, key + "." + name, "a key");
      std::string path = key + "." + name + "." + sk;
      if (!read_level_key(r, sk, path, s.second, ls))
        r.unknown_key(s.first, path, std::span(kKnownKeys).first(std::size(kLevelKeys)));
    }
  }
}

}  // namespace

SandboxConfig parse_sandbox_config(const std::string& yaml_text, const std::filesystem::path& file) {
  const StrictYaml r(file);
  const YAML::Node root = r.parse(yaml_text);
  if (!root.IsMap()) r.fail(root, "(top level)", "a mapping of settings");

  SandboxConfig cfg;
  cfg.file = file;
  cfg.dir = file.parent_path();
  cfg.digest = sha256_hex(yaml_text);
  cfg.image = "default";

  for (const auto& kv : root) {
    const std::string key = r.scalar(kv.first, "(top level)", "a key");
    if (read_level_key(r, key, key, kv.second, cfg.base)) continue;
    const auto top = std::find_if(std::begin(kTopKeys), std::end(kTopKeys), [&](const TopKey& k) { return k.name == key; });
    if (top == std::end(kTopKeys)) r.unknown_key(kv.first, key, kKnownKeys);
    top->read(r, key, kv.second, cfg);
  }
  return cfg;
}

LevelSettings overlay(const LevelSettings& base, const LevelSettings& level) {
  LevelSettings out = base;
  std::apply([&](const auto&... f) { ((level.*(f.member) ? void(out.*(f.member) = level.*(f.member)) : void()), ...); },
             LevelSettings::fields);
  return out;
}

std::string url_host(const std::string& url) {
  std::string rest;
  if (url.rfind("https://", 0) == 0) rest = url.substr(8);
  else if (url.rfind("http://", 0) == 0) rest = url.substr(7);
  else return {};
  std::string authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string::npos) return {};
  std::string host = authority.substr(0, authority.rfind(':') == std::string::npos || authority.back() == ']'
                                             ? std::string::npos : authority.rfind(':'));
  if (host.empty() || host.find_first_of(" \t") != std::string::npos) return {};
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return host;
}

SandboxConfig load_sandbox_config(const std::filesystem::path& file) {
  std::string text;
  try {
    text = read_file(file.string());
  } catch (const Error& e) {
    throw Error(e.what(), "pass --config PATH or set SANDBOXRUN_CONFIG", e.sys_errno()).as(ErrorKind::config);
  }
  const std::filesystem::path absolute = std::filesystem::absolute(file);
  const std::optional<std::filesystem::path> cache_dir = parsed_cache_dir();
  if (!cache_dir) return parse_sandbox_config(text, absolute);
  if (std::optional<SandboxConfig> cached = config_cache::load(absolute, text, *cache_dir)) return std::move(*cached);
  SandboxConfig cfg = parse_sandbox_config(text, absolute);
  config_cache::store(absolute, text, *cache_dir, cfg);
  return cfg;
}

std::filesystem::path find_config(const std::optional<std::string>& cli_path) {
  // A path given by the caller must hold a sandbox.yaml: anything else would only fail later,
  // on the first file looked for beside it (security.yaml), which misleads.
  auto pick = [](std::filesystem::path p, const char* from) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) p /= "sandbox.yaml";
    if (!std::filesystem::is_regular_file(p, ec))
      throw Error(std::string("no sandbox.yaml at ") + p.string() + " (" + from + ")",
                  "give the path of a sandbox.yaml or of the directory that holds it, such as the project's config/",
                  ENOENT);
    return p;
  };
  if (cli_path) return pick(*cli_path, "--config");
  if (const char* env = std::getenv("SANDBOXRUN_CONFIG"); env && *env) return pick(env, "$SANDBOXRUN_CONFIG");
  std::string tried;
  for (const auto& dir : install_paths().config_dirs) {
    std::error_code ec;
    if (std::filesystem::exists(dir / "sandbox.yaml", ec)) return dir / "sandbox.yaml";
    tried += (tried.empty() ? "" : ", ") + (dir / "sandbox.yaml").string();
  }
  throw Error("no sandbox.yaml found (looked at " + tried + ")",
              "pass --config PATH, set SANDBOXRUN_CONFIG, or install the configuration (cmake --install)")
      .as(ErrorKind::config);
}

}  // namespace sandboxrun
