// Where this installation keeps its files, found from the running binary's location so that any
// prefix works (`cmake --install build --prefix P`, the .deb's /usr), with the source tree as the
// last resort for binaries run from a build directory inside it.
#pragma once

#include <filesystem>
#include <vector>

namespace sandboxrun {

struct InstallPaths {
  std::filesystem::path prefix;      // empty when running from the source tree
  std::filesystem::path data_dir;    // policies/, assess rules: P/share/sandboxrun or the source tree
  std::filesystem::path state_dir;   // image store: /var/lib/sandboxrun (prefix /usr), P/var/lib/sandboxrun,
                                     // or the source tree (images/, rootfs/)
  std::vector<std::filesystem::path> config_dirs;  // where sandbox.yaml is looked for, in order
};

// The paths of this process (from /proc/self/exe), computed once; throws nothing.
const InstallPaths& install_paths();

}  // namespace sandboxrun
