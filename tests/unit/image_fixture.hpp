// Test support for the image module: tar layers written with libarchive, OCI layouts built from
// them, temporary directories, and a snapshot of a directory tree for comparisons.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "image/image_layer.hpp"
#include "image/image_oci.hpp"
#include "test_util.hpp"

namespace image_test {

namespace fs = std::filesystem;
using sandboxrun::image::Compression;
using sandboxrun::image::Hasher;
using test_util::put;
using test_util::slurp;
using test_util::TempDir;

struct Entry {
  enum Type { file, dir, symlink, hardlink, chardev, fifo };
  std::string name;
  Type type = file;
  std::string data;  // file content, or symlink/hardlink target
  unsigned mode = 0;  // 0: 0644 for files, 0755 for directories, 0777 for symlinks
  int64_t uid = 0;
  int64_t gid = 0;
  int64_t mtime = 1'700'000'000;
};

inline Entry F(std::string name, std::string data, unsigned mode = 0644) {
  return {std::move(name), Entry::file, std::move(data), mode};
}
inline Entry D(std::string name, unsigned mode = 0755) { return {std::move(name), Entry::dir, {}, mode}; }
inline Entry L(std::string name, std::string target) {
  return {std::move(name), Entry::symlink, std::move(target), 0777};
}
inline Entry H(std::string name, std::string target) {
  return {std::move(name), Entry::hardlink, std::move(target), 0644};
}

struct WriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};

// An uncompressed tar stream (pax by default, or GNU).
inline std::string make_tar(const std::vector<Entry>& entries, bool gnu = false) {
  std::unique_ptr<archive, WriteFree> a(archive_write_new());
  if (gnu)
    archive_write_set_format_gnutar(a.get());
  else
    archive_write_set_format_pax_restricted(a.get());
  std::vector<char> buf(64 << 20);
  size_t used = 0;
  EXPECT_EQ(archive_write_open_memory(a.get(), buf.data(), buf.size(), &used), ARCHIVE_OK);
  for (const auto& e : entries) {
    archive_entry* ae = archive_entry_new();
    archive_entry_copy_pathname(ae, e.name.c_str());
    archive_entry_set_uid(ae, e.uid);
    archive_entry_set_gid(ae, e.gid);
    archive_entry_set_mtime(ae, e.mtime, 0);
    switch (e.type) {
      case Entry::file:
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_perm(ae, e.mode ? e.mode : 0644);
        archive_entry_set_size(ae, static_cast<la_int64_t>(e.data.size()));
        break;
      case Entry::dir:
        archive_entry_set_filetype(ae, AE_IFDIR);
        archive_entry_set_perm(ae, e.mode ? e.mode : 0755);
        break;
      case Entry::symlink:
        archive_entry_set_filetype(ae, AE_IFLNK);
        archive_entry_set_perm(ae, 0777);
        archive_entry_copy_symlink(ae, e.data.c_str());
        break;
      case Entry::hardlink:
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_perm(ae, e.mode ? e.mode : 0644);
        archive_entry_copy_hardlink(ae, e.data.c_str());
        archive_entry_set_size(ae, 0);
        break;
      case Entry::chardev:
        archive_entry_set_filetype(ae, AE_IFCHR);
        archive_entry_set_perm(ae, 0666);
        archive_entry_set_rdev(ae, makedev(1, 3));
        break;
      case Entry::fifo:
        archive_entry_set_filetype(ae, AE_IFIFO);
        archive_entry_set_perm(ae, 0644);
        break;
    }
    // ARCHIVE_WARN: a name that is not valid in the locale is stored as raw bytes.
    EXPECT_GE(archive_write_header(a.get(), ae), ARCHIVE_WARN) << archive_error_string(a.get());
    if (e.type == Entry::file && !e.data.empty()) {
      EXPECT_EQ(archive_write_data(a.get(), e.data.data(), e.data.size()),
                static_cast<la_ssize_t>(e.data.size()));
    }
    archive_entry_free(ae);
  }
  archive_write_close(a.get());
  return std::string(buf.data(), used);
}

// Compresses bytes with gzip or zstd (libarchive's raw format with a filter).
inline std::string compress(const std::string& data, Compression c) {
  if (c == Compression::none) return data;
  std::unique_ptr<archive, WriteFree> a(archive_write_new());
  archive_write_set_format_raw(a.get());
  if (c == Compression::gzip)
    archive_write_add_filter_gzip(a.get());
  else
    archive_write_add_filter_zstd(a.get());
  std::vector<char> buf(data.size() + (1 << 20));
  size_t used = 0;
  EXPECT_EQ(archive_write_open_memory(a.get(), buf.data(), buf.size(), &used), ARCHIVE_OK);
  archive_entry* ae = archive_entry_new();
  archive_entry_set_filetype(ae, AE_IFREG);
  archive_entry_set_pathname(ae, "data");
  archive_entry_set_size(ae, static_cast<la_int64_t>(data.size()));
  EXPECT_EQ(archive_write_header(a.get(), ae), ARCHIVE_OK);
  archive_write_data(a.get(), data.data(), data.size());
  archive_entry_free(ae);
  archive_write_close(a.get());
  return std::string(buf.data(), used);
}

inline std::string sha256(const std::string& data) {
  Hasher h("sha256");
  h.update(data.data(), data.size());
  return h.finish().str();
}

struct LayerSpec {
  std::string tar;  // uncompressed
  Compression compression = Compression::gzip;
};

inline const char* layer_media_type(Compression c) {
  switch (c) {
    case Compression::none: return "application/vnd.oci.image.layer.v1.tar";
    case Compression::gzip: return "application/vnd.oci.image.layer.v1.tar+gzip";
    case Compression::zstd: return "application/vnd.oci.image.layer.v1.tar+zstd";
  }
  return "";
}

// Builds an OCI image layout on disk.
class LayoutBuilder {
 public:
  explicit LayoutBuilder(fs::path dir) : dir_(std::move(dir)) {
    fs::create_directories(dir_ / "blobs" / "sha256");
    put(dir_ / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  }

  // Stores a blob and returns its descriptor JSON.
  nlohmann::json blob(const std::string& data, const std::string& media_type) {
    const std::string digest = sha256(data);
    put(dir_ / "blobs" / "sha256" / digest.substr(7), data);
    return {{"mediaType", media_type}, {"digest", digest}, {"size", data.size()}};
  }

  // Adds an image; returns its manifest descriptor (also listed in index.json under `tag`).
  nlohmann::json add_image(const std::vector<LayerSpec>& layers, const std::string& tag,
                           nlohmann::json config_overrides = nlohmann::json::object()) {
    nlohmann::json diff_ids = nlohmann::json::array();
    nlohmann::json layer_descs = nlohmann::json::array();
    for (const auto& l : layers) {
      diff_ids.push_back(sha256(l.tar));
      layer_descs.push_back(blob(compress(l.tar, l.compression), layer_media_type(l.compression)));
    }
    nlohmann::json config = {
        {"architecture", sandboxrun::image::host_architecture()},
        {"os", "linux"},
        {"config",
         {{"Env", {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}}, {"Cmd", {"python3"}}, {"WorkingDir", "/work"}}},
        {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
    config.merge_patch(config_overrides);
    const nlohmann::json manifest = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
        {"config", blob(config.dump(), "application/vnd.oci.image.config.v1+json")},
        {"layers", layer_descs}};
    nlohmann::json desc = blob(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
    if (!tag.empty()) desc["annotations"] = {{"org.opencontainers.image.ref.name", tag}};
    index_.push_back(desc);
    write_index();
    return desc;
  }

  void write_index() {
    const nlohmann::json index = {{"schemaVersion", 2},
                                  {"mediaType", "application/vnd.oci.image.index.v1+json"},
                                  {"manifests", index_}};
    put(dir_ / "index.json", index.dump());
  }

  nlohmann::json& index_entries() { return index_; }
  fs::path blob_path(const std::string& digest) const {
    return dir_ / "blobs" / "sha256" / digest.substr(7);
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
  nlohmann::json index_ = nlohmann::json::array();
};

// path -> "type mode uid:gid content-or-target [links=N]" for every entry below root.
inline std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st {};
    lstat(it->path().c_str(), &st);
    std::ostringstream s;
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    const std::string rel = it->path().lexically_relative(root).string();
    if (S_ISDIR(st.st_mode)) {
      s << "dir " << mode;
    } else if (S_ISLNK(st.st_mode)) {
      s << "symlink -> " << fs::read_symlink(it->path()).string();
    } else if (S_ISREG(st.st_mode)) {
      s << "file " << mode << " '" << slurp(it->path()) << "'";
      if (st.st_nlink > 1) s << " links=" << st.st_nlink;
    } else {
      s << "other";
    }
    if (st.st_uid || st.st_gid) s << " owner=" << st.st_uid << ":" << st.st_gid;
    out[rel] = s.str();
  }
  return out;
}

// Patches the size field of the first (ustar/GNU) header: a header that declares far more data
// than the stream holds.
inline std::string with_declared_size(std::string tar, uint64_t size) {
  char field[13];
  snprintf(field, sizeof field, "%011llo", static_cast<unsigned long long>(size));
  tar.replace(124, 11, field, 11);
  tar.replace(148, 8, "        ");
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += static_cast<unsigned char>(tar[i]);
  char chk[8];
  snprintf(chk, sizeof chk, "%06o", sum);
  tar.replace(148, 7, chk, 7);
  return tar;
}

// Applies layers directly with a RootfsWriter (no layout), as the unpacker does.
inline void apply_layers(const fs::path& dest, const std::vector<LayerSpec>& layers,
                         const sandboxrun::image::UnpackOptions& options = {}) {
  fs::create_directories(dest);
  sandboxrun::UniqueFd root(open(dest.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  sandboxrun::image::RootfsWriter w(root.get(), options);
  int n = 0;
  for (const auto& l : layers) {
    const std::string blob = compress(l.tar, l.compression);
    bool done = false;
    const auto diff = w.apply_layer(
        [&]() -> std::span<const std::byte> {
          if (done) return {};
          done = true;
          return {reinterpret_cast<const std::byte*>(blob.data()), blob.size()};
        },
        l.compression, "layer" + std::to_string(n++));
    EXPECT_EQ(diff.str(), sha256(l.tar));
  }
  w.finish();
}

// A layout with two images: "latest" (gzip, 300 files of 4 KiB: big enough that concurrent first
// uses really overlap) and "other" (zstd, one file "b"); a cache directory beside it.
class TwoImageLayout : public testing::Test {
 protected:
  void SetUp() override {
    layout_ = tmp_ / "layout";
    cache_ = tmp_ / "cache";
    LayoutBuilder b(layout_);
    std::vector<Entry> files;
    for (int i = 0; i < 300; ++i) files.push_back(F("f" + std::to_string(i), std::string(4096, 'x')));
    digest_ = b.add_image({{make_tar(files), Compression::gzip}}, "latest")["digest"];
    b.add_image({{make_tar({F("b", "b")}), Compression::zstd}}, "other");
  }

  TempDir tmp_;
  fs::path layout_, cache_;
  std::string digest_;
};

}  // namespace image_test
