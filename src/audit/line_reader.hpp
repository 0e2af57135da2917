// Splits a file into lines with one fixed buffer, so memory does not grow with the file and a
// line longer than the buffer (damage: no record is that long) ends the reading instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <memory>

#include "audit/audit_format.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::audit {

class LineReader {
 public:
  enum class Status { line, torn, too_long, eof };

  // Opens `file` and reads it from `start` with a buffer that holds the longest record.
  LineReader(const std::filesystem::path& file, uint64_t start);
  // Reads the open `fd` (not owned) from `start`; `what` names it in errors. Lines longer than
  // `buffer` bytes are too long.
  LineReader(int fd, const std::filesystem::path& what, uint64_t start, size_t buffer);

  // The next line (without newline); offset() and line_no() describe it.
  Status next(std::string_view& line);

  uint64_t offset() const { return line_offset_; }
  uint64_t line_no() const { return line_no_; }

 private:
  void take(size_t n);
  void fill();

  std::filesystem::path file_;
  UniqueFd owned_;
  int fd_ = -1;
  // Not zeroed: only the part a read fills is ever touched (a claim reads a few new records).
  std::unique_ptr<char[]> buf_;
  size_t size_ = 0;
  size_t begin_ = 0, end_ = 0;
  uint64_t base_ = 0;  // file offset of buf_[0]
  uint64_t line_offset_ = 0, line_no_ = 0;
  bool eof_ = false;
};

}  // namespace sandboxrun::audit
