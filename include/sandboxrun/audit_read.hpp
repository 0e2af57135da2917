// Reading an audit log back for people: its last records, and the change in a run's code since
// the version before (verification: audit_verify.hpp; the file list: audit_log_files()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sandboxrun {

// A file of the log set that ends with a torn record (a crash mid-append; `sandboxrun audit
// repair` cuts it off).
struct AuditTornTail {
  std::filesystem::path file;
  uint64_t offset = 0;  // where the torn record starts
};

struct AuditTail {
  std::vector<std::string> lines;   // the last complete records as written, oldest first
  std::vector<AuditTornTail> torn;  // torn tails passed over, newest file first
};

// The last `n` complete lines of the log set (rotated files, then `log`), read backwards from
// each file's end. Throws Error when `log` cannot be opened, or a file cannot be read.
AuditTail audit_tail(const std::filesystem::path& log, size_t n);

// A run's code against the previous version its run_start names in diff_from.
struct AuditCodeDiff {
  std::string name;                   // the script's name
  std::string sha256;                 // the run's code object
  std::string from_run, from_sha256;  // the run that ran the previous version, and its object
  std::string unified;                // `diff -u` of the two; empty when the code is the same
  bool approximate = false;           // too many changes for a minimal diff: valid but longer
};

// The diff of run `run_id`'s code against its diff_from, both read from the object store. Throws
// Error when the log cannot be opened, or the run, its diff_from or either object is missing or
// altered.
AuditCodeDiff audit_code_diff(const std::filesystem::path& log, const std::string& run_id);

// The code of cell `to` of session `session_id` against cell `from` (docs/sessions.md), both
// read from the object store; name is "<cell FROM>..<cell TO>". Throws Error when the log cannot
// be opened, or the session, either cell or its object is missing or altered.
AuditCodeDiff audit_cell_diff(const std::filesystem::path& log, const std::string& session_id, uint64_t from,
                              uint64_t to);

}  // namespace sandboxrun
