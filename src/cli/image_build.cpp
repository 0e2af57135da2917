// `sandboxrun image build-default [--rebuild]`: builds the default image (Debian bookworm +
// python3, from Debian packages with mmdebstrap) into the installation's image store, with the
// same script a checkout uses.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/install_paths.hpp"

namespace sandboxrun::cli {

int image_build_default(const std::vector<std::string>& args) {
  const InstallPaths& ip = install_paths();
  // Installed: P/share/sandboxrun/build-image.sh; in a checkout: scripts/build-image.sh.
  const std::filesystem::path script =
      ip.prefix.empty() ? ip.data_dir / "scripts/build-image.sh" : ip.data_dir / "build-image.sh";
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find this binary (/proc/self/exe)", "is /proc mounted?", ec.value());
  if (const char* s = std::getenv("SANDBOXRUN_IMAGE_STORE"); !s || !*s)
    ::setenv("SANDBOXRUN_IMAGE_STORE", ip.state_dir.c_str(), 1);
  ::setenv("SANDBOXRUN", self.c_str(), 1);
  std::filesystem::create_directories(std::getenv("SANDBOXRUN_IMAGE_STORE"), ec);
  std::vector<std::string> argv_storage{script.string()};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(script.c_str(), argv.data());
  log::error("cannot run {}: {}", script.string(), std::strerror(errno));
  return exit_code::setup_failed;
}

}  // namespace sandboxrun::cli
