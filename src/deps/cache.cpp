// The dependency cache's files. Every path below the root is opened relative to a directory fd
// with O_NOFOLLOW: the installed trees were written by a sandboxed pip, so nothing in them is
// trusted to be what its name says until the manifest walk has checked its type.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "deps/deps.hpp"
#include "sandboxrun/error.hpp"
#include "common/safe_open.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::deps {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxManifestBytes = 64u << 20;
constexpr size_t kMaxRecordBytes = 16u << 20;
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

UniqueFd open_dir(int at, const std::string& name, const std::string& shown) {
  UniqueFd fd(::openat(at, name.c_str(), kDirFlags));
  if (!fd) throw_errno("cannot open directory " + shown, "it must be a real directory, not a symlink");
  return fd;
}

UniqueFd ensure_dir(int at, const std::string& name, mode_t mode, const std::string& shown) {
  if (::mkdirat(at, name.c_str(), mode) != 0 && errno != EEXIST) throw_errno("cannot create " + shown);
  return open_dir(at, name, shown);
}

struct Walk {
  std::string manifest;
  uint64_t bytes = 0, files = 0;
};

// Appends "D path" / "F sha256 size path" lines for everything under dirfd, sorted by name.
void walk(int dirfd, const std::string& prefix, Walk& w) {
  UniqueFd dup(::dup(dirfd));
  if (!dup) throw_errno("cannot read directory " + prefix);
  DIR* d = ::fdopendir(dup.get());
  if (!d) throw_errno("cannot read directory " + prefix);
  dup.release();
  struct CloseDir {
    void operator()(DIR* p) const noexcept { ::closedir(p); }
  };
  std::unique_ptr<DIR, CloseDir> dir(d);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    const std::string rel = prefix.empty() ? n : prefix + "/" + n;
    if (n.find('\n') != std::string::npos)
      throw Error("installed file name with a newline: " + rel, "refusing to cache it");
    struct stat st {};
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_errno("cannot stat installed file " + rel);
    if (S_ISDIR(st.st_mode)) {
      w.manifest += "D " + rel + "\n";
      UniqueFd sub = open_dir(dirfd, n, rel);
      walk(sub.get(), rel, w);
    } else if (S_ISREG(st.st_mode) && st.st_nlink == 1) {
      UniqueFd f(::openat(dirfd, n.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
      if (!f) throw_errno("cannot open installed file " + rel);
      w.manifest += "F " + sha256_fd_hex(f.get(), "a cached file") + " " + std::to_string(st.st_size) + " " + rel + "\n";
      w.bytes += static_cast<uint64_t>(st.st_size);
      ++w.files;
    } else {
      throw Error("the install produced " + rel + ", which is not a plain file or directory (a symlink, hard link "
                  "or special file)", "wheels never contain these; refusing to cache the set");
    }
  }
}

std::string read_at(int dirfd, const std::string& name, size_t limit) {
  UniqueFd f(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!f) throw_errno("cannot open " + name);
  return read_fd(f.get(), limit, name);
}

void write_at(int dirfd, const std::string& name, const std::string& data) {
  UniqueFd f = open_trusted_at(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0600, name);
  if (!write_all(f.get(), data.data(), data.size())) throw_errno("cannot write " + name);
}

// Checks a manifest's trailing self-hash and every entry against the tree; "" when intact.
std::string verify(int entry_fd, bool full, uint64_t* bytes, uint64_t* files) {
  std::string m;
  try {
    m = read_at(entry_fd, "manifest", kMaxManifestBytes);
  } catch (const Error& e) {
    return e.describe();
  }
  const size_t end = m.rfind("end ");
  if (end == std::string::npos || (end != 0 && m[end - 1] != '\n') || m.size() != end + 4 + 64 + 1 ||
      sha256_hex(std::string_view(m).substr(0, end)) != m.substr(end + 4, 64))
    return "the manifest is incomplete or altered";
  UniqueFd site(::openat(entry_fd, "site", kDirFlags));
  if (!site) return "site/ is missing";
  size_t pos = 0;
  while (pos < end) {
    const size_t nl = m.find('\n', pos);
    const std::string line = m.substr(pos, nl - pos);
    pos = nl + 1;
    struct stat st {};
    if (line.rfind("D ", 0) == 0) {
      if (::fstatat(site.get(), line.c_str() + 2, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
        return "directory " + line.substr(2) + " is missing";
      continue;
    }
    // F HASH SIZE PATH
    const size_t sp = line.find(' ', 67);
    if (line.rfind("F ", 0) != 0 || sp == std::string::npos) return "a manifest line is malformed";
    const std::string hash = line.substr(2, 64), path = line.substr(sp + 1);
    const uint64_t size = std::strtoull(line.c_str() + 67, nullptr, 10);
    if (::fstatat(site.get(), path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      return "file " + path + " is missing";
    if (static_cast<uint64_t>(st.st_size) != size)
      return "file " + path + " has " + std::to_string(st.st_size) + " bytes, the manifest says " + std::to_string(size);
    if (full) {
      UniqueFd f(::openat(site.get(), path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
      if (!f || sha256_fd_hex(f.get(), "a cached file") != hash) return "file " + path + " does not match its sha256";
    }
    *bytes += size;
    ++*files;
  }
  return {};
}

}  // namespace

void KeyLock::downgrade() {
  if (fd_ && ::flock(fd_.get(), LOCK_SH) != 0) throw_errno("cannot downgrade a dependency cache lock");
}

Cache Cache::open(const fs::path& root) {
  // No symlink anywhere on the path, and no directory on it writable by others (safe_open.hpp).
  UniqueFd fd = open_trusted_dir(root, /*create=*/true, 0700);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    throw Error("the dependency cache " + root.string() + " must belong to uid " + std::to_string(::geteuid()) +
                    " with mode 0700",
                "chown/chmod it, or point SANDBOXRUN_CACHE_DIR elsewhere");
  for (const char* sub : {"entries", "locks", "tmp"}) ensure_dir(fd.get(), sub, 0700, (root / sub).string());
  return Cache(root, std::move(fd));
}

KeyLock Cache::lock(const std::string& key, bool exclusive) const {
  UniqueFd locks = open_dir(fd_.get(), "locks", (root_ / "locks").string());
  UniqueFd f(::openat(locks.get(), (key + ".lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!f) throw_errno("cannot open the lock for dependency set " + key);
  while (::flock(f.get(), exclusive ? LOCK_EX : LOCK_SH) != 0)
    if (errno != EINTR) throw_errno("cannot lock dependency set " + key);
  return KeyLock(std::move(f));
}

KeyLock Cache::try_lock(const std::string& key) const {
  UniqueFd locks = open_dir(fd_.get(), "locks", (root_ / "locks").string());
  UniqueFd f(::openat(locks.get(), (key + ".lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!f || ::flock(f.get(), LOCK_EX | LOCK_NB) != 0) return {};
  return KeyLock(std::move(f));
}

std::optional<EntryInfo> Cache::lookup(const std::string& key, bool full, std::string* damage) const {
  UniqueFd entries = open_dir(fd_.get(), "entries", (root_ / "entries").string());
  UniqueFd entry(::openat(entries.get(), key.c_str(), kDirFlags));
  if (!entry) return std::nullopt;
  EntryInfo info;
  info.key = key;
  std::string why = verify(entry.get(), full, &info.bytes, &info.files);
  if (why.empty()) {
    try {
      info.record = json::parse(read_at(entry.get(), "record.json", kMaxRecordBytes));
    } catch (const std::exception&) {
      why = "record.json is missing or not JSON";
    }
  }
  if (!why.empty()) {
    if (damage) *damage = why;
    return std::nullopt;
  }
  // Last use is record.json's mtime (LRU eviction reads it back).
  ::utimensat(entry.get(), "record.json", nullptr, AT_SYMLINK_NOFOLLOW);
  info.last_used = std::time(nullptr);
  return info;
}

BuildDir Cache::make_build_dir() const {
  UniqueFd tmp = open_dir(fd_.get(), "tmp", (root_ / "tmp").string());
  const std::string name = random_name_suffix();
  UniqueFd dir = ensure_dir(tmp.get(), name, 0700, (root_ / "tmp" / name).string());
  if (::mkdirat(dir.get(), "out", 0777) != 0 || ::fchmodat(dir.get(), "out", 0777, 0) != 0)
    throw_errno("cannot create a build directory in " + (root_ / "tmp" / name).string());
  return {root_ / "tmp" / name, root_ / "tmp" / name / "out"};
}

EntryInfo Cache::publish(const BuildDir& build, const std::string& key, json record) const {
  UniqueFd dir = open_dir(fd_.get(), "tmp/" + build.dir.filename().string(), build.dir.string());
  UniqueFd out = open_dir(dir.get(), "out", build.out.string());
  if (::mkdirat(out.get(), "site", 0755) != 0 && errno != EEXIST) throw_errno("cannot create " + build.out.string() + "/site");
  UniqueFd entry = ensure_dir(dir.get(), "entry", 0700, build.dir.string() + "/entry");
  // The sandbox is gone: nothing writes under out/ any more. Move site/ first, then walk it.
  if (::renameat(out.get(), "site", entry.get(), "site") != 0) throw_errno("cannot move the installed set into place");
  if (::fchmodat(entry.get(), ".", 0755, 0) != 0) throw_errno("cannot set the mode of a cache entry");
  UniqueFd site = open_dir(entry.get(), "site", "site");
  Walk w;
  walk(site.get(), "", w);
  w.manifest += "end " + sha256_hex(w.manifest) + "\n";
  record["bytes"] = w.bytes;
  record["files"] = w.files;
  write_at(entry.get(), "record.json", record.dump(2) + "\n");
  write_at(entry.get(), "manifest", w.manifest);
  if (::fsync(entry.get()) != 0) throw_errno("cannot sync a cache entry");
  UniqueFd entries = open_dir(fd_.get(), "entries", (root_ / "entries").string());
  // A damaged entry of this key was removed by the caller; a leftover would make rename fail.
  if (::renameat(dir.get(), "entry", entries.get(), key.c_str()) != 0)
    throw_errno("cannot publish dependency set " + key, "run `sandboxrun deps gc`");
  return {key, w.bytes, w.files, std::time(nullptr), record};
}

void Cache::remove_build_dir(const BuildDir& build) const noexcept {
  std::error_code ec;
  fs::remove_all(build.dir, ec);  // never follows symlinks: it removes the links themselves
}

void Cache::remove(const std::string& key) const {
  // Renamed away first, so no reader sees a half-removed entry.
  UniqueFd entries = open_dir(fd_.get(), "entries", (root_ / "entries").string());
  UniqueFd tmp = open_dir(fd_.get(), "tmp", (root_ / "tmp").string());
  const std::string gone = "removed-" + random_name_suffix();
  if (::renameat(entries.get(), key.c_str(), tmp.get(), gone.c_str()) != 0) {
    if (errno == ENOENT) return;
    throw_errno("cannot remove dependency set " + key);
  }
  std::error_code ec;
  fs::remove_all(root_ / "tmp" / gone, ec);
  if (ec) throw Error("cannot remove " + (root_ / "tmp" / gone).string() + ": " + ec.message());
}

std::vector<EntryInfo> Cache::list() const {
  std::vector<EntryInfo> out;
  UniqueFd entries = open_dir(fd_.get(), "entries", (root_ / "entries").string());
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(root_ / "entries", ec)) {
    const std::string key = de.path().filename().string();
    EntryInfo info;
    info.key = key;
    UniqueFd entry(::openat(entries.get(), key.c_str(), kDirFlags));
    struct stat st {};
    if (!entry || ::fstatat(entry.get(), "record.json", &st, AT_SYMLINK_NOFOLLOW) != 0) {
      out.push_back(info);  // no record: damaged, least recently used of all
      continue;
    }
    info.last_used = st.st_mtime;
    try {
      info.record = json::parse(read_at(entry.get(), "record.json", kMaxRecordBytes));
      info.bytes = info.record.value("bytes", uint64_t{0});
      info.files = info.record.value("files", uint64_t{0});
    } catch (const std::exception&) {
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const EntryInfo& a, const EntryInfo& b) { return a.last_used < b.last_used; });
  return out;
}

Cache::GcResult Cache::gc(uint64_t max_bytes, bool full, const std::string& keep) const {
  GcResult r;
  auto entries = list();
  uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  for (const auto& e : entries) {
    if (e.key == keep) continue;
    KeyLock l = try_lock(e.key);
    if (!l.held()) continue;  // in use or being built
    UniqueFd entry(::openat(open_dir(fd_.get(), "entries", "entries").get(), e.key.c_str(), kDirFlags));
    if (!entry) continue;
    uint64_t bytes = 0, files = 0;
    const bool intact = verify(entry.get(), full, &bytes, &files).empty();
    if (intact && total <= max_bytes) continue;
    remove(e.key);
    total -= std::min(total, e.bytes);
    (intact ? r.removed : r.damaged).push_back(e.key);
  }
  // Build directories of builders that died (a live builder holds its key's lock, but its build
  // directory is not tied to the key): only those older than a day are removed.
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& de : fs::directory_iterator(root_ / "tmp", ec)) {
    std::error_code ec2;
    if (now - fs::last_write_time(de.path(), ec2) > std::chrono::hours(24) && !ec2) fs::remove_all(de.path(), ec2);
  }
  r.bytes_after = total;
  return r;
}

}  // namespace sandboxrun::deps
