// The audit log's object store, <log dir>/objects: content-addressed files (code, job inputs and
// outputs, torn tails) that records name by SHA-256; the references verify checks; pruning of
// objects no retained record names; the index of each caller's latest script versions.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "audit/audit_format.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/audit.hpp"

namespace sandboxrun::audit {

// 64 lowercase hex digits: the name of an object.
bool is_object_name(std::string_view name) noexcept;

// Puts `data`, whose SHA-256 is `sha256`, into the store (the directory `dir_fd`, shown as
// `dir`): written under a fresh temporary name (O_EXCL, never through an existing name), then
// renamed into place, so a reader sees the whole object or none. An object already there is
// not written again; its mtime is refreshed instead, which keeps a concurrent prune_objects
// from deleting it before the record that names it is appended. With `sync` the file is
// fsync'ed; the directory entry is the caller's to sync (once for many objects). Returns
// whether it wrote the object (false: it was there).
bool put_object(int dir_fd, const std::filesystem::path& dir, std::string_view data, const std::string& sha256,
                bool sync);

// The object references of the records verify reads (code refs, the inputs and outputs
// manifests, diff_from, repair tails), one entry per distinct object.
class ObjectRefs {
 public:
  // `record` holds the members of the record with this seq and run id (after parse_record).
  void add(uint64_t seq, std::string_view run_id, const LineScanner& record);
  // Re-hashes every referenced object present in `dir`, each once; one that a record marks as
  // stored must be there.
  AuditObjectsResult check(const std::filesystem::path& dir) const;

 private:
  struct Ref {
    uint64_t seq = 0;
    std::string run_id, path;
    bool required = false;
  };
  void note(std::string sha256, uint64_t seq, std::string_view run_id, std::string path, bool required);
  std::unordered_map<std::string, Ref> refs_;
  std::string last_code_;  // the last "code" member seen: a run's records repeat it
};

// Objects not modified within this long are the only ones a prune deletes: an object is stored
// shortly before the record that names it is appended (the code before its assessment record,
// inputs before run_start, outputs before run_end; diff_from's object is touched when read), so
// a record that a prune's snapshot of the log missed names an object younger than this.
inline constexpr std::chrono::seconds kObjectGrace{3600};

// Deletes the objects (and leftover temporary files, and version-index entries whose object is
// gone) that no record of the log's files (rotated ones and the current one) names and that
// were not modified within `grace`. The files are opened under the log's lock (`lock_fd`), then
// read without it. An object is renamed aside, its mtime looked at again (a writer may have
// refreshed it meanwhile: put back), and only then unlinked.
ObjectPruneResult prune_objects(const std::filesystem::path& log, int lock_fd, const std::filesystem::path& lock_file,
                                std::chrono::seconds grace);

// The version index, <objects>/latest/<sha256(key NUL name)>: "<sha256> <run_id>\n" of the last
// stored version of script `name` run for `key` ("caller:<ID>", or "uid:<N>" without --caller).
// Never synced: it only feeds run_start's diff_from, and a crash that loses the newest entry
// makes the next run diff against the version before (or report none), not lose a record; a
// sync here would be two fsyncs ahead of every sandbox's start.
struct VersionEntry {
  std::string sha256, run_id;
};
std::optional<VersionEntry> read_version(const std::filesystem::path& objects, const std::string& key,
                                         const std::string& name);
void write_version(const std::filesystem::path& objects, const std::string& key, const std::string& name,
                   const VersionEntry& entry);

// The previous version of script `name` run for `key` (see read_version), diffed against `code`.
// The previous object's mtime is refreshed before it is read, as put_object does, so that a
// prune keeps it for run_start's diff_from. No previous version, or its object gone or altered:
// no diff.
std::optional<CodeDiff> diff_from_latest(const std::filesystem::path& objects, const std::string& key,
                                         const std::string& name, std::string_view code);
// diff_from_latest, then `code`'s object is recorded as the latest version, by `run_id`.
std::optional<CodeDiff> track_version(const std::filesystem::path& objects, const std::string& key,
                                      const std::string& name, std::string_view code, const std::string& run_id);

// The bytes of object `sha256`, checked against its name. Throws Error naming the object.
std::string read_object(const std::filesystem::path& objects, const std::string& sha256);

}  // namespace sandboxrun::audit
