#include "audit/line_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandboxrun/error.hpp"

namespace sandboxrun::audit {

LineReader::LineReader(const std::filesystem::path& file, uint64_t start) : file_(file), base_(start) {
  owned_ = UniqueFd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!owned_) throw_errno("cannot open " + file.string());
  fd_ = owned_.get();
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  size_ = 4 * kMaxRecordBytes;
  buf_ = std::make_unique_for_overwrite<char[]>(size_);
}

LineReader::LineReader(int fd, const std::filesystem::path& what, uint64_t start, size_t buffer)
    : file_(what), fd_(fd), size_(buffer), base_(start) {
  buf_ = std::make_unique_for_overwrite<char[]>(size_);
}

LineReader::Status LineReader::next(std::string_view& line) {
  for (;;) {
    const char* b = buf_.get() + begin_;
    size_t avail = end_ - begin_;
    if (const void* nl = std::memchr(b, '\n', avail)) {
      size_t len = static_cast<size_t>(static_cast<const char*>(nl) - b);
      line = std::string_view(b, len);
      take(len + 1);
      return Status::line;
    }
    if (eof_) {
      if (avail == 0) return Status::eof;
      line = std::string_view(b, avail);
      take(avail);
      return Status::torn;
    }
    if (avail >= size_ || avail > kMaxRecordBytes) {
      line = std::string_view(b, std::min<size_t>(avail, 256));
      take(avail);
      eof_ = true;  // nothing after an unbounded line can be trusted to be aligned
      return Status::too_long;
    }
    fill();
  }
}

void LineReader::take(size_t n) {
  line_offset_ = base_ + begin_;
  ++line_no_;
  begin_ += n;
}

void LineReader::fill() {
  if (begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    base_ += begin_;
    end_ -= begin_;
    begin_ = 0;
  }
  for (;;) {
    ssize_t n = ::pread(fd_, buf_.get() + end_, size_ - end_, static_cast<off_t>(base_ + end_));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read " + file_.string());
    }
    if (n == 0) eof_ = true;
    end_ += static_cast<size_t>(n);
    return;
  }
}

}  // namespace sandboxrun::audit
