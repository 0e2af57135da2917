// unpack_image: resolve the manifest, verify and apply every layer into a temporary directory
// beside DEST, check each diff_id, then rename the result into place.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "confined.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/image_layer.hpp"
#include "sandboxrun/image_oci.hpp"
#include "unpack.hpp"

namespace sandboxrun::image {

namespace fs = std::filesystem;

std::string ImageRef::str() const {
  return tag.empty() ? layout.string() : layout.string() + ":" + tag;
}

ImageRef parse_image_ref(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    const std::string before = text.substr(0, colon);
    const std::string after = text.substr(colon + 1);
    std::error_code ec;
    if (!after.empty() && after.find('/') == std::string::npos && fs::is_directory(before, ec))
      return ImageRef{before, after};
  }
  return ImageRef{text, {}};
}

namespace {

// The layer blob as a ByteSource, hashing every byte handed out so that what was decompressed is
// exactly what was verified, even if the file changed after the first verification pass.
class VerifiedBlobReader {
 public:
  VerifiedBlobReader(UniqueFd fd, const Descriptor& d, std::string what)
      : fd_(std::move(fd)), desc_(d), what_(std::move(what)), hash_(d.digest.algorithm),
        buf_(1 << 20) {}

  std::span<const std::byte> next() {
    while (true) {
      const ssize_t n = read(fd_.get(), buf_.data(), buf_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno("cannot read " + what_);
      total_ += static_cast<uint64_t>(n);
      if (total_ > desc_.size) throw Error(what_ + " grew while it was unpacked");
      hash_.update(buf_.data(), static_cast<size_t>(n));
      return {buf_.data(), static_cast<size_t>(n)};
    }
  }

  void check() {
    if (total_ != desc_.size || hash_.finish() != desc_.digest)
      throw Error(what_ + " changed while it was unpacked", "do not modify a layout while it is in use");
  }

 private:
  UniqueFd fd_;
  const Descriptor& desc_;
  std::string what_;
  Hasher hash_;
  std::vector<std::byte> buf_;
  uint64_t total_ = 0;
};

// dest may be absent or an empty directory (rename(2) replaces an empty directory).
bool dest_is_free(const fs::path& dest) {
  struct stat st {};
  if (lstat(dest.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    throw_errno("cannot stat " + dest.string());
  }
  if (!S_ISDIR(st.st_mode)) return false;
  std::error_code ec;
  return fs::is_empty(dest, ec) && !ec;
}

}  // namespace

UnpackResult unpack_resolved(const Layout& layout, const ResolvedImage& image, const fs::path& dest,
                             const UnpackOptions& options) {
  if (dest.empty() || dest.filename().empty())
    throw Error("unpack destination '" + dest.string() + "' must name a directory");
  const bool replacing = !dest_is_free(dest);
  if (replacing && !options.replace)
    throw Error(dest.string() + " already exists and is not empty",
                "remove it first, or pick another destination");

  if (dest.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(dest.parent_path(), ec);  // a failure shows in TempDir's message
  }
  detail::TempDir tmp(dest);
  UniqueFd root(open(tmp.path().c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) throw_errno("cannot open " + tmp.path().string());

  RootfsWriter writer(root.get(), options);
  for (size_t i = 0; i < image.layers.size(); ++i) {
    const Layer& layer = image.layers[i];
    const std::string label = layer.blob.digest.str();
    const std::string what = "image layout " + layout.path().string() + ": layer " + label;
    // First pass: a blob is never parsed before its digest is known to match.
    layout.verify_blob(layer.blob);
    VerifiedBlobReader reader(layout.open_blob(layer.blob), layer.blob, what);
    const Digest diff = writer.apply_layer([&reader] { return reader.next(); }, layer.compression,
                                           label, layer.diff_id.algorithm);
    reader.check();
    if (diff != layer.diff_id)
      throw Error(what + ": its uncompressed content hashes to " + diff.str() +
                      " but the config's diff_id is " + layer.diff_id.str(),
                  "the image is corrupt; fetch it again");
  }
  writer.finish();
  root.reset();

  if (replacing) {
    // Swap atomically, then remove the old tree (now at the temporary path).
    if (renameat2(AT_FDCWD, tmp.path().c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) != 0)
      throw_errno("cannot replace " + dest.string());
  } else if (rename(tmp.path().c_str(), dest.c_str()) != 0) {
    throw_errno("cannot move the unpacked image to " + dest.string());
  }
  if (!replacing) tmp.release();

  UnpackResult result;
  result.manifest_digest = image.manifest.digest.str();
  result.config = image.config;
  result.stats = writer.stats();
  return result;
}

UnpackResult unpack_image(const ImageRef& ref, const fs::path& dest, const UnpackOptions& options) {
  const Layout layout(ref.layout);
  const ResolvedImage image = resolve_image(layout, ref.tag);
  return unpack_resolved(layout, image, dest, options);
}

}  // namespace sandboxrun::image
