// The audit log's events, one type each (record.hpp): the Executor and the log write them,
// `sandboxrun audit show`/`tail` and library callers read them, and docs/audit.md's event tables
// are checked against them by a unit test. A field added here is written, read and must be
// documented; nothing else keeps a copy of a record's shape.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sandboxrun/assess.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/job_io.hpp"
#include "sandboxrun/record.hpp"
#include "sandboxrun/result_records.hpp"

namespace sandboxrun::audit {

using record::field;
using record::field_if_set;
using record::flatten;
using record::from_json;
using record::to_json;

// What every record of a run carries besides the log's chain fields (seq, ts, run_id, event,
// prev, hash, kid).
struct RunContext {
  std::optional<CodeRef> code{};  // absent only when the run failed before its code was read
  std::optional<std::string> caller{};
  std::map<std::string, std::string> labels{};
  static constexpr auto fields = std::tuple{field("code", &RunContext::code), field("caller", &RunContext::caller),
                                            field_if_set("labels", &RunContext::labels)};
  bool operator==(const RunContext&) const = default;
};

// A file of a job manifest (--input, --output), and whether its bytes are in the object store.
struct ManifestEntry {
  FileRecord file{};
  bool stored = false;
  static constexpr auto fields = std::tuple{flatten(&ManifestEntry::file), field("stored", &ManifestEntry::stored)};
  bool operator==(const ManifestEntry&) const = default;
};

struct AssessmentEvent {
  static constexpr std::string_view kEvent = "assessment";
  RunContext run{};
  std::string level{};  // LOW | MEDIUM | HIGH | BLOCKED
  int64_t score = 0;
  std::vector<Finding> findings{};
  std::optional<std::vector<CodeRef>> input_code{};  // the job's .py inputs, assessed with it
  static constexpr auto fields =
      std::tuple{flatten(&AssessmentEvent::run), field("level", &AssessmentEvent::level),
                 field("score", &AssessmentEvent::score), field("findings", &AssessmentEvent::findings),
                 field("input_code", &AssessmentEvent::input_code)};
  bool operator==(const AssessmentEvent&) const = default;
};

struct BlockedEvent {
  static constexpr std::string_view kEvent = "blocked";
  RunContext run{};
  std::string level{};
  int64_t score = 0;
  std::string trust_requested{};
  static constexpr auto fields = std::tuple{flatten(&BlockedEvent::run), field("level", &BlockedEvent::level),
                                            field("score", &BlockedEvent::score),
                                            field("trust_requested", &BlockedEvent::trust_requested)};
  bool operator==(const BlockedEvent&) const = default;
};

struct OverrideEvent {
  static constexpr std::string_view kEvent = "override";
  RunContext run{};
  std::string reason{};
  uint64_t uid = 0;
  std::string level{};
  std::string trust_used{};
  static constexpr auto fields = std::tuple{flatten(&OverrideEvent::run), field("reason", &OverrideEvent::reason),
                                            field("uid", &OverrideEvent::uid), field("level", &OverrideEvent::level),
                                            field("trust_used", &OverrideEvent::trust_used)};
  bool operator==(const OverrideEvent&) const = default;
};

struct OverrideRefusedEvent {
  static constexpr std::string_view kEvent = "override_refused";
  RunContext run{};
  std::string reason{};  // as given, cut at the policy's bound
  uint64_t uid = 0;
  std::string why{};
  std::string level{};
  std::string trust_requested{};
  static constexpr auto fields =
      std::tuple{flatten(&OverrideRefusedEvent::run), field("reason", &OverrideRefusedEvent::reason),
                 field("uid", &OverrideRefusedEvent::uid), field("why", &OverrideRefusedEvent::why),
                 field("level", &OverrideRefusedEvent::level),
                 field("trust_requested", &OverrideRefusedEvent::trust_requested)};
  bool operator==(const OverrideRefusedEvent&) const = default;
};

struct RunStartEvent {
  static constexpr std::string_view kEvent = "run_start";
  RunContext run{};
  std::string trust_requested{};
  std::string trust_used{};
  LimitsRecord limits{};
  std::string config_digest{};
  std::string config{};
  std::string image_digest{};
  uint64_t uid = 0;
  std::vector<std::string> args{};
  bool overridden = false;
  std::vector<ManifestEntry> inputs{};
  std::optional<std::vector<std::string>> env{};  // names only: values may be credentials
  std::optional<IdSlotRecord> id_slot{};
  std::optional<CodeDiff> diff_from{};
  // A session's sandbox: the code is sandboxrun's session driver, not assessed; each cell is
  // assessed and recorded as a `cell` event.
  bool session = false;
  static constexpr auto fields =
      std::tuple{flatten(&RunStartEvent::run),
                 field("trust_requested", &RunStartEvent::trust_requested),
                 field("trust_used", &RunStartEvent::trust_used),
                 field("limits", &RunStartEvent::limits),
                 field("config_digest", &RunStartEvent::config_digest),
                 field("config", &RunStartEvent::config),
                 field("image_digest", &RunStartEvent::image_digest),
                 field("uid", &RunStartEvent::uid),
                 field("args", &RunStartEvent::args),
                 field("overridden", &RunStartEvent::overridden),
                 field("inputs", &RunStartEvent::inputs),
                 field("env", &RunStartEvent::env),
                 field("id_slot", &RunStartEvent::id_slot),
                 field("diff_from", &RunStartEvent::diff_from),
                 field_if_set("session", &RunStartEvent::session)};
  bool operator==(const RunStartEvent&) const = default;
};

// One cell of a session, written (and synced) before it runs: its code and the verdict on the
// session's code so far, this cell included.
struct CellEvent {
  static constexpr std::string_view kEvent = "cell";
  RunContext run{};   // code: the cell's
  uint64_t cell = 0;  // 1, 2, ... within the session
  std::string level{};
  int64_t score = 0;
  std::vector<Finding> findings{};
  bool refused = false;  // the verdict refused it: it never ran
  std::optional<std::string> override_reason{};
  static constexpr auto fields =
      std::tuple{flatten(&CellEvent::run), field("cell", &CellEvent::cell), field("level", &CellEvent::level),
                 field("score", &CellEvent::score), field("findings", &CellEvent::findings),
                 field("refused", &CellEvent::refused), field("override_reason", &CellEvent::override_reason)};
  bool operator==(const CellEvent&) const = default;
};

// One item of a cell's output as the host received it: the stream or MIME type, its size and
// digest. Base64 types (image/png, image/jpeg) are measured decoded, so the digest is the file's.
struct CellOutputItem {
  std::string kind{};                 // stdout | stderr | result | display
  std::optional<uint64_t> index{};    // display: its position among the cell's display items
  std::optional<std::string> mime{};  // result, display: the MIME type
  uint64_t size = 0;
  std::string sha256{};
  std::optional<bool> truncated{};  // stdout, stderr: cut at output_limit
  static constexpr auto fields =
      std::tuple{field("kind", &CellOutputItem::kind), field("index", &CellOutputItem::index),
                 field("mime", &CellOutputItem::mime), field("size", &CellOutputItem::size),
                 field("sha256", &CellOutputItem::sha256), field("truncated", &CellOutputItem::truncated)};
  bool operator==(const CellOutputItem&) const = default;
};

// How a cell that ran ended.
struct CellEndEvent {
  static constexpr std::string_view kEvent = "cell_end";
  RunContext run{};
  uint64_t cell = 0;
  std::string status{};  // ok | error | timeout | lost
  uint64_t duration_ms = 0;
  std::optional<std::string> ename{};  // the exception it raised, as the driver reported it
  std::optional<ResourcesRecord> resources{};  // CellResult::resources
  std::vector<CellOutputItem> outputs{};       // what came back, in order; empty for a lost cell
  static constexpr auto fields =
      std::tuple{flatten(&CellEndEvent::run), field("cell", &CellEndEvent::cell),
                 field("status", &CellEndEvent::status), field("duration_ms", &CellEndEvent::duration_ms),
                 field("ename", &CellEndEvent::ename), field("resources", &CellEndEvent::resources),
                 field("outputs", &CellEndEvent::outputs)};
  bool operator==(const CellEndEvent&) const = default;
};

// A file put into a session's /work. A .py file is assessed with the session's code (as a cell).
struct FilePutEvent {
  static constexpr std::string_view kEvent = "file_put";
  RunContext run{};  // code: the file's, when it is Python
  FileRecord file{};
  std::optional<std::string> level{};  // .py files: the verdict on the session's code with it
  std::vector<Finding> findings{};
  bool refused = false;  // the verdict refused it: it was not written
  std::optional<std::string> override_reason{};
  static constexpr auto fields =
      std::tuple{flatten(&FilePutEvent::run), field("file", &FilePutEvent::file), field("level", &FilePutEvent::level),
                 field("findings", &FilePutEvent::findings), field("refused", &FilePutEvent::refused),
                 field("override_reason", &FilePutEvent::override_reason)};
  bool operator==(const FilePutEvent&) const = default;
};

// A file copied out of a session's /work: what the host received.
struct FileGetEvent {
  static constexpr std::string_view kEvent = "file_get";
  RunContext run{};
  FileRecord file{};
  static constexpr auto fields = std::tuple{flatten(&FileGetEvent::run), field("file", &FileGetEvent::file)};
  bool operator==(const FileGetEvent&) const = default;
};

struct OutputTruncated {
  bool stdout_cut = false;
  bool stderr_cut = false;
  static constexpr auto fields =
      std::tuple{field("stdout", &OutputTruncated::stdout_cut), field("stderr", &OutputTruncated::stderr_cut)};
  bool operator==(const OutputTruncated&) const = default;
};

struct NetworkSummary {
  uint64_t allowed = 0;
  uint64_t denied = 0;
  static constexpr auto fields =
      std::tuple{field("allowed", &NetworkSummary::allowed), field("denied", &NetworkSummary::denied)};
  bool operator==(const NetworkSummary&) const = default;
};

struct RunEndEvent {
  static constexpr std::string_view kEvent = "run_end";
  RunContext run{};
  std::string status{};  // exited | signaled | timeout | oom | error
  int64_t exit_code = 0;
  std::optional<uint64_t> duration_ms{};  // absent when nothing started
  std::optional<ResourcesRecord> resources{};
  std::optional<std::string> cgroup{};  // the backend: "v2", "v1" or "none (degraded)"
  std::optional<std::string> error{};
  std::optional<OutputTruncated> output_truncated{};
  std::optional<std::vector<std::string>> degradations{};
  std::optional<NetworkSummary> network{};
  std::optional<std::vector<ManifestEntry>> outputs{};
  std::optional<bool> outputs_truncated{};
  std::optional<uint64_t> outputs_skipped{};
  static constexpr auto fields =
      std::tuple{flatten(&RunEndEvent::run),
                 field("status", &RunEndEvent::status),
                 field("exit_code", &RunEndEvent::exit_code),
                 field("duration_ms", &RunEndEvent::duration_ms),
                 field("resources", &RunEndEvent::resources),
                 field("cgroup", &RunEndEvent::cgroup),
                 field("error", &RunEndEvent::error),
                 field("output_truncated", &RunEndEvent::output_truncated),
                 field("degradations", &RunEndEvent::degradations),
                 field("network", &RunEndEvent::network),
                 field("outputs", &RunEndEvent::outputs),
                 field("outputs_truncated", &RunEndEvent::outputs_truncated),
                 field("outputs_skipped", &RunEndEvent::outputs_skipped)};
  bool operator==(const RunEndEvent&) const = default;
};

struct LimitEvent {
  static constexpr std::string_view kEvent = "limit";
  RunContext run{};
  std::string kind{};  // oom | timeout | pids
  std::optional<uint64_t> refused_forks{};
  static constexpr auto fields = std::tuple{flatten(&LimitEvent::run), field("kind", &LimitEvent::kind),
                                            field("refused_forks", &LimitEvent::refused_forks)};
  bool operator==(const LimitEvent&) const = default;
};

// One connection through the egress proxy, or (with `omitted`) the refusals past those listed.
struct NetworkEvent {
  static constexpr std::string_view kEvent = "network";
  RunContext run{};
  std::optional<std::string> host{};
  std::optional<uint64_t> port{};
  std::optional<std::string> address{};
  std::string verdict{};
  std::string reason{};
  std::optional<uint64_t> bytes_up{};
  std::optional<uint64_t> bytes_down{};
  std::optional<uint64_t> omitted{};
  static constexpr auto fields =
      std::tuple{flatten(&NetworkEvent::run),         field("host", &NetworkEvent::host),
                 field("port", &NetworkEvent::port),    field("address", &NetworkEvent::address),
                 field("verdict", &NetworkEvent::verdict), field("reason", &NetworkEvent::reason),
                 field("bytes_up", &NetworkEvent::bytes_up), field("bytes_down", &NetworkEvent::bytes_down),
                 field("omitted", &NetworkEvent::omitted)};
  bool operator==(const NetworkEvent&) const = default;
};

struct DeniedEvent {
  static constexpr std::string_view kEvent = "denied";
  RunContext run{};
  DeniedRecord denied{};
  static constexpr auto fields = std::tuple{flatten(&DeniedEvent::run), flatten(&DeniedEvent::denied)};
  bool operator==(const DeniedEvent&) const = default;
};

// The dependency phase: its report, and whether it installed the set.
struct DepsEvent {
  static constexpr std::string_view kEvent = "deps";
  RunContext run{};
  DepsReport deps{};
  std::string status{};  // ok | failed
  std::optional<std::string> error{};
  static constexpr auto fields = std::tuple{flatten(&DepsEvent::run), flatten(&DepsEvent::deps),
                                            field("status", &DepsEvent::status), field("error", &DepsEvent::error)};
  bool operator==(const DepsEvent&) const = default;
};

// Written by the log itself (run_id ""): rotated files pruned, objects pruned, a torn tail cut.
struct PruneEvent {
  static constexpr std::string_view kEvent = "prune";
  std::vector<std::string> files{};
  uint64_t through_seq = 0;
  std::string through_hash{};
  static constexpr auto fields = std::tuple{field("files", &PruneEvent::files),
                                            field("through_seq", &PruneEvent::through_seq),
                                            field("through_hash", &PruneEvent::through_hash)};
  bool operator==(const PruneEvent&) const = default;
};

struct PruneObjectsEvent {
  static constexpr std::string_view kEvent = "prune_objects";
  std::optional<uint64_t> referenced{}, deleted{}, deleted_bytes{}, kept_recent{}, index_removed{}, grace_s{};
  std::optional<std::string> error{};  // a prune after rotation that failed
  static constexpr auto fields = std::tuple{
      field("referenced", &PruneObjectsEvent::referenced),   field("deleted", &PruneObjectsEvent::deleted),
      field("deleted_bytes", &PruneObjectsEvent::deleted_bytes), field("kept_recent", &PruneObjectsEvent::kept_recent),
      field("index_removed", &PruneObjectsEvent::index_removed), field("grace_s", &PruneObjectsEvent::grace_s),
      field("error", &PruneObjectsEvent::error)};
  bool operator==(const PruneObjectsEvent&) const = default;
};

struct RepairEvent {
  static constexpr std::string_view kEvent = "repair";
  uint64_t truncated_at = 0;
  uint64_t truncated_bytes = 0;
  CodeRef tail{};  // the cut bytes, kept in the object store
  static constexpr auto fields = std::tuple{field("truncated_at", &RepairEvent::truncated_at),
                                            field("truncated_bytes", &RepairEvent::truncated_bytes),
                                            field("tail", &RepairEvent::tail)};
  bool operator==(const RepairEvent&) const = default;
};

// Appends event `e` of run `run_id` (AuditLog::append with the event's name and fields).
template <class E>
uint64_t append_event(AuditLog& log, const std::string& run_id, const E& e, bool durable = false) {
  return log.append(std::string(E::kEvent), run_id, nlohmann::json(e), durable);
}

// Reads a record's event fields as E; nullopt when a field has the wrong type (a damaged or
// foreign record: `audit verify` says which).
template <class E>
std::optional<E> read_event(const nlohmann::json& record) {
  return record::read<E>(record);
}

}  // namespace sandboxrun::audit
