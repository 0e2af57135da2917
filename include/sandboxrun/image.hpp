// OCI images: unpack an image layout into a rootfs directory, and keep unpacked images in a
// cache keyed by manifest digest. See docs/images.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sandboxrun::image {

// LAYOUT[:TAG]: an OCI image layout directory and an optional tag, matched against the
// index's org.opencontainers.image.ref.name annotation. An empty tag picks the only manifest.
struct ImageRef {
  std::filesystem::path layout;
  std::string tag;

  std::string str() const;  // "LAYOUT" or "LAYOUT:TAG", for messages
};

// Splits on the last ':' only when the part before it is an existing directory and the part
// after it contains no '/', so a layout path that itself contains ':' still works. Throws nothing.
ImageRef parse_image_ref(const std::string& text);

// The runtime defaults of an image (the "config" object of the OCI image config).
struct ImageConfig {
  std::vector<std::string> env;  // "KEY=VALUE", in image order
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;
  std::string os;
  std::string architecture;
};

// Limits against hostile or broken images. Exceeding one fails the unpack.
struct UnpackOptions {
  uint64_t max_unpacked_bytes = 32ull << 30;  // all layers' uncompressed streams together
  uint64_t max_entries = 4'000'000;           // tar entries over all layers
  bool replace = false;                       // replace an existing non-empty DEST atomically
};

struct UnpackStats {
  uint64_t layers = 0;
  uint64_t entries = 0;
  uint64_t files = 0;            // regular files written
  uint64_t bytes = 0;            // regular-file bytes written
  uint64_t skipped_devices = 0;  // device nodes, fifos and sockets skipped
};

struct UnpackResult {
  std::string manifest_digest;  // "sha256:<hex>"
  ImageConfig config;
  UnpackStats stats;
};

// Unpacks ref into dest. Works in a temporary directory beside dest that is renamed into place
// at the end and removed on any failure: dest is either complete or untouched. dest must not
// exist or be an empty directory, unless options.replace. Throws sandboxrun::Error.
// As root the image's uid/gid are kept; otherwise files belong to the caller.
UnpackResult unpack_image(const ImageRef& ref, const std::filesystem::path& dest,
                          const UnpackOptions& options = {});

// The digest ("sha256:<hex>") of the manifest `ref` picks in its layout (by tag; in a nested
// index by this host's platform). Throws Error when the layout, its index, the manifest or its
// config is unusable, or no manifest has the tag.
std::string manifest_digest(const ImageRef& ref);

// An image in the cache: cache_dir/<alg>-<hex>/rootfs.
struct CachedImage {
  std::string manifest_digest;  // "sha256:<hex>"
  std::filesystem::path rootfs;
  ImageConfig config;
  std::string source;      // the LAYOUT[:TAG] it was first unpacked from
  std::string unpacked_at; // UTC, ISO 8601
  uint64_t bytes = 0;      // regular-file bytes in the rootfs
};

// /var/lib/sandboxrun/images as root, else $XDG_CACHE_HOME/sandboxrun/images
// (~/.cache/sandboxrun/images). Throws Error when there is no home directory to tell.
std::filesystem::path default_cache_dir();

// Every complete cache entry, sorted by digest. A missing cache_dir is an empty cache. Throws
// Error (or std::filesystem::filesystem_error) when an entry or the directory cannot be read.
std::vector<CachedImage> list_cached_images(const std::filesystem::path& cache_dir);

// Removes the entry whose manifest digest is `digest`, or starts with it (at least 12 hex
// digits, with or without "sha256:"). Throws when nothing or more than one entry matches.
// Returns the full digest removed.
std::string remove_cached_image(const std::filesystem::path& cache_dir, const std::string& digest);

}  // namespace sandboxrun::image
