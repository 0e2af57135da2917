// Applying OCI layer tarballs onto a directory, confined to it: every filesystem operation is
// relative to a directory fd resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "image/image.hpp"
#include "image/image_oci.hpp"

namespace sandboxrun::image {

// Yields the next chunk of a (compressed) layer stream; an empty span at the end. The span stays
// valid until the next call. Throws on read errors.
using ByteSource = std::function<std::span<const std::byte>()>;

class RootfsWriter {
 public:
  // root: a directory fd (O_PATH is enough) of the directory to fill. Ownership from the image
  // is kept only when running as root.
  RootfsWriter(int root, const UnpackOptions& options);
  ~RootfsWriter();
  RootfsWriter(const RootfsWriter&) = delete;
  RootfsWriter& operator=(const RootfsWriter&) = delete;

  // Applies one layer read from `source`, compressed as `compression` (checked against the
  // stream's magic). `label` names the layer in errors (its digest). Returns the digest of the
  // uncompressed stream, in `diff_algorithm`, for the caller to compare with the diff_id.
  // Hostile entries, corrupt or truncated streams and exceeded limits throw Error.
  Digest apply_layer(const ByteSource& source, Compression compression, const std::string& label,
                     std::string_view diff_algorithm = "sha256");

  // Sets the directory modes, owners and times deferred while layers were applied (so that
  // read-only directories can still be filled by later layers). Call once, after the last layer.
  void finish();

  const UnpackStats& stats() const { return stats_; }

 private:
  struct DirMeta {
    uint32_t mode;
    uint32_t uid;
    uint32_t gid;
    int64_t mtime_sec;
    int64_t mtime_nsec;
  };
  struct LayerState;

  int root_;
  UnpackOptions options_;
  bool keep_owner_;
  uint64_t stream_bytes_ = 0;  // uncompressed bytes over all layers
  UnpackStats stats_;
  std::map<std::string, DirMeta> dirs_;  // by path relative to root; "" is the root itself

  friend struct LayerState;
};

}  // namespace sandboxrun::image
