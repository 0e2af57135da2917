// Where this installation keeps its files, found from the running binary's location so that any
// prefix works (`cmake --install build --prefix P`, the .deb's /usr), with the source tree as the
// last resort for binaries run from a build directory inside it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sandboxrun {

struct InstallPaths {
  std::filesystem::path prefix;      // empty when running from the source tree
  std::filesystem::path data_dir;    // policies/, assess rules: P/share/sandboxrun or the source tree
  std::filesystem::path state_dir;   // image store: /var/lib/sandboxrun (prefix /usr), P/var/lib/sandboxrun,
                                     // or the source tree (images/, rootfs/)
  std::vector<std::filesystem::path> config_dirs;  // where sandbox.yaml is looked for, in order
};

// Computes the paths for a binary at `exe` (tests pass their own; `source_dir` is the source
// tree compiled in, `install_prefix` the configured CMAKE_INSTALL_PREFIX).
InstallPaths compute_install_paths(const std::filesystem::path& exe, const std::filesystem::path& source_dir,
                                   const std::filesystem::path& install_prefix);

// The paths of this process (from /proc/self/exe), computed once.
const InstallPaths& install_paths();

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
