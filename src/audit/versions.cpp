// Code versions: the index of each caller's latest stored script versions (for run_start's
// diff_from, without scanning the log), and the diff `sandboxrun audit show --diff RUN_ID` prints.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>

#include "audit/diff.hpp"
#include "audit/objects.hpp"
#include "common/safe_open.hpp"
#include "common/sha256.hpp"
#include "internal.hpp"
#include "sandboxrun/audit_read.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

namespace audit {

namespace {

constexpr size_t kMaxRunId = 64;

std::string entry_name(const std::string& key, const std::string& name) {
  std::string k = key;
  k += '\0';
  k += name;
  return sha256_hex(k);
}

bool run_id_chars(std::string_view id) {
  if (id.empty() || id.size() > kMaxRunId) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

// An fd of `dir`, or none when it does not exist.
UniqueFd open_if_there(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) return UniqueFd();
  return open_trusted_dir(dir);
}

}  // namespace

std::optional<VersionEntry> read_version(const std::filesystem::path& objects, const std::string& key,
                                         const std::string& name) {
  const UniqueFd dir = open_if_there(objects / "latest");
  if (!dir) return std::nullopt;
  const std::string file = entry_name(key, name);
  UniqueFd fd(::openat(dir.get(), file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw_errno("cannot open " + (objects / "latest" / file).string());
  }
  // "<sha256> <run id>\n"; anything else is no entry (the next run writes a good one).
  char buf[kHashHex + kMaxRunId + 3];
  ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n < static_cast<ssize_t>(kHashHex + 3) || buf[n - 1] != '\n' || buf[kHashHex] != ' ') return std::nullopt;
  VersionEntry e{std::string(buf, kHashHex), std::string(buf + kHashHex + 1, static_cast<size_t>(n) - kHashHex - 2)};
  if (!is_object_name(e.sha256) || !run_id_chars(e.run_id)) return std::nullopt;
  return e;
}

void write_version(const std::filesystem::path& objects, const std::string& key, const std::string& name,
                   const VersionEntry& entry) {
  const std::filesystem::path dir = objects / "latest";
  const UniqueFd dir_fd = ensure_private_dir(dir);
  const std::string file = entry_name(key, name);
  const std::string text = entry.sha256 + " " + entry.run_id + "\n";
  // Written like an object: a fresh temporary name, then renamed over the entry.
  const std::string tmp = ".tmp-" + file + "-" + random_name_suffix();
  {
    UniqueFd fd = open_trusted_at(dir_fd.get(), tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, dir / tmp);
    if (!write_all(fd.get(), text.data(), text.size())) {
      int err = errno;
      ::unlinkat(dir_fd.get(), tmp.c_str(), 0);
      throw_errno(err, "cannot write " + (dir / tmp).string());
    }
  }
  if (::renameat(dir_fd.get(), tmp.c_str(), dir_fd.get(), file.c_str()) != 0) {
    int err = errno;
    ::unlinkat(dir_fd.get(), tmp.c_str(), 0);
    throw_errno(err, "cannot write " + (dir / file).string());
  }
}

std::string read_object(const std::filesystem::path& objects, const std::string& sha256) {
  const std::filesystem::path path = objects / sha256;
  const std::string hint = "run `sandboxrun audit verify`";
  const UniqueFd dir = open_if_there(objects);
  UniqueFd fd(dir ? ::openat(dir.get(), sha256.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1);
  if (!fd) {
    if (!dir || errno == ENOENT)
      throw Error("object " + path.string() + " does not exist", "it was not stored (store_code off) or was pruned");
    throw_errno("cannot open object " + path.string(), hint);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error("object " + path.string() + " is not a regular file", hint);
  std::string data = read_fd(fd.get(), static_cast<size_t>(st.st_size), "object " + path.string());
  if (sha256_hex(data) != sha256)
    throw Error("object " + path.string() + " was altered: its content hashes to " + sha256_hex(data), hint);
  return data;
}

std::optional<CodeDiff> diff_from_latest(const std::filesystem::path& objects, const std::string& key,
                                         const std::string& name, std::string_view code) {
  std::optional<CodeDiff> diff;
  if (auto prev = read_version(objects, key, name)) {
    const UniqueFd dir = open_if_there(objects);
    // Refreshed by name first: if a prune renamed it aside already, this fails and there is no
    // diff; if not, the prune sees the new mtime and puts it back.
    if (dir && ::utimensat(dir.get(), prev->sha256.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0) {
      try {
        const std::string old = read_object(objects, prev->sha256);
        LineDiffCounts c = count_line_changes(old, code);
        diff = CodeDiff{prev->run_id, prev->sha256, c.added, c.removed, c.approximate};
      } catch (const Error&) {
        // Gone or altered since: no diff_from (verify reports an altered object).
      }
    }
  }
  return diff;
}

std::optional<CodeDiff> track_version(const std::filesystem::path& objects, const std::string& key,
                                      const std::string& name, std::string_view code, const std::string& run_id) {
  std::optional<CodeDiff> diff = diff_from_latest(objects, key, name, code);
  write_version(objects, key, name, {sha256_hex(code), run_id});
  return diff;
}

}  // namespace audit

AuditCodeDiff audit_code_diff(const std::filesystem::path& log, const std::string& run_id) {
  // Records of other runs are passed over by a byte search; run ids need no JSON escaping.
  const std::string needle = "\"run_id\":\"" + run_id + "\"";
  nlohmann::json start;
  for (const auto& f : audit_log_files(log)) {
    std::ifstream in(f);
    if (!in && f == log) throw_errno("cannot open " + f.string(), "check --log or the path in audit.yaml");
    for (std::string line; std::getline(in, line);) {
      if (line.find(needle) == std::string::npos || line.find("\"event\":\"run_start\"") == std::string::npos) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("run_id", "") == run_id && j.value("event", "") == "run_start") start = std::move(j);
    }
  }
  if (start.is_null())
    throw Error("no run_start record for run " + run_id + " in " + log.string(),
                "list the runs with `sandboxrun audit show`");
  const nlohmann::json code = start.value("code", nlohmann::json::object());
  AuditCodeDiff d;
  d.name = code.value("name", "");
  d.sha256 = code.value("sha256", "");
  if (!audit::is_object_name(d.sha256)) throw Error("the run_start record of run " + run_id + " names no code");
  const nlohmann::json from = start.value("diff_from", nlohmann::json());
  if (!from.is_object() || !audit::is_object_name(from.value("sha256", "")))
    throw Error("run " + run_id + " has no diff_from: it ran the first stored version of " + d.name +
                    " for its caller (or the code store was off)");
  d.from_sha256 = from.value("sha256", "");
  d.from_run = from.value("run_id", "");
  d.approximate = from.value("approximate", false);
  const std::filesystem::path objects = audit::objects_dir(log);
  const std::string old_text = audit::read_object(objects, d.from_sha256);
  const std::string new_text = audit::read_object(objects, d.sha256);
  d.unified = audit::unified_diff(old_text, new_text, d.name + "\trun " + d.from_run + " sha256:" + d.from_sha256,
                                  d.name + "\trun " + run_id + " sha256:" + d.sha256);
  return d;
}

AuditCodeDiff audit_cell_diff(const std::filesystem::path& log, const std::string& session_id, uint64_t from,
                              uint64_t to) {
  const std::string needle = "\"run_id\":\"" + session_id + "\"";
  std::map<uint64_t, std::string> cells;  // cell -> its code object
  for (const auto& f : audit_log_files(log)) {
    std::ifstream in(f);
    if (!in && f == log) throw_errno("cannot open " + f.string(), "check --log or the path in audit.yaml");
    for (std::string line; std::getline(in, line);) {
      if (line.find(needle) == std::string::npos || line.find("\"event\":\"cell\"") == std::string::npos) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || j.value("run_id", "") != session_id || j.value("event", "") != "cell") continue;
      const auto n = j.find("cell");
      const nlohmann::json code = j.value("code", nlohmann::json::object());
      if (n != j.end() && n->is_number_unsigned() && code.is_object()) cells[n->get<uint64_t>()] = code.value("sha256", "");
    }
  }
  if (cells.empty())
    throw Error("no cell records for session " + session_id + " in " + log.string(),
                "list the runs with `sandboxrun audit show`; a session's id is its run id");
  AuditCodeDiff d;
  for (const uint64_t c : {from, to})
    if (!cells.count(c) || !audit::is_object_name(cells[c]))
      throw Error("session " + session_id + " has no stored cell " + std::to_string(c),
                  "`sandboxrun audit show --session " + session_id + "` lists its cells");
  d.name = "<cell " + std::to_string(from) + ">..<cell " + std::to_string(to) + ">";
  d.from_run = session_id;
  d.from_sha256 = cells[from];
  d.sha256 = cells[to];
  const std::filesystem::path objects = audit::objects_dir(log);
  d.unified = audit::unified_diff(audit::read_object(objects, d.from_sha256), audit::read_object(objects, d.sha256),
                                  "<cell " + std::to_string(from) + ">\tsha256:" + d.from_sha256,
                                  "<cell " + std::to_string(to) + ">\tsha256:" + d.sha256);
  return d;
}

}  // namespace sandboxrun
