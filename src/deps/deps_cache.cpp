// The public face of the dependency cache (sandboxrun/deps_cache.hpp) over deps::Cache, and where
// the cache is.
#include "sandboxrun/deps_cache.hpp"

#include <cstdlib>

#include "common/install_paths.hpp"
#include "deps/deps.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

namespace fs = std::filesystem;

fs::path deps::cache_dir(const SandboxConfig& cfg) {
  if (const char* env = std::getenv("SANDBOXRUN_CACHE_DIR"); env && *env) return fs::path(env) / "deps";
  if (cfg.cache_dir) return *cfg.cache_dir;
  const fs::path root = default_cache_root();
  if (root.empty())
    throw Error("no directory for the dependency cache (no home directory)", "set SANDBOXRUN_CACHE_DIR or cache_dir:");
  return root / "deps";
}

DepsCache::DepsCache(std::unique_ptr<deps::Cache> cache) : cache_(std::move(cache)) {}
DepsCache::DepsCache(DepsCache&&) noexcept = default;
DepsCache& DepsCache::operator=(DepsCache&&) noexcept = default;
DepsCache::~DepsCache() = default;

DepsCache DepsCache::open(const SandboxConfig& cfg) {
  return DepsCache(std::make_unique<deps::Cache>(deps::Cache::open(deps::cache_dir(cfg))));
}

std::vector<DepsSet> DepsCache::list() const {
  std::vector<DepsSet> out;
  for (auto& e : cache_->list()) {
    DepsSet s{e.key, e.bytes, e.files, e.last_used, {}};
    for (const auto& r : e.record.value("requirements", nlohmann::json::array()))
      if (r.is_string()) s.requirements.push_back(r.get<std::string>());
    out.push_back(std::move(s));
  }
  return out;
}

bool DepsCache::remove(const std::string& key) const {
  const deps::KeyLock lock = cache_->try_lock(key);
  if (!lock.held()) return false;
  cache_->remove(key);
  return true;
}

DepsGcResult DepsCache::gc(uint64_t max_bytes, bool full) const {
  deps::Cache::GcResult r = cache_->gc(max_bytes, full);
  return {std::move(r.removed), std::move(r.damaged), r.bytes_after};
}

}  // namespace sandboxrun
