// Tamper-evident audit log: configuration (config/audit.yaml), the appending writer and the
// content-addressed code store. Reading it back: audit_verify.hpp, audit_read.hpp. Format:
// docs/audit.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandboxrun/record.hpp"

namespace sandboxrun {

enum class AuditSync { each, batch, none };
NLOHMANN_JSON_SERIALIZE_ENUM(AuditSync, {{AuditSync::each, "each"}, {AuditSync::batch, "batch"}, {AuditSync::none, "none"}})
const char* to_string(AuditSync s);

// Where each checkpoint also goes as a line, for a log pipeline (a cluster's): none, standard
// output or standard error. (Not `stdout`/`stderr`: <cstdio> makes those macros.)
enum class CheckpointStream { none, out, err };
NLOHMANN_JSON_SERIALIZE_ENUM(CheckpointStream,
                             {{CheckpointStream::none, "none"}, {CheckpointStream::out, "stdout"}, {CheckpointStream::err, "stderr"}})

struct AuditConfig {
  std::filesystem::path path;      // log file; empty = default_audit_log_path()
  AuditSync sync = AuditSync::batch;
  uint64_t sync_batch = 64;        // batch: fdatasync when seq % sync_batch == 0
  std::filesystem::path key_file;  // empty = unkeyed SHA-256 chain; else HMAC-SHA256
  bool store_code = true;          // keep executed code under <log dir>/objects/
  bool store_files = true;         // keep job inputs and collected outputs there too
  uint64_t checkpoint_every = 64;  // anchor a checkpoint when seq % N == 0; 0 = never
  std::filesystem::path anchor;    // checkpoint file; empty = "<log>.anchor"
  bool syslog = false;             // also send checkpoints to syslog(3)
  CheckpointStream stream = CheckpointStream::none;  // and as a line to fd 1 or 2
  uint64_t rotate_max_bytes = 64ull << 20;   // 0 = no size rotation
  std::chrono::seconds rotate_max_age{0};    // age of the file's first record; 0 = never
  uint64_t keep_files = 0;                   // rotated files kept; 0 = all
  std::chrono::seconds keep_age{0};          // prune rotated files older than this; 0 = never
  // A writer looks at the log path again (has the file been renamed, replaced or deleted?) when
  // the lock file says another writer rotated or re-created it, when the file's size is not what
  // the writer left, and at least this often otherwise: it bounds how late a rename by a tool
  // that does not take the lock (logrotate, mv) is noticed. 0 = before every append. Not set
  // from audit.yaml.
  std::chrono::milliseconds path_check_interval{10};

  bool operator==(const AuditConfig&) const = default;
  // The settings of audit.yaml (its cached form); path_check_interval is not one.
  using A = AuditConfig;
  static constexpr auto fields = std::tuple{
      record::field("path", &A::path), record::field("sync", &A::sync), record::field("sync_batch", &A::sync_batch),
      record::field("key_file", &A::key_file), record::field("store_code", &A::store_code),
      record::field("store_files", &A::store_files), record::field("checkpoint_every", &A::checkpoint_every),
      record::field("anchor", &A::anchor), record::field("syslog", &A::syslog),
      record::field("stream", &A::stream),
      record::field("rotate_max_bytes", &A::rotate_max_bytes), record::field("rotate_max_age", &A::rotate_max_age),
      record::field("keep_files", &A::keep_files), record::field("keep_age", &A::keep_age)};
};

// Parses audit.yaml strictly (unknown keys and bad values are Errors naming file, key and
// what was expected). A missing file yields the defaults. Relative paths in the file are
// resolved against the file's directory.
AuditConfig load_audit_config(const std::filesystem::path& file);

// /var/log/sandboxrun/audit.log for root, else $XDG_STATE_HOME/sandboxrun/audit.log or
// ~/.local/state/sandboxrun/audit.log.
std::filesystem::path default_audit_log_path();

// Reads an HMAC key file, refusing one that is not a regular file owned by the caller (or
// root) with no group/other permission bits, or shorter than 16 bytes.
std::string load_audit_key(const std::filesystem::path& key_file);

// Identity of executed code as recorded under "code" in records.
struct CodeRef {
  std::string name;    // file name as given by the user (e.g. "job.py")
  std::string sha256;  // hex; the object is <log dir>/objects/<sha256>
  uint64_t size = 0;
  bool stored = false;  // the object was put in the store (verify requires it to be there)
  static constexpr auto fields = std::tuple{record::field("name", &CodeRef::name), record::field("sha256", &CodeRef::sha256),
                                            record::field("size", &CodeRef::size), record::field("stored", &CodeRef::stored)};
  bool operator==(const CodeRef&) const = default;
};

// run_start's diff_from: the previous stored version of the same script name run for the same
// caller, and how many lines this version adds and removes (0/0: the same code again).
struct CodeDiff {
  std::string run_id;  // the run that ran the previous version
  std::string sha256;  // its object
  uint64_t added = 0, removed = 0;
  // Too many scattered changes to diff within the cost bound: the counts are an upper bound
  // (everything between the common first and last lines counted as removed and added).
  bool approximate = false;
  static constexpr auto fields =
      std::tuple{record::field("run_id", &CodeDiff::run_id), record::field("sha256", &CodeDiff::sha256),
                 record::field("added", &CodeDiff::added), record::field("removed", &CodeDiff::removed),
                 record::field_if_set("approximate", &CodeDiff::approximate)};
  bool operator==(const CodeDiff&) const = default;
};

// What a prune of the object store did (AuditLog::prune_objects).
struct ObjectPruneResult {
  uint64_t referenced = 0;   // objects kept because a retained record names them
  uint64_t deleted = 0;
  uint64_t deleted_bytes = 0;
  uint64_t kept_recent = 0;  // named by no record, but modified within the grace period
  uint64_t index_removed = 0;  // version-index entries whose object was gone
};

// What AuditLog::repair did.
struct AuditRepair {
  uint64_t truncated_at = 0;     // where the torn record began: the file's size now
  uint64_t truncated_bytes = 0;  // how long it was
  CodeRef tail;                  // its bytes, kept in the object store
  uint64_t seq = 0;              // the `repair` record that says so
};

// One writer handle. Processes may share a log freely (appends are serialized by flock); a
// handle itself is not thread-safe: use one per thread or guard it.
class AuditLog {
 public:
  // Resolves the log path (override_path, else cfg.path, else the default), creates its
  // directory (0700) and loads the key. Nothing is written until the first append.
  static AuditLog open(const AuditConfig& cfg,
                       std::optional<std::filesystem::path> override_path = std::nullopt);
  AuditLog(AuditLog&&) noexcept;
  AuditLog& operator=(AuditLog&&) noexcept;
  ~AuditLog();

  // Appends one record: fills seq, ts, prev, hash (and kid when keyed) around `fields` (a JSON
  // object or null; keys seq/ts/run_id/event/prev/hash/kid are reserved; "code", when present,
  // must be a CodeRef object). One write() under an exclusive flock; rotates and prunes first
  // when due. durable=true forces fdatasync before returning, whatever the sync policy (use it
  // for run_start). Returns the record's seq. Throws Error, e.g. when the log ends with a torn
  // record (run `sandboxrun audit repair`).
  uint64_t append(const std::string& event, const std::string& run_id, nlohmann::json fields,
                  bool durable = false);

  // Claims a run id for a new run: false when a record of the log (rotated files included) or
  // an earlier claim already has it. Atomic across processes (under the log's flock). The ids
  // are indexed in <log>.run-ids: a claim reads that index and only the part of the log
  // appended since the last claim. A claimed id stays taken even if the run is refused later.
  bool claim_run_id(const std::string& id);

  // Stores `code` as <log dir>/objects/<sha256> (once; atomic rename) and returns its identity.
  // With store_code: false only the identity is computed (stored: false).
  CodeRef store_code(std::string_view code, std::string name);
  // The identity store_code gives, without storing: a caller that stores later (store_file with
  // code = true) must do so before a record naming it is written.
  CodeRef code_ref(std::string_view code, std::string name) const;
  // Stores a job file (an --input, a collected output) whose SHA-256 is `sha256`, when
  // store_files (store_code for `code`, e.g. a .py input) says so; returns whether it did. Mark
  // the manifest entry "stored" with it. Objects are durable before the next record is written.
  bool store_file(std::string_view data, const std::string& sha256, bool code = false);

  // For run_start's diff_from: the previous version of script `name` run for `caller` (absent:
  // the invoking uid), looked up in the store's version index (not by scanning the log), diffed
  // against `code`; then `code` (already stored by store_code) becomes the latest version, by
  // `run_id`. nullopt for the first version, or without store_code.
  std::optional<CodeDiff> track_version(const std::optional<std::string>& caller, const std::string& name,
                                        std::string_view code, const std::string& run_id);
  // track_version in its two steps, for a caller that records the new latest version once the
  // program has started (it only feeds the next run's diff_from; the write, a rename over the
  // old entry, costs a block allocation on ext4): the diff, read only, then the new latest.
  std::optional<CodeDiff> version_diff(const std::optional<std::string>& caller, const std::string& name,
                                       std::string_view code) const;
  void set_latest_version(const std::optional<std::string>& caller, const std::string& name,
                          const std::string& sha256, const std::string& run_id);

  // Deletes the objects no record of the log's files names and that were not modified within
  // `grace` (a run stores its objects shortly before the records naming them), and appends a
  // `prune_objects` record saying what it did. Rotation does this (with one hour) after it prunes
  // rotated files. A grace of 0 is safe only while no run is writing to this log.
  ObjectPruneResult prune_objects(std::chrono::seconds grace);

  // Cuts a torn last record (left by a crash mid-append, which stops every append) off the log
  // file under the log's lock, keeps its bytes in the object store and appends a `repair`
  // record; nullopt when the file ends with a complete record. Throws Error when the file
  // cannot be opened, read or cut, or the record cannot be appended.
  std::optional<AuditRepair> repair();

  // fdatasync of the log (e.g. at the end of a batch).
  void sync();

  const std::filesystem::path& path() const;

 private:
  struct Impl;
  explicit AuditLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

namespace audit {

// <log's directory>/objects: the log's object store. Throws nothing.
std::filesystem::path objects_dir(const std::filesystem::path& log);
// The checkpoint file of `log`: cfg.anchor when `log` is the log cfg names, else <log>.anchor.
// Throws std::filesystem::filesystem_error only when there is no current directory.
std::filesystem::path anchor_path(const AuditConfig& cfg, const std::filesystem::path& log);
// "0", "90s", "30m", "12h", "7d", "2w" (a bare number is seconds); nullopt when not one. Throws nothing.
std::optional<std::chrono::seconds> parse_duration(std::string_view text);

}  // namespace audit

}  // namespace sandboxrun
