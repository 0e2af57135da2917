// The parsed settings of a security.yaml, cached like the compiled rules (cache_io.hpp): yaml-cpp
// took ~0.3 ms of a 2 ms `sandboxrun assess`. The entry is keyed by the digest of the file's
// path, the project root and the file's text, so an edited file is parsed again; only a
// configuration that parsed without error is ever stored. The rules file is looked up again
// on every load (the candidates are stored, not the answer).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sandboxrun/assess.hpp"

namespace sandboxrun::assess {

// Fills every setting of `cfg` (not the rules themselves) from the cache; false on a miss,
// when no candidate rules file exists any more, or when the cache cannot be used.
bool load_cached_settings(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                          const std::string& text, const std::filesystem::path& cache_dir, SecurityConfig& cfg);

// Stores what parsing `text` gave; `rules_candidates` are where the rules file was looked for.
void store_cached_settings(const std::filesystem::path& security_yaml, const std::filesystem::path& project_root,
                           const std::string& text, const std::filesystem::path& cache_dir, const SecurityConfig& cfg,
                           const std::vector<std::filesystem::path>& rules_candidates);

}  // namespace sandboxrun::assess
