#include "common/install_paths.hpp"

#include <unistd.h>

#include <cstdlib>

#include "sandboxrun/error.hpp"

extern "C" const char* sandboxrun_install_prefix();  // install_prefix.cpp

namespace sandboxrun {

namespace {

bool is_dir(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}

// The FHS convention for prefix /usr (what a .deb installs): configuration in /etc and state in
// /var; any other prefix keeps everything below it.
InstallPaths for_prefix(const std::filesystem::path& prefix) {
  InstallPaths p;
  p.prefix = prefix;
  p.data_dir = prefix / "share/sandboxrun";
  const bool system = prefix == "/usr";
  p.state_dir = system ? std::filesystem::path("/var/lib/sandboxrun") : prefix / "var/lib/sandboxrun";
  p.config_dirs = {"/etc/sandboxrun"};
  if (!system) p.config_dirs.push_back(prefix / "etc/sandboxrun");
  return p;
}

}  // namespace

InstallPaths compute_install_paths(const std::filesystem::path& exe, const std::filesystem::path& source_dir,
                                   const std::filesystem::path& install_prefix) {
  const std::filesystem::path exe_dir = exe.parent_path();
  // An installed binary: P/bin/sandboxrun, or the MCP-over-HTTP helper in P/libexec/sandboxrun/,
  // with P/share/sandboxrun.
  const bool helper = exe_dir.filename() == "sandboxrun" && exe_dir.parent_path().filename() == "libexec";
  const std::filesystem::path prefix = helper ? exe_dir.parent_path().parent_path() : exe_dir.parent_path();
  if (!exe.empty() && is_dir(prefix / "share/sandboxrun")) return for_prefix(prefix.lexically_normal());
  // A binary inside the source tree (build/, build-asan/, the tests): the tree is its data.
  const std::string src = source_dir.lexically_normal().string();
  if (!src.empty() && exe.lexically_normal().string().rfind(src + "/", 0) == 0 && is_dir(source_dir / "policies")) {
    InstallPaths p;
    p.data_dir = source_dir;
    p.state_dir = source_dir;
    p.config_dirs = {"/etc/sandboxrun", source_dir / "config"};
    return p;
  }
  // A service that links the library from somewhere else: the configured prefix.
  return for_prefix(install_prefix);
}

const InstallPaths& install_paths() {
  static const InstallPaths paths = [] {
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return compute_install_paths(ec ? std::filesystem::path() : exe, SANDBOXRUN_SOURCE_DIR, sandboxrun_install_prefix());
  }();
  return paths;
}

std::filesystem::path default_cache_root() {
  if (const char* env = std::getenv("SANDBOXRUN_CACHE_DIR"); env && *env) return env;
  if (::geteuid() == 0) return "/var/cache/sandboxrun";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::filesystem::path(xdg) / "sandboxrun";
  const char* home = std::getenv("HOME");
  return home && *home == '/' ? std::filesystem::path(home) / ".cache/sandboxrun" : std::filesystem::path();
}

std::optional<std::filesystem::path> parsed_cache_dir() {
  if (const char* env = std::getenv("SANDBOXRUN_CACHE_DIR"); env && *env == '\0') return std::nullopt;
  std::filesystem::path root = default_cache_root();
  if (root.empty()) return std::nullopt;
  return root;
}

std::filesystem::path find_data_file(const std::filesystem::path& rel, const std::filesystem::path& beside_dir,
                                     const std::string& what) {
  if (rel.is_absolute()) return rel.lexically_normal();
  std::vector<std::filesystem::path> tried{(beside_dir / rel).lexically_normal()};
  const auto& data = install_paths().data_dir;
  if (!data.empty()) tried.push_back((data / rel).lexically_normal());
  std::error_code ec;
  for (const auto& p : tried)
    if (std::filesystem::exists(p, ec)) return p;
  std::string list;
  for (const auto& p : tried) list += (list.empty() ? "" : ", ") + p.string();
  throw Error("no " + what + " '" + rel.string() + "' (looked at " + list + ")",
              "install sandboxrun's data files (cmake --install) or give an absolute path");
}

}  // namespace sandboxrun
