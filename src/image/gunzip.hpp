// gzip layer streams inflated with zlib, every member's CRC32 and length trailer checked.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "sandboxrun/image_layer.hpp"

namespace sandboxrun::image::detail {

// libarchive's gzip filter neither checks the CRC32/ISIZE trailer nor refuses bytes after the
// last member, so a layer whose blob digest was computed over corrupt bytes would be applied.
// This source decompresses like Go's compress/gzip (which Docker uses): concatenated members
// are one stream; a bad trailer, a truncated member or anything after the last member throws
// Error naming the layer.
class Gunzip {
 public:
  Gunzip(const ByteSource& source, const std::string& label);
  ~Gunzip();
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;

  // The next chunk of decompressed bytes; empty at the end of the stream.
  std::span<const std::byte> next();

 private:
  [[noreturn]] void fail(const std::string& why, const char* hint = nullptr) const;
  void start_member();

  const ByteSource& source_;
  const std::string& label_;
  z_stream z_{};
  gz_header header_{};
  std::span<const std::byte> pending_;  // input not yet handed to zlib
  std::vector<std::byte> out_;
  bool in_member_ = false;
  bool done_ = false;
  unsigned members_ = 0;
};

}  // namespace sandboxrun::image::detail
