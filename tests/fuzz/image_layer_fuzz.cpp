// Fuzzes layer tar parsing and application: the input is a layer stream (gzip when it starts
// with gzip's magic, so the trailer checks are fuzzed too; else uncompressed) applied onto a
// fresh directory beside a canary. Errors are expected; anything written outside the
// destination, or any crash, is a finding.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <span>
#include <string>

#include "sandboxrun/error.hpp"
#include "image/image_layer.hpp"

namespace {

namespace fs = std::filesystem;

// Not named sandboxrun-*: the integration tests count /tmp/sandboxrun-* entries as a launcher's
// leftovers, and the corpus replay runs beside them. Removed when the process exits normally.
struct Arena {
  fs::path base;
  Arena() {
    std::string tmpl = (fs::temp_directory_path() / "image-layer-fuzz.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) abort();
    base = tmpl;
    fs::create_directories(base / "canary" / "inner");
  }
  ~Arena() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
};

// Everything below base except dest: must stay exactly {canary, canary/inner}.
void check_outside(const fs::path& base) {
  size_t n = 0;
  for (auto it = fs::recursive_directory_iterator(base); it != fs::recursive_directory_iterator(); ++it) {
    const auto rel = it->path().lexically_relative(base).string();
    if (rel == "dest") {
      it.disable_recursion_pending();
      continue;
    }
    if (rel != "canary" && rel != "canary/inner") {
      fprintf(stderr, "layer wrote outside its destination: %s\n", it->path().c_str());
      abort();
    }
    ++n;
  }
  if (n != 2) {
    fprintf(stderr, "the canary was modified\n");
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Arena arena;  // one per fuzzing process
  const fs::path dest = arena.base / "dest";
  fs::create_directory(dest);
  {
    sandboxrun::UniqueFd root(open(dest.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    sandboxrun::image::UnpackOptions options;
    options.max_unpacked_bytes = 64 << 20;
    options.max_entries = 10000;
    try {
      sandboxrun::image::RootfsWriter writer(root.get(), options);
      bool done = false;
      writer.apply_layer(
          [&]() -> std::span<const std::byte> {
            if (done) return {};
            done = true;
            return {reinterpret_cast<const std::byte*>(data), size};
          },
          size >= 2 && data[0] == 0x1f && data[1] == 0x8b ? sandboxrun::image::Compression::gzip
                                                          : sandboxrun::image::Compression::none,
          "fuzz");
      writer.finish();
    } catch (const sandboxrun::Error&) {
    }
  }
  check_outside(arena.base);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dest, ec); it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(dest, ec);
  return 0;
}
