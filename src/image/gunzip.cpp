#include "gunzip.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "sandboxrun/error.hpp"

namespace sandboxrun::image::detail {

namespace {
constexpr size_t out_chunk = 64 << 10;  // as libarchive: limits are checked per chunk
constexpr int gzip_only_window = 16 + MAX_WBITS;  // gzip framing, no zlib or raw deflate
}  // namespace

Gunzip::Gunzip(const ByteSource& source, const std::string& label)
    : source_(source), label_(label), out_(out_chunk) {
  if (inflateInit2(&z_, gzip_only_window) != Z_OK) throw Error("zlib: out of memory");
}

Gunzip::~Gunzip() { inflateEnd(&z_); }

void Gunzip::fail(const std::string& why, const char* hint) const {
  throw Error("layer " + label_ + ": " + why,
              hint ? hint
                   : "the blob is damaged (its digest was computed over the damaged bytes); "
                     "rebuild or fetch the image again");
}

void Gunzip::start_member() {
  if (members_ > 0 && inflateReset(&z_) != Z_OK) fail("zlib cannot start the next gzip member");
  header_ = {};
  // Lets us tell a bad header of a later member (trailing garbage) from corrupt deflate data.
  if (inflateGetHeader(&z_, &header_) != Z_OK) fail("zlib cannot read the gzip header");
  in_member_ = true;
}

std::span<const std::byte> Gunzip::next() {
  while (!done_) {
    if (z_.avail_in == 0 && pending_.empty()) {
      pending_ = source_();
      if (pending_.empty()) {
        if (in_member_ && members_ > 0 && header_.done != 1)
          fail("trailing garbage after gzip member " + std::to_string(members_));
        if (in_member_) fail("corrupt or truncated gzip stream (its last member ends early)");
        if (members_ == 0) fail("the gzip stream is empty");
        done_ = true;
        break;
      }
    }
    if (z_.avail_in == 0) {
      const size_t n = std::min<size_t>(pending_.size(), UINT_MAX);
      // zlib's API is not const-correct; it never writes through next_in.
      z_.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(pending_.data()));
      z_.avail_in = static_cast<uInt>(n);
      pending_ = pending_.subspan(n);
    }
    if (!in_member_) start_member();
    z_.next_out = reinterpret_cast<Bytef*>(out_.data());
    z_.avail_out = static_cast<uInt>(out_.size());
    const int r = inflate(&z_, Z_NO_FLUSH);
    const size_t produced = out_.size() - z_.avail_out;
    switch (r) {
      case Z_STREAM_END:
        in_member_ = false;
        ++members_;
        break;
      case Z_OK:
      case Z_BUF_ERROR:  // no progress possible without more input
        break;
      case Z_DATA_ERROR: {
        const std::string msg = z_.msg ? z_.msg : "invalid data";
        if (members_ == 0 && header_.done != 1)
          fail("the blob is not gzip as its media type says",
               "the image manifest and the blob disagree; fetch the image again");
        if (members_ > 0 && header_.done != 1)
          fail("trailing garbage after gzip member " + std::to_string(members_) + " (" + msg + ")");
        if (msg == "incorrect data check")
          fail("the gzip CRC32 trailer does not match the decompressed data");
        if (msg == "incorrect length check")
          fail("the gzip length trailer does not match the decompressed data");
        fail("corrupt or truncated gzip stream: " + msg);
      }
      case Z_MEM_ERROR: throw Error("zlib: out of memory inflating layer " + label_);
      default: fail("zlib error " + std::to_string(r) + " inflating the gzip stream");
    }
    if (produced > 0) return {out_.data(), produced};
  }
  return {};
}

}  // namespace sandboxrun::image::detail
