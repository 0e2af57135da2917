// The parts of a run's report that both the result (`--json`, RunResult::to_json) and the audit
// log carry: the effective limits, the resources used, the host ids, what was denied. Declared
// once (record.hpp), so the two can never disagree on a name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sandboxrun/record.hpp"

namespace sandboxrun {

struct SandboxSpec;
struct CgroupUsage;
struct IdSlotInfo;
struct DeniedReport;

using record::field;
using record::field_if_set;

struct AdjustmentRecord {
  std::string limit{}, from{}, to{}, reason{};
  static constexpr auto fields =
      std::tuple{field("limit", &AdjustmentRecord::limit), field("from", &AdjustmentRecord::from),
                 field("to", &AdjustmentRecord::to), field("reason", &AdjustmentRecord::reason)};
  bool operator==(const AdjustmentRecord&) const = default;
};

// The limits a run had, after the trust level, the caller and the host had their say.
struct LimitsRecord {
  double cpu_count = 0;
  uint64_t mem_limit_bytes = 0;
  uint64_t pids_limit = 0;
  double timeout_s = 0;
  uint64_t tmp_size_bytes = 0;
  uint64_t output_limit_bytes = 0;
  uint64_t work_size_bytes = 0;
  uint64_t output_files_limit = 0;
  uint64_t output_bytes_limit = 0;
  std::string network_mode{};
  std::vector<AdjustmentRecord> adjustments{};
  static LimitsRecord of(const SandboxSpec& spec);
  static constexpr auto fields = std::tuple{
      field("cpu_count", &LimitsRecord::cpu_count),
      field("mem_limit_bytes", &LimitsRecord::mem_limit_bytes),
      field("pids_limit", &LimitsRecord::pids_limit),
      field("timeout_s", &LimitsRecord::timeout_s),
      field("tmp_size_bytes", &LimitsRecord::tmp_size_bytes),
      field("output_limit_bytes", &LimitsRecord::output_limit_bytes),
      field("work_size_bytes", &LimitsRecord::work_size_bytes),
      field("output_files_limit", &LimitsRecord::output_files_limit),
      field("output_bytes_limit", &LimitsRecord::output_bytes_limit),
      field("network_mode", &LimitsRecord::network_mode),
      field("adjustments", &LimitsRecord::adjustments)};
  bool operator==(const LimitsRecord&) const = default;
};

// What the run used, from its cgroup.
struct ResourcesRecord {
  uint64_t cpu_ms = 0;
  uint64_t memory_peak_bytes = 0;
  uint64_t pids_peak = 0;
  uint64_t oom_kills = 0;
  uint64_t pids_limit_hits = 0;
  static ResourcesRecord of(const CgroupUsage& usage);
  static constexpr auto fields = std::tuple{
      field("cpu_ms", &ResourcesRecord::cpu_ms), field("memory_peak_bytes", &ResourcesRecord::memory_peak_bytes),
      field("pids_peak", &ResourcesRecord::pids_peak), field("oom_kills", &ResourcesRecord::oom_kills),
      field("pids_limit_hits", &ResourcesRecord::pids_limit_hits)};
  bool operator==(const ResourcesRecord&) const = default;
};

// The host ids a root-mode run used (its id slot).
struct IdSlotRecord {
  uint64_t slot = 0;
  uint64_t host_uid = 0;
  uint64_t host_gid = 0;
  uint64_t host_root_uid = 0;
  static IdSlotRecord of(const IdSlotInfo& info);
  static constexpr auto fields =
      std::tuple{field("slot", &IdSlotRecord::slot), field("host_uid", &IdSlotRecord::host_uid),
                 field("host_gid", &IdSlotRecord::host_gid), field("host_root_uid", &IdSlotRecord::host_root_uid)};
  bool operator==(const IdSlotRecord&) const = default;
};

struct DeniedCall {
  std::string name{};
  uint64_t count = 0;
  std::vector<std::vector<uint64_t>> first_args{};  // the first few calls' first three arguments
  static constexpr auto fields = std::tuple{field("name", &DeniedCall::name), field("count", &DeniedCall::count),
                                            field("first_args", &DeniedCall::first_args)};
  bool operator==(const DeniedCall&) const = default;
};

struct RefusedConnection {
  std::string host{};
  uint64_t port = 0;
  std::string reason{};
  static constexpr auto fields = std::tuple{field("host", &RefusedConnection::host),
                                            field("port", &RefusedConnection::port),
                                            field("reason", &RefusedConnection::reason)};
  bool operator==(const RefusedConnection&) const = default;
};

struct KilledRecord {
  std::string signal{};
  std::string reason{};
  static constexpr auto fields =
      std::tuple{field("signal", &KilledRecord::signal), field("reason", &KilledRecord::reason)};
  bool operator==(const KilledRecord&) const = default;
};

// One connection the egress proxy saw (allowlist mode).
struct ConnectionReport {
  std::string host{};     // as asked for; empty if never read
  uint64_t port = 0;
  std::string address{};  // the address connected to; empty if none
  std::string verdict{};  // allowed | denied
  std::string reason{};   // why it was refused, or how an allowed one ended when not normally
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  static constexpr auto fields = std::tuple{
      field("host", &ConnectionReport::host),       field("port", &ConnectionReport::port),
      field("address", &ConnectionReport::address), field("verdict", &ConnectionReport::verdict),
      field("reason", &ConnectionReport::reason),   field("bytes_up", &ConnectionReport::bytes_up),
      field("bytes_down", &ConnectionReport::bytes_down)};
  bool operator==(const ConnectionReport&) const = default;
};

// The egress proxy's account of a run: counters, and each connection up to the proxy's bound.
struct NetworkReport {
  uint64_t allowed = 0;
  uint64_t denied = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  uint64_t records_dropped = 0;  // connections counted but not kept
  std::vector<ConnectionReport> connections{};
  static constexpr auto fields = std::tuple{
      field("allowed", &NetworkReport::allowed),       field("denied", &NetworkReport::denied),
      field("bytes_up", &NetworkReport::bytes_up),     field("bytes_down", &NetworkReport::bytes_down),
      field("records_dropped", &NetworkReport::records_dropped), field("connections", &NetworkReport::connections)};
  bool operator==(const NetworkReport&) const = default;
};

// A package the dependency phase installed (from pip's report).
struct InstalledPackage {
  std::string name{};
  std::string version{};
  std::optional<std::string> sha256{};  // of the wheel, when pip said
  std::string url{};
  static constexpr auto fields = std::tuple{field("name", &InstalledPackage::name),
                                            field("version", &InstalledPackage::version),
                                            record::field_or_null("sha256", &InstalledPackage::sha256),
                                            field("url", &InstalledPackage::url)};
  bool operator==(const InstalledPackage&) const = default;
};

// The dependency phase of a run (docs/deps.md): the requirement set, where it came from and
// what it cost. The result's `deps`, and the `deps` audit event with its status.
struct DepsReport {
  std::vector<std::string> requirements{};
  std::string key{};     // the cache key: requirements, image, interpreter, index
  std::string python{};  // the interpreter the set was installed for ("python3.11")
  std::string index{};   // the package index's URL
  std::string cache = "hit";  // hit | miss
  std::vector<InstalledPackage> installed{};
  std::vector<ConnectionReport> connections{};  // the install phase's, through its egress proxy
  double duration_ms = 0;
  bool waited_for_builder = false;       // another run was installing the same set
  std::optional<std::string> rebuilt{};  // a damaged cached set was rebuilt: why
  std::optional<uint64_t> evicted{};     // sets removed to keep cache_max_size
  std::optional<std::string> eviction_error{};
  std::optional<uint64_t> bytes{};       // of the installed set
  std::optional<uint64_t> files{};
  std::optional<std::string> path{};     // where the run sees it (on PYTHONPATH)
  static constexpr auto fields = std::tuple{
      field("requirements", &DepsReport::requirements), field("key", &DepsReport::key),
      field("python", &DepsReport::python), field("index", &DepsReport::index), field("cache", &DepsReport::cache),
      field("installed", &DepsReport::installed), field("connections", &DepsReport::connections),
      field("duration_ms", &DepsReport::duration_ms), field_if_set("waited_for_builder", &DepsReport::waited_for_builder),
      field("rebuilt", &DepsReport::rebuilt), field("evicted", &DepsReport::evicted),
      field("eviction_error", &DepsReport::eviction_error), field("bytes", &DepsReport::bytes),
      field("files", &DepsReport::files), field("path", &DepsReport::path)};
  bool operator==(const DepsReport&) const = default;
};

// Connections the proxy refused that a run's `denied` lists (and the log records one by one);
// the rest are counted.
inline constexpr size_t kMaxRefusedListed = 100;

// What the program tried and was refused: system calls answered EPERM, connections the proxy
// refused (listed up to a bound, counted past it), a seccomp kill.
struct DeniedRecord {
  std::vector<DeniedCall> syscalls{};
  std::vector<RefusedConnection> network{};
  std::string answer = "EPERM";
  std::optional<uint64_t> network_refused_count{};  // set when more were refused than listed
  uint64_t syscalls_other_count = 0;              // denials past the names listed
  std::optional<KilledRecord> killed{};
  // The seccomp denials and kill, and the proxy's refusals; nullopt when nothing was denied.
  static std::optional<DeniedRecord> of(const DeniedReport& d, const std::optional<NetworkReport>& network);
  // One line for a person at a terminal ("denied: syscalls bpf x3 (EPERM); ...").
  std::string summary() const;
  static constexpr auto fields = std::tuple{field("syscalls", &DeniedRecord::syscalls),
                                            field("network", &DeniedRecord::network),
                                            field("answer", &DeniedRecord::answer),
                                            field("network_refused_count", &DeniedRecord::network_refused_count),
                                            field_if_set("syscalls_other_count", &DeniedRecord::syscalls_other_count),
                                            field("killed", &DeniedRecord::killed)};
  bool operator==(const DeniedRecord&) const = default;
};

}  // namespace sandboxrun
