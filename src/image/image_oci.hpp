// OCI image layout, index, manifest and config parsing, and digest-verified blob access.
// Media types per the OCI image-spec; Docker's v2 manifest list/manifest types are accepted too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sandboxrun/fd.hpp"
#include "image/image.hpp"

namespace sandboxrun::image {

namespace media_type {
inline constexpr std::string_view oci_index = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view oci_manifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view oci_config = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view oci_layer = "application/vnd.oci.image.layer.v1.tar";
inline constexpr std::string_view oci_layer_gzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr std::string_view oci_layer_zstd = "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr std::string_view docker_list =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view docker_manifest =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view docker_config = "application/vnd.docker.container.image.v1+json";
inline constexpr std::string_view docker_layer_gzip =
    "application/vnd.docker.image.rootfs.diff.tar.gzip";
}  // namespace media_type

inline constexpr std::string_view ref_name_annotation = "org.opencontainers.image.ref.name";

// Largest index/manifest/config document accepted (the image-spec suggests 4 MiB).
inline constexpr uint64_t max_document_bytes = 4 << 20;

// "sha256:<64 hex>" or "sha512:<128 hex>", lower-case hex.
struct Digest {
  std::string algorithm;
  std::string hex;

  // Throws Error naming `what` when text is not a digest of a supported algorithm.
  static Digest parse(std::string_view text, std::string_view what = "digest");
  std::string str() const { return algorithm + ":" + hex; }
  // "<alg>-<hex>": safe as one path component (no ':' for mount option strings).
  std::string dirname() const { return algorithm + "-" + hex; }
  bool operator==(const Digest&) const = default;
};

// Streaming hash (OpenSSL EVP) for a digest algorithm ("sha256", "sha512").
class Hasher {
 public:
  explicit Hasher(std::string_view algorithm);
  ~Hasher();
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void update(const void* data, size_t len);
  // The digest of everything hashed; the hasher may not be updated afterwards.
  Digest finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct Platform {
  std::string os;
  std::string architecture;
  std::string variant;
};

struct Descriptor {
  std::string media_type;
  Digest digest;
  uint64_t size = 0;
  std::map<std::string, std::string> annotations;
  Platform platform;
};

enum class Compression { none, gzip, zstd };
const char* to_string(Compression c);
// The compression of a layer media type; throws Error for types that are not layers.
Compression layer_compression(std::string_view media_type);

struct Layer {
  Descriptor blob;
  Compression compression = Compression::none;
  Digest diff_id;  // digest of the uncompressed tar stream, from the config
};

struct Manifest {
  Descriptor config;
  std::vector<Descriptor> layers;
};

// Pure parsers over verified document bytes; `what` names the document in errors.
// The index parser accepts OCI indexes and Docker manifest lists.
std::vector<Descriptor> parse_index(std::string_view json, const std::string& what);
Manifest parse_manifest(std::string_view json, const std::string& what);
// Fills config and returns the diff_ids of the config's rootfs.
std::vector<Digest> parse_config(std::string_view json, const std::string& what, ImageConfig& config);

// An OCI image layout directory (oci-layout, index.json, blobs/<alg>/<hex>).
class Layout {
 public:
  // Opens the directory and checks its oci-layout file; throws Error.
  explicit Layout(const std::filesystem::path& dir);

  const std::filesystem::path& path() const { return path_; }
  std::vector<Descriptor> index() const;

  // The whole blob, verified against d's size (at most max_size) and digest.
  std::string read_blob(const Descriptor& d, uint64_t max_size = max_document_bytes) const;
  // The blob file, opened beneath the layout (no symlink out of it), a regular file of exactly
  // d.size bytes. The caller hashes what it reads.
  UniqueFd open_blob(const Descriptor& d) const;
  // Reads the whole blob once and checks its digest: a cheap pass before the blob is parsed.
  void verify_blob(const Descriptor& d) const;

 private:
  std::filesystem::path path_;
  UniqueFd dir_;
};

// A manifest chosen from a layout, with its layers and config.
struct ResolvedImage {
  Descriptor manifest;
  std::vector<Layer> layers;
  ImageConfig config;
  std::string config_json;
};

// index.json -> manifest (by tag; nested indexes by this host's platform) -> config.
ResolvedImage resolve_image(const Layout& layout, const std::string& tag);

// This host's OCI architecture name ("amd64", "arm64", ...).
std::string host_architecture();

}  // namespace sandboxrun::image
