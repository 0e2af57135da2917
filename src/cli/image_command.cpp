// `sandboxrun image unpack|ls|rm` (and build-default: image_build.cpp).
#include <stdio.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>

#include "cli.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/image.hpp"
#include "sandboxrun/install_paths.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli {

namespace fs = std::filesystem;

namespace {

bool looks_like_digest(const std::string& s) {
  std::string hex = s;
  if (s.starts_with("sha256:") || s.starts_with("sha256-") || s.starts_with("sha512:") ||
      s.starts_with("sha512-"))
    hex = s.substr(7);
  return hex.size() >= 12 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

int do_unpack(const std::string& ref_text, const std::string& dest, bool force) {
  const auto start = std::chrono::steady_clock::now();
  image::UnpackOptions options;
  options.replace = force;
  const image::ImageRef ref = image::parse_image_ref(ref_text);
  const image::UnpackResult r = image::unpack_image(ref, dest, options);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("unpacked %s (%s) into %s: %llu layers, %llu entries, %llu files, %s in %.2f s\n",
         ref.str().c_str(), r.manifest_digest.c_str(), dest.c_str(),
         static_cast<unsigned long long>(r.stats.layers),
         static_cast<unsigned long long>(r.stats.entries),
         static_cast<unsigned long long>(r.stats.files), format_size(r.stats.bytes).c_str(), secs);
  if (geteuid() != 0)
    printf("not running as root: the files belong to uid %u, not to the image's owners\n", geteuid());
  if (r.stats.skipped_devices)
    printf("skipped %llu device nodes, fifos or sockets\n",
           static_cast<unsigned long long>(r.stats.skipped_devices));
  return 0;
}

// Bytes of regular files under dir, not following symlinks.
uint64_t tree_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2) && !it->is_symlink(e2)) total += it->file_size(e2);
  }
  return total;
}

// The images `--image NAME` finds: STORE/rootfs/NAME (digest from STORE/rootfs/.NAME.digest)
// and STORE/images/NAME layouts, in the stores run resolves names in.
void print_named() {
  std::vector<fs::path> stores;
  if (const char* s = std::getenv("SANDBOXRUN_IMAGE_STORE"); s && *s) stores.emplace_back(s);
  stores.push_back(install_paths().state_dir);
  printf("%-12s  %-19s  %10s  %10s  %s\n", "NAME", "DIGEST", "UNPACKED", "LAYOUT", "STORE");
  std::error_code ec;
  for (const auto& store : stores) {
    std::vector<std::string> names;
    for (const char* sub : {"rootfs", "images"})
      for (const auto& de : fs::directory_iterator(store / sub, ec))
        if (de.is_directory() && de.path().filename().string()[0] != '.') names.push_back(de.path().filename().string());
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const auto& n : names) {
      std::string digest = "-";
      try {
        digest = read_file((store / "rootfs" / ("." + n + ".digest")).string());
        while (!digest.empty() && std::isspace(static_cast<unsigned char>(digest.back()))) digest.pop_back();
      } catch (const Error&) {
      }
      const bool unpacked = fs::exists(store / "rootfs" / n / "usr", ec);
      const bool layout = fs::exists(store / "images" / n / "oci-layout", ec);
      printf("%-12s  %-19s  %10s  %10s  %s\n", n.c_str(), digest.substr(0, 19).c_str(),
             unpacked ? format_size(tree_bytes(store / "rootfs" / n)).c_str() : "-",
             layout ? format_size(tree_bytes(store / "images" / n)).c_str() : "-", store.c_str());
    }
  }
  printf("\n");
}

int do_ls(const fs::path& cache) {
  print_named();
  const auto images = image::list_cached_images(cache);
  printf("%-19s  %-20s  %10s  %s\n", "DIGEST", "UNPACKED", "SIZE", "SOURCE");
  for (const auto& img : images)
    printf("%-19s  %-20s  %10s  %s\n", img.manifest_digest.substr(0, 19).c_str(),
           img.unpacked_at.c_str(), format_size(img.bytes).c_str(), img.source.c_str());
  return 0;
}

int do_rm(const fs::path& cache, const std::string& what) {
  std::string digest = what;
  // A digest unless it names an existing layout directory.
  std::error_code ec;
  const image::ImageRef ref = image::parse_image_ref(what);
  if (!looks_like_digest(what) || fs::is_directory(ref.layout, ec)) digest = image::manifest_digest(ref);
  printf("removed %s\n", image::remove_cached_image(cache, digest).c_str());
  return 0;
}

}  // namespace

int image_command(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "build-default") return image_build_default({args.begin() + 1, args.end()});
  CLI::App app{"Unpack OCI image layouts and manage the image cache", "sandboxrun image"};
  app.require_subcommand(1, 1);

  std::string ref_text;
  std::string dest;
  bool force = false;
  auto* unpack = app.add_subcommand("unpack", "Unpack an OCI image layout into a rootfs directory");
  unpack->add_option("image", ref_text, "OCI image layout directory, optionally :TAG")
      ->required()
      ->type_name("LAYOUT[:TAG]");
  unpack->add_option("dest", dest, "Directory to create (must not exist, or be empty)")
      ->required()
      ->type_name("DEST");
  unpack->add_flag("--force", force, "Replace DEST atomically if it exists");

  std::string cache;
  auto* ls = app.add_subcommand("ls", "List the images in the cache");
  ls->add_option("--cache", cache, "Cache directory (default: per-user or /var/lib/sandboxrun/images)");

  // Run above, before this parser (it execs scripts/build-image.sh); listed here for --help.
  auto* build = app.add_subcommand("build-default",
                                   "Build the default image (or `science`) from Debian packages with mmdebstrap: "
                                   "build-default [--rebuild] [default|science]");
  build->allow_extras();

  std::string target;
  auto* rm = app.add_subcommand("rm", "Remove an image from the cache");
  rm->add_option("--cache", cache, "Cache directory (default: per-user or /var/lib/sandboxrun/images)");
  rm->add_option("image", target, "Manifest digest (sha256:..., 12+ hex digits) or LAYOUT[:TAG]")
      ->required()
      ->type_name("DIGEST|LAYOUT[:TAG]");

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : exit_code::usage;
  }

  const std::string sub = app.get_subcommands().front()->get_name();
  try {
    if (unpack->parsed()) return do_unpack(ref_text, dest, force);
    const fs::path cache_dir = cache.empty() ? image::default_cache_dir() : fs::path(cache);
    if (ls->parsed()) return do_ls(cache_dir);
    return do_rm(cache_dir, target);
  } catch (const Error& e) {
    fprintf(stderr, "sandboxrun image %s: %s\n", sub.c_str(), e.describe().c_str());
  } catch (const std::exception& e) {
    fprintf(stderr, "sandboxrun image %s: %s\n", sub.c_str(), e.what());
  }
  return 1;
}

}  // namespace sandboxrun::cli
