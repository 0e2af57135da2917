// Config loading: what the parsed-config caches save a `sandboxrun` start. For each of the
// project's three files, the median time to load it with the caches off (SANDBOXRUN_CACHE_DIR
// set but empty: yaml-cpp every time) and on (a warm cache entry decoded). security.yaml's
// figures include its rules file, which has a cache of its own.
//   sandboxrun_config_bench [ROUNDS]    (default 200)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sandboxrun/assess.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/config.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double median_us(int rounds, const std::function<void()>& load) {
  std::vector<double> t;
  for (int i = 0; i < rounds; ++i) {
    const auto t0 = Clock::now();
    load();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  const fs::path dir = fs::path(SANDBOXRUN_SOURCE_DIR) / "config";
  const fs::path cache = fs::temp_directory_path() / ("sandboxrun-config-bench-" + std::to_string(::getpid()));
  struct File {
    const char* name;
    std::function<void()> load;
  };
  const File files[] = {
      {"sandbox.yaml", [&] { (void)sandboxrun::load_sandbox_config(dir / "sandbox.yaml"); }},
      {"audit.yaml", [&] { (void)sandboxrun::load_audit_config(dir / "audit.yaml"); }},
      {"security.yaml (+ rules)",
       [&] { (void)sandboxrun::load_security_config(dir / "security.yaml", SANDBOXRUN_SOURCE_DIR); }},
  };
  std::printf("config load, median of %d (us)    %12s %12s\n", rounds, "parsed", "cached");
  double total_parsed = 0, total_cached = 0;
  for (const File& f : files) {
    ::setenv("SANDBOXRUN_CACHE_DIR", "", 1);
    const double parsed = median_us(rounds, f.load);
    ::setenv("SANDBOXRUN_CACHE_DIR", cache.c_str(), 1);
    f.load();  // stores the entry
    const double cached = median_us(rounds, f.load);
    std::printf("  %-32s %12.1f %12.1f\n", f.name, parsed, cached);
    total_parsed += parsed;
    total_cached += cached;
  }
  std::printf("  %-32s %12.1f %12.1f\n", "all three", total_parsed, total_cached);
  std::error_code ec;
  fs::remove_all(cache, ec);
  return 0;
}
