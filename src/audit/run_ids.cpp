#include "audit/run_ids.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "audit/audit_format.hpp"
#include "audit/audit_verify.hpp"
#include "common/safe_open.hpp"
#include "internal.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::audit {

namespace {

constexpr size_t kHashLen = 64;
constexpr size_t kChunk = 128 << 10;  // small: its pages are touched once per process

// The string a raw JSON value holds, when it is a plain string (no escapes): run ids and
// hashes never need one.
std::string_view plain_string(const Member* m) {
  if (!m || m->value.size() < 2 || m->value.front() != '"' || m->value.back() != '"') return {};
  std::string_view s = m->value.substr(1, m->value.size() - 2);
  return s.find('\\') == std::string_view::npos ? s : std::string_view();
}

// Calls fn(line) for each complete line of `fd` in [from, size); returns the offset
// after the last one.
template <class Fn>
uint64_t for_each_line(int fd, uint64_t from, uint64_t size, const std::filesystem::path& what, Fn&& fn) {
  std::string buf;
  uint64_t done = from;  // offset of buf[0]
  uint64_t at = from;
  while (at < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, size - at));
    const size_t old = buf.size();
    buf.resize(old + want);
    ssize_t n;
    do n = ::pread(fd, buf.data() + old, want, static_cast<off_t>(at));
    while (n < 0 && errno == EINTR);
    if (n < 0) throw_errno("cannot read " + what.string());
    buf.resize(old + static_cast<size_t>(n));
    if (n == 0) break;  // shorter than it was a moment ago
    at += static_cast<uint64_t>(n);
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
      fn(std::string_view(buf).substr(start, nl - start));
    buf.erase(0, start);
    done += start;
  }
  return done;
}

}  // namespace

std::filesystem::path run_ids_path(const std::filesystem::path& log) { return log.string() + ".run-ids"; }

namespace {

using Marks = std::unordered_map<std::string, uint64_t>;  // first record's hash -> bytes indexed

// The run id of a record line; for a line the scanner refuses (damaged: `audit verify` reports
// it), the first "run_id" member's text, as a byte search would find it.
std::string_view record_run_id(std::string_view line, LineScanner& scanner) {
  if (scanner.scan(line)) return plain_string(scanner.find("run_id"));
  constexpr std::string_view kKey = "\"run_id\":\"";
  const size_t at = line.find(kKey);
  if (at == std::string_view::npos) return {};
  const size_t from = at + kKey.size(), to = line.find('"', from);
  return to == std::string_view::npos ? std::string_view() : line.substr(from, to - from);
}

// Indexes `file` past its mark: its new ids and then its new mark go to `out`. A file whose
// first record cannot be read has no name to mark it by: it is read whole every time.
void index_file(const std::filesystem::path& file, Marks& marks, std::unordered_set<std::string>& seen,
                std::string& out) {
  UniqueFd fd;
  try {
    fd = open_trusted_file(file, O_RDONLY);
  } catch (const Error&) {
    if (::access(file.c_str(), F_OK) != 0 && errno == ENOENT) return;  // pruned meanwhile
    throw;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + file.string());
  const auto size = static_cast<uint64_t>(st.st_size);
  LineScanner scanner;
  const std::string first = read_first_line(fd.get(), file);
  std::string hash;
  if (!first.empty() && scanner.scan(first)) hash = plain_string(scanner.find("hash"));
  uint64_t unmarked = 0;
  uint64_t& mark = hash.size() == kHashLen ? marks[hash] : unmarked;
  if (mark > size) mark = 0;  // truncated (audit repair): index it again
  if (mark == size) return;
  mark = for_each_line(fd.get(), mark, size, file, [&](std::string_view line) {
    const std::string_view id = record_run_id(line, scanner);
    if (!id.empty() && seen.emplace(id).second) {
      out += id;
      out += '\n';
    }
  });
  if (&mark == &unmarked) return;
  out += '@';
  out += hash;
  out += ':';
  out += std::to_string(mark);
  out += '\n';
}

}  // namespace

bool claim_run_id(const std::filesystem::path& log, const std::string& id) {
  const std::filesystem::path index = run_ids_path(log);
  UniqueFd fd = open_trusted_file(index, O_RDWR | O_CREAT | O_APPEND, 0600);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + index.string());
  const auto size = static_cast<uint64_t>(st.st_size);
  // One pass over the index: is the id there, and how far is each log file indexed. A torn last
  // line (a writer crashed in its append) counts as neither; ours then starts on a new line.
  Marks marks;
  bool indexed = false;
  const uint64_t whole = for_each_line(fd.get(), 0, size, index, [&](std::string_view line) {
    if (line == id) indexed = true;
    if (line.size() < kHashLen + 3 || line[0] != '@' || line[kHashLen + 1] != ':') return;
    uint64_t offset = 0;
    auto [p, ec] = std::from_chars(line.data() + kHashLen + 2, line.data() + line.size(), offset);
    if (ec == std::errc() && p == line.data() + line.size()) marks[std::string(line.substr(1, kHashLen))] = offset;
  });
  // The ids of the records appended since the marks, once each (one already in the index may be
  // listed again: a line more, nothing else).
  std::string out = whole < size ? "\n" : "";
  const size_t torn = out.size();
  std::unordered_set<std::string> seen;
  for (const auto& file : audit_log_files(log)) index_file(file, marks, seen, out);
  const bool fresh = !indexed && !seen.count(id);
  if (fresh) {
    out += id;
    out += '\n';
  }
  if (out.size() > torn && !write_all(fd.get(), out.data(), out.size()))
    throw_errno("cannot write the run id index " + index.string());
  return fresh;
}

}  // namespace sandboxrun::audit
