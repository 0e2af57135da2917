// The dependency cache (docs/deps.md) for a caller that manages it, as `sandboxrun deps` does:
// the installed requirement sets, their removal, and eviction down to a size cap.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

namespace sandboxrun {

struct SandboxConfig;

namespace deps {
class Cache;
}

// One installed requirement set.
struct DepsSet {
  std::string key;                        // the cache key (hex)
  uint64_t bytes = 0;
  uint64_t files = 0;
  std::time_t last_used = 0;              // 0 when its record is missing (a damaged set)
  std::vector<std::string> requirements;  // the requirement lines it was installed for
};

// What DepsCache::gc did.
struct DepsGcResult {
  std::vector<std::string> evicted;  // keys removed to get under the cap
  std::vector<std::string> damaged;  // keys removed because their check failed
  uint64_t bytes_after = 0;
};

class DepsCache {
 public:
  // The cache runs under `cfg` use ($SANDBOXRUN_CACHE_DIR/deps, else cache_dir: of sandbox.yaml,
  // else the default cache root's deps/), created when missing. Throws Error when there is no
  // place to tell, or it is a symlink or another user's.
  static DepsCache open(const SandboxConfig& cfg);
  DepsCache(DepsCache&&) noexcept;
  DepsCache& operator=(DepsCache&&) noexcept;
  ~DepsCache();

  // Every set, least recently used first. Throws Error when the cache cannot be read.
  std::vector<DepsSet> list() const;
  // Removes set `key` unless a run is using it (then false, and nothing is removed). Throws Error
  // when it cannot be removed.
  bool remove(const std::string& key) const;
  // Evicts the least recently used sets not in use until at most `max_bytes` remain, and removes
  // damaged ones (with `full`, every file hashed, not only sized). Throws Error.
  DepsGcResult gc(uint64_t max_bytes, bool full) const;

 private:
  explicit DepsCache(std::unique_ptr<deps::Cache> cache);
  std::unique_ptr<deps::Cache> cache_;
};

}  // namespace sandboxrun
