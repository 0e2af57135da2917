#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>

#include "internal.hpp"
#include "audit/audit_format.hpp"
#include "sandboxrun/error.hpp"
#include "common/safe_open.hpp"

namespace sandboxrun::audit {

FileLock::FileLock(int fd, const std::filesystem::path& what) : fd_(fd) {
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) throw_errno("cannot lock " + what.string());
  }
}

FileLock::~FileLock() { ::flock(fd_, LOCK_UN); }

std::filesystem::path lock_path(const std::filesystem::path& log) {
  return std::filesystem::path(log.string() + ".lock");
}

std::filesystem::path objects_dir(const std::filesystem::path& log) {
  return log.parent_path() / "objects";
}

std::filesystem::path anchor_path(const AuditConfig& cfg, const std::filesystem::path& log) {
  // The configured anchor belongs to the configured log; any other log anchors beside itself.
  if (!cfg.anchor.empty()) {
    auto configured = cfg.path.empty() ? default_audit_log_path() : cfg.path;
    if (std::filesystem::absolute(configured) == std::filesystem::absolute(log)) return cfg.anchor;
  }
  return std::filesystem::path(log.string() + ".anchor");
}

std::filesystem::path rotated_path(const std::filesystem::path& log, uint64_t last_seq) {
  return std::filesystem::path(log.string() + "." + std::to_string(last_seq));
}

namespace {

constexpr size_t kChunk = 64 * 1024;
// A last line longer than this cannot be a record (nor a plausible torn one).
constexpr size_t kLineCap = 4 * kMaxRecordBytes;

void pread_exact(int fd, char* buf, size_t len, uint64_t off, const std::filesystem::path& what) {
  while (len > 0) {
    ssize_t n = ::pread(fd, buf, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read " + what.string());
    }
    if (n == 0) throw Error("unexpected end of " + what.string() + " (is it being truncated?)");
    buf += n;
    len -= static_cast<size_t>(n);
    off += static_cast<uint64_t>(n);
  }
}

}  // namespace

LastLine read_last_line(int fd, uint64_t size, const std::filesystem::path& what) {
  LastLine out;
  if (size == 0) return out;
  char last = 0;
  pread_exact(fd, &last, 1, size - 1, what);
  out.torn = last != '\n';
  uint64_t end = out.torn ? size : size - 1;
  uint64_t cur = end;
  std::string acc;  // bytes [cur, end)
  std::string chunk;
  // A record is a few KiB at most: reading 64 KiB each time would fault in a 64 KiB buffer (16
  // pages, ~40 us of every run's start on a VM) to find it. The reads grow up to kChunk.
  size_t want = 4096;
  while (cur > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(want, cur));
    want = std::min(want * 2, kChunk);
    chunk.resize(n);
    pread_exact(fd, chunk.data(), n, cur - n, what);
    size_t nl = chunk.rfind('\n');
    if (nl != std::string::npos) {
      out.line = chunk.substr(nl + 1) + acc;
      out.offset = cur - n + nl + 1;
      return out;
    }
    acc.insert(0, chunk);
    cur -= n;
    if (acc.size() > kLineCap)
      throw Error("the last line of " + what.string() + " is longer than " +
                      std::to_string(kLineCap) + " bytes",
                  "this is not an audit log, or it is damaged: run `sandboxrun audit verify`");
  }
  out.line = std::move(acc);
  out.offset = 0;
  return out;
}

std::string read_first_line(int fd, const std::filesystem::path& what) {
  std::string acc;
  char buf[4096];
  for (uint64_t off = 0;; off += sizeof buf) {
    ssize_t n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read " + what.string());
    }
    if (n == 0) return {};
    std::string_view chunk(buf, static_cast<size_t>(n));
    size_t nl = chunk.find('\n');
    if (nl != std::string_view::npos) return acc.append(chunk.substr(0, nl));
    acc.append(chunk);
    if (acc.size() > kLineCap) return {};
  }
}

void format_rfc3339(const timespec& ts, char* out) {
  // gmtime_r and the date digits once per second; the microseconds every time.
  thread_local time_t cached_sec = -1;
  thread_local char cached[kRfc3339Len];
  if (ts.tv_sec != cached_sec) {
    tm t{};
    ::gmtime_r(&ts.tv_sec, &t);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.000000Z", t.tm_year + 1900,
                  t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec);
    std::memcpy(cached, buf, kRfc3339Len);
    cached_sec = ts.tv_sec;
  }
  std::memcpy(out, cached, kRfc3339Len);
  auto us = static_cast<unsigned>(ts.tv_nsec / 1000);
  for (int i = 25; i >= 20; --i, us /= 10) out[i] = static_cast<char>('0' + us % 10);
}

std::string rfc3339_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  char buf[kRfc3339Len];
  format_rfc3339(ts, buf);
  return std::string(buf, kRfc3339Len);
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view ts) {
  // Exactly the form rfc3339_now() writes.
  if (ts.size() != 27 || ts[4] != '-' || ts[7] != '-' || ts[10] != 'T' || ts[13] != ':' ||
      ts[16] != ':' || ts[19] != '.' || ts[26] != 'Z')
    return std::nullopt;
  auto num = [&](size_t pos, size_t len, long& v) {
    v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (ts[i] < '0' || ts[i] > '9') return false;
      v = v * 10 + (ts[i] - '0');
    }
    return true;
  };
  long y, mo, d, h, mi, s, us;
  if (!num(0, 4, y) || !num(5, 2, mo) || !num(8, 2, d) || !num(11, 2, h) || !num(14, 2, mi) ||
      !num(17, 2, s) || !num(20, 6, us))
    return std::nullopt;
  tm t{};
  t.tm_year = static_cast<int>(y - 1900);
  t.tm_mon = static_cast<int>(mo - 1);
  t.tm_mday = static_cast<int>(d);
  t.tm_hour = static_cast<int>(h);
  t.tm_min = static_cast<int>(mi);
  t.tm_sec = static_cast<int>(s);
  time_t secs = ::timegm(&t);
  return std::chrono::system_clock::from_time_t(secs) + std::chrono::microseconds(us);
}

std::optional<std::chrono::seconds> parse_duration(std::string_view s) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc()) return std::nullopt;
  std::string_view unit(ptr, static_cast<size_t>(s.data() + s.size() - ptr));
  static const std::map<std::string_view, uint64_t> units = {
      {"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}, {"w", 604800}};
  auto it = units.find(unit);
  if (it == units.end() || v > (uint64_t{1} << 40) / it->second) return std::nullopt;
  return std::chrono::seconds(static_cast<int64_t>(v * it->second));
}

UniqueFd open_append(const std::filesystem::path& path) {
  return open_trusted_file(path, O_RDWR | O_APPEND | O_CREAT, 0600);
}

UniqueFd ensure_private_dir(const std::filesystem::path& dir) { return open_trusted_dir(dir, true, 0700); }

void fsync_dir(const std::filesystem::path& dir) {
  const UniqueFd fd = open_trusted_dir(dir);
  if (::fsync(fd.get()) != 0) throw_errno("cannot sync directory " + dir.string());
}

}  // namespace sandboxrun::audit
