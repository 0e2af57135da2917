#include "audit/run_ids.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "audit/audit_format.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "audit/line_reader.hpp"
#include "common/safe_open.hpp"
#include "internal.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::audit {

std::filesystem::path run_ids_path(const std::filesystem::path& log) { return log.string() + ".run-ids"; }

namespace {

// The index holds short lines (an id, a mark): a small buffer, touched once per claim. A longer
// line is damage.
constexpr size_t kIndexBuffer = 64 << 10;

// The string a raw JSON value holds, when it is a plain string (no escapes): run ids and
// hashes never need one.
std::string_view plain_string(const Member* m) {
  if (!m || m->value.size() < 2 || m->value.front() != '"' || m->value.back() != '"') return {};
  std::string_view s = m->value.substr(1, m->value.size() - 2);
  return s.find('\\') == std::string_view::npos ? s : std::string_view();
}

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
  uint64_t& mark = hash.size() == kHashHex ? marks[hash] : unmarked;
  if (mark > size) mark = 0;  // truncated (audit repair): index it again
  if (mark == size) return;
  // Up to the first line that is not a whole record within bounds (a torn tail, damage): the
  // mark stays before it, so the next claim looks there again.
  LineReader reader(fd.get(), file, mark, 4 * kMaxRecordBytes);
  std::string_view line;
  while (reader.next(line) == LineReader::Status::line) {
    mark = reader.offset() + line.size() + 1;
    const std::string_view id = record_run_id(line, scanner);
    if (!id.empty() && seen.emplace(id).second) {
      out += id;
      out += '\n';
    }
  }
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
  // One pass over the index: is the id there, and how far is each log file indexed. A torn last
  // line (a writer crashed in its append) counts as neither; ours then starts on a new line.
  Marks marks;
  bool indexed = false;
  LineReader reader(fd.get(), index, 0, kIndexBuffer);
  std::string_view line;
  LineReader::Status status;
  while ((status = reader.next(line)) == LineReader::Status::line) {
    if (line == id) indexed = true;
    if (line.size() < kHashHex + 3 || line[0] != '@' || line[kHashHex + 1] != ':') continue;
    uint64_t offset = 0;
    auto [p, ec] = std::from_chars(line.data() + kHashHex + 2, line.data() + line.size(), offset);
    if (ec == std::errc() && p == line.data() + line.size()) marks[std::string(line.substr(1, kHashHex))] = offset;
  }
  if (status == LineReader::Status::too_long) {
    // Damaged past reading: start a new index, as if it had been deleted.
    if (::ftruncate(fd.get(), 0) != 0) throw_errno("cannot reset the damaged run id index " + index.string());
    marks.clear();
    indexed = false;
    status = LineReader::Status::eof;
  }
  // The ids of the records appended since the marks, once each (one already in the index may be
  // listed again: a line more, nothing else).
  std::string out = status == LineReader::Status::torn ? "\n" : "";
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
