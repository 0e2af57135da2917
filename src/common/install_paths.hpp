// Installation paths as the libraries use them (the public part: sandboxrun/install_paths.hpp):
// the computation behind install_paths(), tested on its own, cache places, data-file lookup.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "sandboxrun/install_paths.hpp"

namespace sandboxrun {

// Computes the paths for a binary at `exe` (tests pass their own; `source_dir` is the source
// tree compiled in, `install_prefix` the configured CMAKE_INSTALL_PREFIX).
InstallPaths compute_install_paths(const std::filesystem::path& exe, const std::filesystem::path& source_dir,
                                   const std::filesystem::path& install_prefix);

// Where caches live (compiled seccomp programs, dependency sets): $SANDBOXRUN_CACHE_DIR, else
// /var/cache/sandboxrun for root, else $XDG_CACHE_HOME/sandboxrun or ~/.cache/sandboxrun; empty
// (no cache) when there is no home directory to tell.
std::filesystem::path default_cache_root();
// Where the parsed and compiled forms of the configuration and the assessor's rules are kept
// (common/cache_io.hpp): default_cache_root(), or none when $SANDBOXRUN_CACHE_DIR is set but
// empty (every file is then parsed each time) or there is no cache root.
std::optional<std::filesystem::path> parsed_cache_dir();

// `rel` made absolute: beside `beside_dir` first, then in the data directory. Absolute paths are
// returned as they are. Throws Error naming `what` and every place tried when none exists.
std::filesystem::path find_data_file(const std::filesystem::path& rel, const std::filesystem::path& beside_dir,
                                     const std::string& what);

}  // namespace sandboxrun
