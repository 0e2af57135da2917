// Parsing and validation of sandbox.yaml. Every unknown key or bad value is an error that names
// the file, the key, the line and what was expected.
#include <arpa/inet.h>
#include <sys/capability.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

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

// The keys read_level_key knows, and the rest of the top level's (for the known-keys message
// and "did you mean").
constexpr std::string_view kKnownKeys[] = {
    "cpu_count", "mem_limit", "pids_limit", "timeout", "tmp_size", "output_limit", "work_size",
    "output_files_limit", "output_bytes_limit", "security_opt", "cap_drop", "read_only", "user",
    "network_mode", "network_allowlist", "extra_hosts", "allow_networks", "environment", "requirements",
    // not per level:
    "default_trust", "image", "input_limit", "input_files_limit", "host_memory_share", "cgroup", "landlock",
    "id_ranges", "monitoring", "package_index", "cache_dir", "cache_max_size", "trust_levels"};
constexpr size_t kLevelKeyCount = 19;

// Reads one key of a level (or of the base); returns false if the key is not a level key.
bool read_level_key(const StrictYaml& r, const std::string& key, const std::string& path, const YAML::Node& v,
                    LevelSettings& out) {
  if (key == "cpu_count") out.cpu_count = r.number(v, path, 0.01, 1024);
  else if (key == "mem_limit") out.mem_limit = r.size(v, path, 16ull << 20);
  else if (key == "pids_limit") out.pids_limit = r.integer(v, path, 8, 1u << 22);
  else if (key == "timeout") out.timeout = r.number(v, path, 0.1, 86400 * 7);
  else if (key == "tmp_size") out.tmp_size = r.size(v, path, 1ull << 20);
  else if (key == "output_limit") out.output_limit = r.size(v, path, 1024);
  else if (key == "work_size") out.work_size = r.size(v, path, 1ull << 20);
  else if (key == "output_files_limit") out.output_files_limit = r.integer(v, path, 1, 1u << 20);
  else if (key == "output_bytes_limit") out.output_bytes_limit = r.size(v, path, 0);
  else if (key == "security_opt") {
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
  } else if (key == "cap_drop") {
    // Checked, then nothing more to do: the sandbox drops every capability whatever the list.
    for (const auto& c : r.strings(v, path))
      if (!known_capability(c)) r.fail(v, path, "capability names such as ALL or NET_RAW ('" + c + "' is unknown)");
  } else if (key == "read_only") {
    if (!r.boolean(v, path))
      r.fail(v, path, "true: the image is shared between runs and always mounted read-only; write to /tmp");
  } else if (key == "user") {
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
  } else if (key == "network_mode") {
    std::string s = r.scalar(v, path, "none or allowlist");
    if (s == "none") out.network_mode = NetworkMode::none;
    else if (s == "allowlist") out.network_mode = NetworkMode::allowlist;
    else r.fail(v, path, "none or allowlist (host and bridge networking are not offered)");
  } else if (key == "network_allowlist") out.network_allowlist = r.strings(v, path);
  else if (key == "extra_hosts") out.extra_hosts = read_extra_hosts(r, v, path);
  else if (key == "allow_networks") out.allow_networks = r.strings(v, path);
  else if (key == "environment") out.environment = r.string_map(v, path);
  else if (key == "requirements") {
    auto reqs = r.strings(v, path);
    for (size_t i = 0; i < reqs.size(); ++i)
      if (auto why = deps::check_requirement(reqs[i]))
        r.fail(v[i], path + "[" + std::to_string(i) + "]", "a pip requirement such as 'requests==2.31.0'", *why);
    out.requirements = std::move(reqs);
  } else return false;
  return true;
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
    std::string key = r.scalar(kv.first, "(top level)", "a key");
    const YAML::Node& v = kv.second;
    if (read_level_key(r, key, key, v, cfg.base)) continue;
    if (key == "default_trust") {
      auto t = parse_trust(r.scalar(v, key, "untrusted, unknown or trusted"));
      if (!t) r.fail(v, key, "untrusted, unknown or trusted");
      cfg.default_trust = *t;
    } else if (key == "image") {
      std::string s = r.scalar(v, key, "an image name, a rootfs directory or an OCI layout path[:tag]");
      if (s.empty()) r.fail(v, key, "an image name (default), a rootfs directory or an OCI layout path[:tag]");
      // A bare name is looked up in the image store at run time; a path is relative to this file.
      cfg.image = s.find('/') == std::string::npos ? s : r.resolve(s).string();
    } else if (key == "input_limit") {
      cfg.input_limit = r.size(v, key, 0);
    } else if (key == "input_files_limit") {
      cfg.input_files_limit = r.integer(v, key, 1, 1u << 20);
    } else if (key == "host_memory_share") {
      cfg.host_memory_share = r.number(v, key, 0.01, 1.0);
    } else if (key == "cgroup") {
      r.check_keys(v, key, {"parent", "allow_degraded"});
      if (const auto p = v["parent"]) cfg.cgroup.parent = r.scalar(p, "cgroup.parent", "a cgroup path");
      if (const auto d = v["allow_degraded"]) cfg.cgroup.allow_degraded = r.boolean(d, "cgroup.allow_degraded");
    } else if (key == "landlock") {
      const std::string m = r.scalar(v, key, "required, best_effort or off");
      if (m == "required") cfg.landlock = LandlockMode::required;
      else if (m == "best_effort") cfg.landlock = LandlockMode::best_effort;
      else if (m == "off") cfg.landlock = LandlockMode::off;
      else r.fail(v, key, "required, best_effort or off");
    } else if (key == "id_ranges") {
      r.check_keys(v, key, {"base", "size", "slot_size"});
      // Host ids below 65536 belong to accounts and system services; the top of the range is
      // reserved ((uid_t)-1 and the overflow ids).
      if (const auto b = v["base"]) cfg.id_ranges.base = static_cast<uint32_t>(r.integer(b, "id_ranges.base", 65536, 4000000000u));
      if (const auto z = v["size"]) cfg.id_ranges.size = static_cast<uint32_t>(r.integer(z, "id_ranges.size", 2, 1u << 24));
      if (const auto z = v["slot_size"])
        cfg.id_ranges.slot_size = static_cast<uint32_t>(r.integer(z, "id_ranges.slot_size", 2, 65536));
      if (cfg.id_ranges.size < cfg.id_ranges.slot_size)
        r.fail(v, key, "a size of at least one slot (size >= slot_size)");
    } else if (key == "monitoring") {
      r.check_keys(v, key, {"enabled", "interval"});
      if (const auto e = v["enabled"]) cfg.monitoring = r.boolean(e, "monitoring.enabled");
      if (const auto i = v["interval"])
        cfg.monitor_interval_ms = static_cast<uint32_t>(r.integer(i, "monitoring.interval", 10, 60000));
    } else if (key == "package_index") {
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
    } else if (key == "cache_dir") {
      const std::string s = r.scalar(v, key, "a directory for the dependency cache");
      if (s.empty()) r.fail(v, key, "a directory for the dependency cache");
      cfg.cache_dir = r.resolve(s);
    } else if (key == "cache_max_size") {
      cfg.cache_max_size = r.size(v, key, 16ull << 20);
    } else if (key == "trust_levels") {
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
            r.unknown_key(s.first, path, std::span(kKnownKeys).first(kLevelKeyCount));
        }
      }
    } else {
      r.unknown_key(kv.first, key, kKnownKeys);
    }
  }
  return cfg;
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
