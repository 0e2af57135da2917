// `sandboxrun deps ls|rm|gc`: the dependency cache (where it is: $SANDBOXRUN_CACHE_DIR, then
// sandbox.yaml's cache_dir:, then the default; its cap: cache_max_size).
#include <cstdio>
#include <ctime>

#include "cli.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/deps_cache.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli {

namespace {

std::string when(std::time_t t) {
  if (t == 0) return "-";
  char buf[32];
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int deps_command(const std::vector<std::string>& args) {
  CLI::App app{"Manage the dependency cache", "sandboxrun deps"};
  app.require_subcommand(1, 1);
  app.fallthrough();  // --config may follow the subcommand
  std::optional<std::string> config;
  app.add_option("--config", config, "sandbox.yaml, or the directory holding it");
  auto* ls = app.add_subcommand("ls", "List cached dependency sets, least recently used first");
  std::vector<std::string> keys;
  bool all = false;
  auto* rm = app.add_subcommand("rm", "Remove cached sets by key (or a unique prefix of 8+ digits)");
  rm->add_option("KEY", keys, "cache keys");
  rm->add_flag("--all", all, "remove every set not in use");
  std::optional<std::string> max_size;
  bool verify = false;
  auto* gc = app.add_subcommand("gc", "Evict least recently used sets above the size cap; remove damaged sets");
  gc->add_option("--max-size", max_size, "size cap such as 2g (default: cache_max_size of sandbox.yaml)");
  gc->add_flag("--verify", verify, "hash every cached file, not just its size");
  if (auto rc = parse_or_exit(app, args)) return *rc;

  const SandboxConfig cfg = load_sandbox_config(find_config(config));
  const DepsCache cache = DepsCache::open(cfg);
  if (ls->parsed()) {
    std::printf("%-16s  %10s  %6s  %-20s  %s\n", "KEY", "SIZE", "FILES", "LAST USED", "REQUIREMENTS");
    for (const auto& e : cache.list()) {
      std::string reqs;
      for (const auto& r : e.requirements) reqs += (reqs.empty() ? "" : ", ") + r;
      std::printf("%-16s  %10s  %6llu  %-20s  %s\n", e.key.substr(0, 16).c_str(), format_size(e.bytes).c_str(),
                  static_cast<unsigned long long>(e.files), when(e.last_used).c_str(), reqs.c_str());
    }
    return 0;
  }
  if (rm->parsed()) {
    if (keys.empty() && !all) throw Error("deps rm: no key given", "pass KEY... (see `sandboxrun deps ls`) or --all");
    int rc = 0;
    for (const auto& e : cache.list()) {
      bool match = all;
      for (const auto& k : keys) match = match || (k.size() >= 8 && e.key.rfind(k, 0) == 0);
      if (!match) continue;
      if (!cache.remove(e.key)) {
        std::fprintf(stderr, "sandboxrun deps rm: %s is in use; try again when its runs end\n", e.key.c_str());
        rc = 1;
        continue;
      }
      std::printf("removed %s\n", e.key.c_str());
    }
    return rc;
  }
  uint64_t cap = cfg.cache_max_size;
  if (max_size) {
    auto m = parse_size(*max_size);
    if (!m) throw Error("--max-size " + *max_size + ": expected a size such as 512m or 2g");
    cap = *m;
  }
  const auto r = cache.gc(cap, verify);
  for (const auto& k : r.evicted) std::printf("evicted %s\n", k.c_str());
  for (const auto& k : r.damaged) std::printf("removed damaged %s\n", k.c_str());
  std::printf("%s in the cache (cap %s)\n", format_size(r.bytes_after).c_str(), format_size(cap).c_str());
  return 0;
}

}  // namespace sandboxrun::cli
