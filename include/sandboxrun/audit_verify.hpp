// Streaming verification of an audit log chain (rotated files + current file) against its
// checkpoint anchor. Constant memory: one read buffer and the last two records' hashes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sandboxrun {

enum class AuditDamage {
  modified,                    // a record's bytes do not match its hash, or it is malformed
  deleted,                     // records missing (sequence gap / chain starts late, unpruned)
  reordered,                   // records out of sequence order
  inserted,                    // a record that is not part of the chain (forged or replayed)
  truncated_after_checkpoint,  // the chain ends before the last anchored checkpoint
  torn_last_line,              // the last line is incomplete (crash during an append)
  forged,                      // keyed mode: record not authenticated by the key
  bad_key,                     // keyed log verified without its key, or with another key
  rolled_back,                 // a checkpointed record differs (rolled back / replaced)
  missing,                     // the log file does not exist
};
const char* to_string(AuditDamage d);

struct AuditDamageReport {
  AuditDamage kind;
  std::filesystem::path file;
  uint64_t line = 0;     // 1-based line in `file` (0 when not about one line)
  uint64_t offset = 0;   // byte offset of that line
  std::optional<uint64_t> seq;
  std::string detail;
};

struct AuditVerifyOptions {
  std::filesystem::path log;                  // the current log file
  std::optional<std::filesystem::path> anchor;  // checkpoint file (absent file = none yet)
  std::optional<std::string> key;             // HMAC key bytes for keyed logs
  bool objects = false;                       // also re-hash the objects the records name
};

// A stored object that does not match what a record says about it.
struct AuditObjectProblem {
  std::string kind;  // "missing" (a record says it was stored) or "altered" (wrong bytes, not a file)
  uint64_t seq = 0;  // the first record naming it (one that says it was stored, for "missing")
  std::string run_id;
  std::string path;  // what it is to that record: "code job.py", "input data.csv", "output plot.png", ...
  std::string sha256;
  std::string detail;
};

struct AuditObjectsResult {
  uint64_t referenced = 0;  // distinct objects named by the records read
  uint64_t checked = 0;     // present and re-hashed
  uint64_t bytes = 0;       // hashed
  std::vector<AuditObjectProblem> problems;  // in record order
};

struct AuditVerifyResult {
  std::vector<std::filesystem::path> files;  // verified in chain order (rotated ..., current)
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  std::string last_hash;
  uint64_t checkpoints_matched = 0;
  std::optional<AuditDamageReport> damage;  // the first damage found; empty = intact
  // With AuditVerifyOptions::objects: the objects named by the records read (up to the damage).
  std::optional<AuditObjectsResult> objects;
  bool ok() const { return !damage.has_value() && (!objects || objects->problems.empty()); }
};

// Verifies the chain (and with opt.objects the stored objects); damage is in the result. Throws
// Error when a file cannot be read (not for a missing log: that is damage) or the anchor is malformed.
AuditVerifyResult verify_audit_log(const AuditVerifyOptions& opt);

// Rotated siblings of `log` ("<log>.<last seq>"), oldest first. Throws Error when the
// directory exists but cannot be listed.
std::vector<std::filesystem::path> rotated_audit_files(const std::filesystem::path& log);
// The rotated files followed by `log` itself: the whole chain, oldest first. Throws as above.
std::vector<std::filesystem::path> audit_log_files(const std::filesystem::path& log);

}  // namespace sandboxrun
