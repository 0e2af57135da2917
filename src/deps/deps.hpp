// Dependencies of a run: pip requirement sets (parsing, validation, normalisation) and the
// content-addressed cache of installed sets. Installing is the executor's job (a phase-1
// sandbox, src/core/deps_phase.cpp); this module only owns the files.
//
// Cache layout (the root is 0700; nothing in it is reachable by other users):
//   ROOT/entries/KEY/site/         the installed packages, bound read-only into runs
//   ROOT/entries/KEY/manifest      every file's sha256 and size, ending with its own hash
//   ROOT/entries/KEY/record.json   requirements, installed packages, sizes; mtime = last use
//   ROOT/locks/KEY.lock            flock: exclusive to build or evict, shared while in use
//   ROOT/tmp/XXXXXX/               build directories; an entry appears by rename(2) only
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandboxrun/fd.hpp"

namespace sandboxrun {
struct SandboxConfig;
}

namespace sandboxrun::deps {

// The dependency cache of runs under `cfg`: $SANDBOXRUN_CACHE_DIR/deps, else cache_dir: of
// sandbox.yaml, else the default cache root's deps/ (/var/cache/sandboxrun/deps as root,
// ~/.cache/sandboxrun/deps). Throws Error when there is no home directory to tell.
std::filesystem::path cache_dir(const SandboxConfig& cfg);

// A requirement set in pip's requirements format, reduced to what can be installed from the
// configured index: requirement specifiers with optional --hash=ALGO:HEX options. One entry per
// logical line, whitespace collapsed, comments dropped; `lines` is sorted (order does not change
// what pip installs, so it must not change the cache key).
struct Requirements {
  std::vector<std::string> lines;
  bool hashes = false;  // some line pins a hash: pip runs with --require-hashes
  bool empty() const noexcept { return lines.empty(); }
  std::string text() const;  // the normalised file, one line each
};

// Why one logical requirement line is refused, or nullopt when it is acceptable.
std::optional<std::string> check_requirement(std::string_view line);
// Parses requirements text; throws Error "ORIGIN:LINE: ..." naming the offending line.
Requirements parse_requirements(std::string_view text, const std::string& origin);
// Adds `more` to `base` (the config's set plus the request's), keeping the result normalised.
void merge(Requirements& base, const Requirements& more);

struct EntryInfo {
  std::string key;
  uint64_t bytes = 0;
  uint64_t files = 0;
  std::time_t last_used = 0;
  nlohmann::json record;  // record.json as written at publish
};

// A flock on one key's lock file, released when destroyed.
class KeyLock {
 public:
  KeyLock() = default;
  explicit KeyLock(UniqueFd fd) : fd_(std::move(fd)) {}
  bool held() const noexcept { return static_cast<bool>(fd_); }
  // Exclusive -> shared (the entry was published and is now in use).
  void downgrade();

 private:
  UniqueFd fd_;
};

// A fresh build directory: `out` (world-writable inside the 0700 build directory, since the
// sandbox's user writes there through a bind mount) is what phase 1 sees.
struct BuildDir {
  std::filesystem::path dir;
  std::filesystem::path out;
};

class Cache {
 public:
  // Creates ROOT (0700) and its subdirectories as needed; refuses a ROOT that is a symlink or
  // not owned by this user. Throws Error.
  static Cache open(const std::filesystem::path& root);

  const std::filesystem::path& root() const noexcept { return root_; }
  KeyLock lock(const std::string& key, bool exclusive) const;
  // Nonblocking exclusive lock; unheld when the key is in use.
  KeyLock try_lock(const std::string& key) const;

  // The entry when it is present and intact (manifest hash and every file's type and size;
  // with `full`, every file's sha256 too); marks it used. Missing: nullopt. Damaged: nullopt and
  // `damage` says why (the caller, holding the exclusive lock, removes and rebuilds it).
  std::optional<EntryInfo> lookup(const std::string& key, bool full, std::string* damage) const;
  std::filesystem::path site(const std::string& key) const { return root_ / "entries" / key / "site"; }

  BuildDir make_build_dir() const;
  // Moves build.out/site into entries/KEY with a manifest and record.json; the caller holds the
  // exclusive lock. Refuses symlinks, hard links, special files and names with newlines.
  EntryInfo publish(const BuildDir& build, const std::string& key, nlohmann::json record) const;
  void remove_build_dir(const BuildDir& build) const noexcept;
  // Removes an entry (the caller holds the exclusive lock).
  void remove(const std::string& key) const;

  std::vector<EntryInfo> list() const;  // every intact-looking entry, least recently used first

  struct GcResult {
    std::vector<std::string> removed;  // keys
    std::vector<std::string> damaged;  // keys removed because their check failed
    uint64_t bytes_after = 0;
  };
  // Evicts least recently used entries until the total is at most max_bytes (entries in use are
  // skipped), removes damaged entries (all files hashed with `full`) and stale build directories.
  GcResult gc(uint64_t max_bytes, bool full, const std::string& keep = {}) const;

 private:
  explicit Cache(std::filesystem::path root, UniqueFd root_fd) : root_(std::move(root)), fd_(std::move(root_fd)) {}
  std::filesystem::path root_;
  UniqueFd fd_;
};

// Reads pip's --report JSON: [{name, version, sha256 (or null), url}] for what was installed.
nlohmann::json installed_from_report(const nlohmann::json& report);

}  // namespace sandboxrun::deps
