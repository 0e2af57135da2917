// audit.yaml: strict parsing into AuditConfig, default locations, key file loading.
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "sandboxrun/audit.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "common/yaml_strict.hpp"
#include "common/safe_open.hpp"
#include "common/install_paths.hpp"
#include "audit/config_cache.hpp"
#include "internal.hpp"

namespace sandboxrun {

const char* to_string(AuditSync s) {
  switch (s) {
    case AuditSync::each: return "each";
    case AuditSync::batch: return "batch";
    case AuditSync::none: return "none";
  }
  return "?";
}

namespace {

// "0", "90s", "30m", "12h", "7d", "2w" (a bare number is seconds).
std::chrono::seconds duration(const StrictYaml& r, const YAML::Node& n, const std::string& key) {
  const std::string expected = "a duration like 3600, 90s, 30m, 12h, 7d or 2w (0 disables)";
  auto d = audit::parse_duration(r.scalar(n, key, expected));
  if (!d) r.fail(n, key, expected);
  return *d;
}

// A path relative to the file; "" keeps the default (an empty path).
std::filesystem::path config_path(const StrictYaml& r, const YAML::Node& n, const std::string& key) {
  const std::string s = r.scalar(n, key, "a path (or \"\" for the default)");
  return s.empty() ? std::filesystem::path() : r.resolve(s);
}

}  // namespace

namespace {

AuditConfig parse_audit_config(const std::filesystem::path& file, const std::string& text) {
  AuditConfig cfg;
  const StrictYaml r(file);
  const YAML::Node root = r.parse(text);
  if (root.IsNull()) return cfg;
  r.check_keys(root, "", {"path", "sync", "sync_batch", "key_file", "store_code", "store_files", "checkpoint", "rotation"});
  if (auto n = root["path"]) cfg.path = config_path(r, n, "path");
  if (auto n = root["sync"]) {
    std::string s = r.scalar(n, "sync", "each, batch or none");
    if (s == "each") cfg.sync = AuditSync::each;
    else if (s == "batch") cfg.sync = AuditSync::batch;
    else if (s == "none") cfg.sync = AuditSync::none;
    else r.fail(n, "sync", "each, batch or none");
  }
  if (auto n = root["sync_batch"]) cfg.sync_batch = r.integer(n, "sync_batch", 1, 1000000);
  if (auto n = root["key_file"]) cfg.key_file = config_path(r, n, "key_file");
  if (auto n = root["store_code"]) cfg.store_code = r.boolean(n, "store_code");
  if (auto n = root["store_files"]) cfg.store_files = r.boolean(n, "store_files");
  if (auto cp = root["checkpoint"]) {
    r.check_keys(cp, "checkpoint", {"every", "anchor", "syslog", "stream"});
    if (auto n = cp["every"]) cfg.checkpoint_every = r.integer(n, "checkpoint.every", 0, 1000000000);
    if (auto n = cp["anchor"]) cfg.anchor = config_path(r, n, "checkpoint.anchor");
    if (auto n = cp["syslog"]) cfg.syslog = r.boolean(n, "checkpoint.syslog");
    if (auto n = cp["stream"]) {
      const std::string s = r.scalar(n, "checkpoint.stream", "none, stdout or stderr");
      if (s == "none") cfg.stream = CheckpointStream::none;
      else if (s == "stdout") cfg.stream = CheckpointStream::out;
      else if (s == "stderr") cfg.stream = CheckpointStream::err;
      else r.fail(n, "checkpoint.stream", "none, stdout or stderr");
    }
  }
  if (auto rot = root["rotation"]) {
    r.check_keys(rot, "rotation", {"max_size", "max_age", "keep_files", "keep_age"});
    if (auto n = rot["max_size"]) {
      cfg.rotate_max_bytes = r.size(n, "rotation.max_size");
      if (cfg.rotate_max_bytes != 0 && cfg.rotate_max_bytes < 4096)
        r.fail(n, "rotation.max_size", "0 or at least 4k");
    }
    if (auto n = rot["max_age"]) cfg.rotate_max_age = duration(r, n, "rotation.max_age");
    if (auto n = rot["keep_files"]) cfg.keep_files = r.integer(n, "rotation.keep_files", 0, 1000000);
    if (auto n = rot["keep_age"]) cfg.keep_age = duration(r, n, "rotation.keep_age");
  }
  return cfg;
}

}  // namespace

AuditConfig load_audit_config(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return AuditConfig{};
  const std::string text = read_file(file.string());
  const std::optional<std::filesystem::path> cache_dir = parsed_cache_dir();
  if (!cache_dir) return parse_audit_config(file, text);
  const std::filesystem::path absolute = std::filesystem::absolute(file, ec);
  if (auto cached = audit::load_cached_config(absolute, text, *cache_dir)) return *cached;
  AuditConfig cfg = parse_audit_config(file, text);
  audit::store_cached_config(absolute, text, *cache_dir, cfg);
  return cfg;
}

std::filesystem::path default_audit_log_path() {
  if (::geteuid() == 0) return "/var/log/sandboxrun/audit.log";
  const char* xdg = std::getenv("XDG_STATE_HOME");
  if (xdg && xdg[0] == '/') return std::filesystem::path(xdg) / "sandboxrun" / "audit.log";
  const char* home = std::getenv("HOME");
  std::string h = home && home[0] == '/' ? home : "";
  if (h.empty()) {
    if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir) h = pw->pw_dir;
  }
  if (h.empty())
    throw Error("cannot find a home directory for the audit log", "set HOME or --audit-log PATH");
  return std::filesystem::path(h) / ".local" / "state" / "sandboxrun" / "audit.log";
}

std::string load_audit_key(const std::filesystem::path& key_file) {
  const std::string p = key_file.string();
  // A symlinked directory could swap in a key the attacker knows, and forge the HMAC chain.
  UniqueFd fd = open_trusted_file(key_file, O_RDONLY);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat audit key file " + p);
  if (!S_ISREG(st.st_mode))
    throw Error("audit key file " + p + " is not a regular file", "point key_file at a regular file");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    throw Error("audit key file " + p + " is owned by uid " + std::to_string(st.st_uid) +
                    ", not by you or root",
                "chown it to the user that writes the audit log");
  if ((st.st_mode & 077) != 0)
    throw Error("audit key file " + p + " is accessible by group or others (mode " +
                    [&] { char b[8]; std::snprintf(b, sizeof b, "%04o", st.st_mode & 07777); return std::string(b); }() + ")",
                "chmod 600 " + p);
  std::string key = read_fd(fd.get(), 4096, "audit key file " + p,
                            "use 32 random bytes: head -c 32 /dev/urandom > " + p);
  if (key.size() < 16)
    throw Error("audit key file " + p + " holds fewer than 16 bytes",
                "use 32 random bytes: head -c 32 /dev/urandom > " + p);
  return key;
}

}  // namespace sandboxrun
