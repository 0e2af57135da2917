// The object store under <log dir>/objects: writing objects, checking the ones records name,
// and pruning the ones no retained record names.
#include "audit/objects.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/safe_open.hpp"
#include "common/sha256.hpp"
#include "internal.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::audit {

namespace {

using nlohmann::json;
using SysClock = std::chrono::system_clock;

SysClock::time_point mtime(const struct stat& st) {
  return SysClock::time_point(std::chrono::duration_cast<SysClock::duration>(
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

// The names of a directory's entries (a directory fd from open_trusted_dir).
std::vector<std::string> list(int dir_fd, const std::filesystem::path& shown) {
  std::vector<std::string> names;
  UniqueFd dup(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* d = dup ? ::fdopendir(dup.get()) : nullptr;
  if (!d) throw_errno("cannot list " + shown.string());
  dup.release();  // owned by d
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

// The store directory, or an invalid fd when there is none yet.
UniqueFd open_store(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) return UniqueFd();
  return open_trusted_dir(dir);
}

// Every object name that follows a "sha256" key in the file: code refs, manifests, diff_from and
// repair tails all name their object so. A byte search, not a parse: a damaged record still
// keeps what it names, and a false match only keeps an object longer.
void scan_references(int fd, const std::filesystem::path& shown, std::unordered_set<std::string>& out) {
  static constexpr std::string_view kKey = "\"sha256\":\"";
  constexpr size_t kMatch = kKey.size() + kHashHex;
  std::string buf;
  std::vector<char> chunk(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read " + shown.string());
    }
    if (n == 0) break;
    buf.append(chunk.data(), static_cast<size_t>(n));
    size_t pos = 0;
    while ((pos = buf.find(kKey, pos)) != std::string::npos && pos + kMatch <= buf.size()) {
      std::string_view name(buf.data() + pos + kKey.size(), kHashHex);
      if (is_object_name(name)) out.emplace(name);
      pos += kKey.size();
    }
    // Keep what could be the start of a match cut by the chunk's end.
    if (buf.size() > kMatch) buf.erase(0, buf.size() - kMatch);
  }
}

}  // namespace

bool is_object_name(std::string_view name) noexcept {
  return name.size() == kHashHex &&
         std::all_of(name.begin(), name.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool put_object(int dir_fd, const std::filesystem::path& dir, std::string_view data, const std::string& sha256,
                bool sync) {
  if (!is_object_name(sha256)) throw Error("'" + sha256 + "' is not an object name (SHA-256 hex)");
  // Already there: refreshed, never followed (a symlink's own time changes) nor rewritten.
  if (::utimensat(dir_fd, sha256.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0) return false;
  if (errno == EACCES || errno == EPERM || errno == EROFS) return false;  // there, but not ours to touch
  if (errno != ENOENT) throw_errno("cannot refresh object " + (dir / sha256).string());
  // A fresh name per call: two writers (or threads) storing the same bytes never share one.
  const std::string tmp = ".tmp-" + sha256 + "-" + random_name_suffix();
  {
    UniqueFd fd = open_trusted_at(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, dir / tmp);
    bool ok = write_all(fd.get(), data.data(), data.size()) && (!sync || ::fsync(fd.get()) == 0);
    if (!ok) {
      int err = errno;
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      throw_errno(err, "cannot write " + (dir / tmp).string());
    }
  }
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, sha256.c_str()) != 0) {
    int err = errno;
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    throw_errno(err, "cannot store object " + (dir / sha256).string());
  }
  return true;
}

void ObjectRefs::note(std::string sha256, uint64_t seq, std::string_view run_id, std::string path, bool required) {
  if (!is_object_name(sha256)) return;
  auto [it, fresh] = refs_.try_emplace(std::move(sha256));
  // The first record that names it, or the first that says it must be there.
  if (fresh || (required && !it->second.required))
    it->second = Ref{seq, std::string(run_id), std::move(path), required};
}

void ObjectRefs::add(uint64_t seq, std::string_view run_id, const LineScanner& record) {
  auto str = [](const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  // Records written before objects were marked carry no "stored": such an object is checked
  // when it is there, and not missed when it is not.
  auto stored = [](const json& j) {
    auto it = j.find("stored");
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  auto refs = [&](const json& list, const char* role, const char* name_key) {
    if (!list.is_array()) return;
    for (const auto& e : list)
      if (e.is_object()) note(str(e, "sha256"), seq, run_id, std::string(role) + " " + str(e, name_key), stored(e));
  };
  for (const Member& m : record.members()) {
    const bool code = m.key == "code", tail = m.key == "tail";
    if (!code && !tail && m.key != "input_code" && m.key != "inputs" && m.key != "outputs" && m.key != "diff_from")
      continue;
    if (code) {
      if (m.value == last_code_) continue;  // every record of a run names its code
      last_code_ = std::string(m.value);
    }
    const json v = json::parse(m.value, nullptr, false);
    if (code || tail) {
      if (v.is_object()) note(str(v, "sha256"), seq, run_id, (code ? "code " : "repair tail ") + str(v, "name"), stored(v));
    } else if (m.key == "input_code") {
      refs(v, "code", "name");
    } else if (m.key == "diff_from") {
      // Only written after the previous version was read from the store.
      if (v.is_object()) note(str(v, "sha256"), seq, run_id, "diff_from of run " + str(v, "run_id"), true);
    } else {
      refs(v, m.key == "inputs" ? "input" : "output", "path");
    }
  }
}

AuditObjectsResult ObjectRefs::check(const std::filesystem::path& dir) const {
  AuditObjectsResult res;
  res.referenced = refs_.size();
  std::vector<std::pair<const std::string*, const Ref*>> order;
  for (const auto& [sha, ref] : refs_) order.emplace_back(&sha, &ref);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->seq != b.second->seq ? a.second->seq < b.second->seq : *a.first < *b.first;
  });
  const UniqueFd dir_fd = open_store(dir);
  for (const auto& [sha, ref] : order) {
    auto problem = [&, sha = sha, ref = ref](const char* kind, std::string detail) {
      res.problems.push_back({kind, ref->seq, ref->run_id, ref->path, *sha, std::move(detail)});
    };
    const std::string shown = (dir / *sha).string();
    UniqueFd fd(dir_fd ? ::openat(dir_fd.get(), sha->c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1);
    if (!fd) {
      int err = dir_fd ? errno : ENOENT;
      if (err == ENOENT) {
        if (ref->required) problem("missing", "the record says it was stored, but " + shown + " does not exist");
        continue;
      }
      if (err == ELOOP) problem("altered", shown + " is a symbolic link");
      else problem("altered", "cannot open " + shown + ": " + std::strerror(err));
      continue;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + shown);
    if (!S_ISREG(st.st_mode)) {
      problem("altered", shown + " is not a regular file");
      continue;
    }
    ++res.checked;
    std::string actual = sha256_fd_hex(fd.get(), shown, &res.bytes);
    if (actual != *sha) problem("altered", "its content hashes to " + actual);
  }
  return res;
}

ObjectPruneResult prune_objects(const std::filesystem::path& log, int lock_fd, const std::filesystem::path& lock_file,
                                std::chrono::seconds grace) {
  ObjectPruneResult res;
  // Under the lock no rotation is half done: every record is in one of these files. Read after
  // the lock is released (appends go on meanwhile; what they name is younger than the grace).
  std::vector<std::pair<std::filesystem::path, UniqueFd>> files;
  SysClock::time_point snapshot;
  {
    FileLock lock(lock_fd, lock_file);
    snapshot = SysClock::now();
    for (const auto& f : audit_log_files(log)) {
      try {
        files.emplace_back(f, open_trusted_file(f, O_RDONLY));
      } catch (const Error& e) {
        if (e.sys_errno() != ENOENT) throw;  // the current file before its first record
      }
    }
  }
  std::unordered_set<std::string> referenced;
  for (const auto& [path, fd] : files) scan_references(fd.get(), path, referenced);

  const std::filesystem::path dir = objects_dir(log);
  const UniqueFd dir_fd = open_store(dir);
  if (!dir_fd) return res;
  const auto cutoff = snapshot - grace;
  auto old = [&](const std::string& name, struct stat& st) {
    return ::fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           mtime(st) < cutoff;
  };
  bool changed = false;
  for (const std::string& name : list(dir_fd.get(), dir)) {
    struct stat st {};
    if (!is_object_name(name)) {
      // Left by a writer or a prune that died half way.
      if ((name.rfind(".tmp-", 0) == 0 || name.rfind(".prune-", 0) == 0) && old(name, st) &&
          ::unlinkat(dir_fd.get(), name.c_str(), 0) == 0)
        changed = true;
      continue;
    }
    if (referenced.count(name)) {
      ++res.referenced;
      continue;
    }
    if (!old(name, st)) {
      ++res.kept_recent;
      continue;
    }
    // Aside first, then its mtime again: a writer that refreshed it before the rename (it is
    // about to name it in a record) is seen now, and one after the rename finds it gone and
    // writes it anew.
    const std::string aside = ".prune-" + name + "-" + random_name_suffix();
    if (::renameat(dir_fd.get(), name.c_str(), dir_fd.get(), aside.c_str()) != 0) {
      if (errno == ENOENT) continue;
      throw_errno("cannot prune object " + (dir / name).string());
    }
    changed = true;
    if (!old(aside, st)) {
      if (::renameat2(dir_fd.get(), aside.c_str(), dir_fd.get(), name.c_str(), RENAME_NOREPLACE) != 0)
        ::unlinkat(dir_fd.get(), aside.c_str(), 0);  // written anew meanwhile: the same bytes
      ++res.kept_recent;
      continue;
    }
    if (::unlinkat(dir_fd.get(), aside.c_str(), 0) != 0) throw_errno("cannot delete " + (dir / aside).string());
    ++res.deleted;
    res.deleted_bytes += static_cast<uint64_t>(st.st_size);
  }
  // Index entries whose object is gone (their next run simply has no diff_from).
  struct stat lst {};
  if (::fstatat(dir_fd.get(), "latest", &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(lst.st_mode)) {
    const std::filesystem::path idx = dir / "latest";
    const UniqueFd idx_fd = open_trusted_dir(idx);
    for (const std::string& name : list(idx_fd.get(), idx)) {
      struct stat st {};
      if (::fstatat(idx_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
          mtime(st) >= cutoff || st.st_size > 256)
        continue;
      if (name.rfind(".tmp-", 0) == 0) {  // left by a crash
        if (::unlinkat(idx_fd.get(), name.c_str(), 0) == 0) ++res.index_removed;
        continue;
      }
      char buf[257] = {};
      UniqueFd fd(::openat(idx_fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      ssize_t n = fd ? ::read(fd.get(), buf, 256) : -1;
      if (n < static_cast<ssize_t>(kHashHex)) continue;
      const std::string sha(buf, kHashHex);
      if (is_object_name(sha) && ::faccessat(dir_fd.get(), sha.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0 &&
          errno == ENOENT && ::unlinkat(idx_fd.get(), name.c_str(), 0) == 0)
        ++res.index_removed;
    }
    if (res.index_removed && ::fsync(idx_fd.get()) != 0) throw_errno("cannot sync directory " + idx.string());
  }
  if (changed && ::fsync(dir_fd.get()) != 0) throw_errno("cannot sync directory " + dir.string());
  return res;
}

}  // namespace sandboxrun::audit
