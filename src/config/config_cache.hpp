// The parsed form of a sandbox.yaml, cached like the assessor's (common/cache_io.hpp): yaml-cpp
// took ~0.3 ms of every `sandboxrun` start to parse an 80-line file (~0.6 ms with its code
// still cold), more than the rest of reading the configuration. The key is the file's path,
// its bytes and the data directory; a seccomp profile named by a relative path is looked up
// again at load (the file beside sandbox.yaml first, then the data directory), and a different
// answer than the cached one is a miss, so the parser reports what changed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "sandboxrun/config.hpp"

namespace sandboxrun::config_cache {

// `file` is absolute; `text` its bytes. nullopt: not cached, or the entry failed a check.
std::optional<SandboxConfig> load(const std::filesystem::path& file, const std::string& text,
                                  const std::filesystem::path& cache_dir);
// Best effort: a cache that cannot be written is only slower.
void store(const std::filesystem::path& file, const std::string& text, const std::filesystem::path& cache_dir,
           const SandboxConfig& cfg);
// The stored form of every setting (for the unit test: a cached config encodes as the parsed one).
std::string encode(const SandboxConfig& cfg);

}  // namespace sandboxrun::config_cache
