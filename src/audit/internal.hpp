// Helpers shared by the audit writer, verifier and commands (not part of the public API).
#pragma once

#include <sys/types.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "sandboxrun/audit.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::audit {

// Exclusive flock on an fd for the lifetime of the object.
class FileLock {
 public:
  explicit FileLock(int fd, const std::filesystem::path& what);
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_;
};

// Sibling paths of a log file (objects_dir and anchor_path: sandboxrun/audit.hpp).
std::filesystem::path lock_path(const std::filesystem::path& log);     // <log>.lock
std::filesystem::path rotated_path(const std::filesystem::path& log, uint64_t last_seq);

// The last line of a file, found by reading backwards from the end (O(record size)).
struct LastLine {
  std::string line;     // without the newline; empty when the file is empty
  uint64_t offset = 0;  // where it starts
  bool torn = false;    // the file does not end with '\n': `line` is the torn tail
};
LastLine read_last_line(int fd, uint64_t size, const std::filesystem::path& what);
// The first line (for the age of a file); empty when none is complete.
std::string read_first_line(int fd, const std::filesystem::path& what);

// "2024-05-01T12:34:56.123456Z"
std::string rfc3339_now();
inline constexpr size_t kRfc3339Len = 27;
// Writes the kRfc3339Len bytes of rfc3339_now()'s form for `ts` (CLOCK_REALTIME) to `out`.
void format_rfc3339(const timespec& ts, char* out);
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view ts);

// Every file the audit log writes or reads back is opened through safe_open.hpp: no symlink is
// followed anywhere in its path, and no directory on the way may be writable by other users
// (the log is often written by root in a directory chosen on the command line).
// Opens `path` for appending, creating it 0600.
UniqueFd open_append(const std::filesystem::path& path);
// Creates `dir` and missing parents (the last component 0700); returns it opened.
UniqueFd ensure_private_dir(const std::filesystem::path& dir);
void fsync_dir(const std::filesystem::path& dir);

}  // namespace sandboxrun::audit
