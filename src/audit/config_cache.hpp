// The parsed form of an audit.yaml, cached like sandbox.yaml's (config/config_cache.hpp): the
// first yaml-cpp parse of a process cost ~0.6 ms of a `sandboxrun` start, most of it faulting
// in yaml-cpp's code, which a start with every file cached never touches. Keyed by the file's
// path and bytes; nothing in it depends on anything else.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "sandboxrun/audit.hpp"

namespace sandboxrun::audit {

std::optional<AuditConfig> load_cached_config(const std::filesystem::path& file, const std::string& text,
                                              const std::filesystem::path& cache_dir);
void store_cached_config(const std::filesystem::path& file, const std::string& text,
                         const std::filesystem::path& cache_dir, const AuditConfig& cfg);

}  // namespace sandboxrun::audit
