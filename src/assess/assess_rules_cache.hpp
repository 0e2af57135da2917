// Compiled-rules cache. Parsing the YAML rules file is most of a single `sandboxrun assess`,
// so the parsed rules are kept in a binary file named by the SHA-256 of the rules text: an
// edited rules file has a new digest and is parsed (and cached) again, so a stale entry is
// never used. The cache directory must belong to the user and be writable by nobody else;
// files are opened without following symlinks, verified (magic, digest, length, checksum)
// and written to a temporary name, then renamed into place.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "assess/assess_rules.hpp"

namespace sandboxrun::assess {

enum class CacheUse : uint8_t { hit, built, bypassed };

struct CachedRules {
  RuleSet rules;
  CacheUse use = CacheUse::bypassed;
  std::string note;  // why the cache was bypassed or rebuilt, for callers that report it
  bool by_identity = false;  // a hit found through the file's identity, its text not read
};

// RuleSet::load through the cache in `cache_dir` (created 0700 when missing). Throws like
// RuleSet::load for an unreadable or invalid rules file; a cache problem never fails the load.
// A rules file that has not changed for a while is also linked by its identity (device, inode,
// size, times) to its digest, so that later loads need not read it; `now` (the clock, or a
// test's) decides "a while".
CachedRules load_rules_cached(const std::filesystem::path& file, const std::filesystem::path& cache_dir,
                              std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace sandboxrun::assess
