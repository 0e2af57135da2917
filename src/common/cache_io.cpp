#include "common/cache_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "common/crc32c.hpp"
#include "common/safe_open.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cache {

namespace {

constexpr size_t kDigestHex = 64;
constexpr size_t kMaxCacheBytes = 64u << 20;
// Entries kept per kind (the name without its digest: "assess-config-*.bin", ...). Keys are
// digests of their inputs, so every edit of the rules and every security.yaml at a new path
// (a test's temporary one, a service's per-job directory) adds an entry nothing else removes.
constexpr size_t kKeepPerKind = 16;
// A temporary file this old was left by a writer that died before its rename.
constexpr time_t kStaleTempSeconds = 600;

// The file mapped read-only, or nullopt. Entries are replaced by rename, never rewritten in
// place, so the bytes verified are the bytes decoded. (Only the directory's owner could
// truncate a file under the mapping, and would crash only their own process.)
std::optional<Entry> map_file(int dirfd, const std::string& name) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0 ||
      st.st_size <= 0 || static_cast<uint64_t>(st.st_size) > kMaxCacheBytes)
    return std::nullopt;
  const auto size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (base == MAP_FAILED) return std::nullopt;
  return Entry(base, size, std::string_view(static_cast<const char*>(base), size));
}

bool write_file(int dirfd, const std::string& name, const std::string& bytes) {
  const std::string tmp = "." + name + "." + std::to_string(::getpid()) + ".tmp";
  UniqueFd fd(::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return false;
  // A crash after the rename may leave a short file: the checksum catches it next time.
  if (!write_all(fd.get(), bytes.data(), bytes.size()) || ::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return false;
  }
  return true;
}

bool is_hex_digest(std::string_view s) {
  return s.size() == kDigestHex && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

// Removes the oldest entries of `kind` + digest + `suffix` beyond kKeepPerKind, never `keep`
// (written just now: entries made within one tick of the file system's clock share a time),
// and dead writers' temporary files. Best effort: a failure leaves files, never fails a write.
// An entry removed while another process uses it stays readable through that mapping; one
// removed while still wanted is only rebuilt.
void prune(int dirfd, std::string_view kind, std::string_view suffix, const std::string& keep) {
  UniqueFd copy(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!copy) return;
  DIR* d = ::fdopendir(copy.get());
  if (!d) return;
  (void)copy.release();  // closedir closes it
  ::rewinddir(d);
  std::vector<std::pair<struct timespec, std::string>> entries;
  const time_t now = ::time(nullptr);
  while (const struct dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    struct stat st {};
    const bool temp = name.starts_with(".") && name.substr(1).starts_with(kind) && name.ends_with(".tmp");
    const bool entry = name.size() == kind.size() + kDigestHex + suffix.size() && name.starts_with(kind) &&
                       name.ends_with(suffix) && is_hex_digest(name.substr(kind.size(), kDigestHex)) && name != keep;
    if ((!temp && !entry) || ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (temp) {
      if (st.st_mtim.tv_sec + kStaleTempSeconds < now) ::unlinkat(::dirfd(d), e->d_name, 0);
      continue;
    }
    entries.emplace_back(st.st_mtim, std::string(name));
  }
  if (entries.size() + 1 > kKeepPerKind) {
    const size_t remove = entries.size() + 1 - kKeepPerKind;
    std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(remove), entries.end(),
                      [](const auto& a, const auto& b) {
                        return a.first.tv_sec != b.first.tv_sec ? a.first.tv_sec < b.first.tv_sec : a.first.tv_nsec < b.first.tv_nsec;
                      });
    for (size_t i = 0; i < remove; ++i) ::unlinkat(::dirfd(d), entries[i].second.c_str(), 0);
  }
  ::closedir(d);
}

UniqueFd open_dir(const std::filesystem::path& dir, std::string& why) {
  // Walked as the seccomp cache's is (safe_open.hpp): no symlink anywhere on the path, and no
  // directory on it that another user could write to. The parsed sandbox.yaml decides the user,
  // the limits and the network of every run: where it is kept must be as trusted as the file.
  UniqueFd fd;
  try {
    try {
      fd = open_trusted_dir(dir);
    } catch (const Error& e) {
      if (e.sys_errno() != ENOENT) throw;
      // Only the last two levels are created (~/.cache/sandboxrun); both private to the user.
      ::mkdir(dir.parent_path().c_str(), 0700);
      ::mkdir(dir.c_str(), 0700);
      fd = open_trusted_dir(dir);
    }
  } catch (const Error& e) {
    why = e.describe();
    return UniqueFd();
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    why = dir.string() + " is not a directory private to this user (owner and mode 0700 or 0755 expected)";
    return UniqueFd();
  }
  return fd;
}

Entry::~Entry() {
  if (base_) ::munmap(base_, size_);
}

std::optional<Entry> read_entry(int dirfd, const std::string& name, std::string_view magic, std::string_view key,
                                bool& rejected) {
  rejected = false;
  std::optional<Entry> mapped = map_file(dirfd, name);
  if (!mapped) return std::nullopt;
  const std::string_view b = mapped->payload();
  const size_t head = magic.size() + kDigestHex + 2 * sizeof(uint32_t);
  if (b.size() >= head && b.starts_with(magic) && b.substr(magic.size(), kDigestHex) == key) {
    uint32_t len = 0, crc = 0;
    std::memcpy(&len, b.data() + magic.size() + kDigestHex, sizeof len);
    std::memcpy(&crc, b.data() + magic.size() + kDigestHex + sizeof len, sizeof crc);
    const std::string_view payload = b.substr(head);
    if (payload.size() == len && crc32c(payload) == crc) return Entry(std::move(*mapped), payload);
  }
  rejected = true;
  return std::nullopt;
}

bool write_entry(int dirfd, const std::string& name, std::string_view magic, std::string_view key,
                 std::string_view payload) {
  std::string entry(magic);
  entry += key;
  const uint32_t len = static_cast<uint32_t>(payload.size()), crc = crc32c(payload);
  entry.append(reinterpret_cast<const char*>(&len), sizeof len);
  entry.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  entry += payload;
  if (!write_file(dirfd, name, entry)) return false;
  if (const size_t at = name.find(key); key.size() == kDigestHex && at != std::string::npos)
    prune(dirfd, std::string_view(name).substr(0, at), std::string_view(name).substr(at + kDigestHex), name);
  return true;
}

std::optional<Entry> read_keyed(const std::filesystem::path& cache_dir, std::string_view kind, std::string_view magic,
                                const std::string& key) {
  std::string why;
  UniqueFd dir = open_dir(cache_dir, why);
  bool rejected = false;
  if (!dir) return std::nullopt;
  return read_entry(dir.get(), std::string(kind) + key + ".bin", magic, key, rejected);
}

void write_keyed(const std::filesystem::path& cache_dir, std::string_view kind, std::string_view magic,
                 const std::string& key, std::string_view payload) {
  std::string why;
  if (UniqueFd dir = open_dir(cache_dir, why)) write_entry(dir.get(), std::string(kind) + key + ".bin", magic, key, payload);
}

}  // namespace sandboxrun::cache
