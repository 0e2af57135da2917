// The audit events are declared once (sandboxrun/audit_events.hpp): each round-trips through its
// JSON, writes only what it holds, reads the records the writer makes, and docs/audit.md's
// tables name exactly the fields the types declare.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "sandboxrun/audit_events.hpp"

namespace {

using nlohmann::json;
namespace ev = sandboxrun::audit;
using sandboxrun::CodeDiff;
using sandboxrun::CodeRef;

const ev::RunContext kCtx{.code = CodeRef{"job.py", std::string(64, 'a'), 12, true},
                          .caller = "svc-7",
                          .labels = {{"team", "data"}}};

template <class E>
void expect_round_trip(const E& e) {
  const json j = e;
  EXPECT_EQ(j.get<E>(), e) << j.dump();
  // Through text too, as a reader of the log sees it.
  EXPECT_EQ(json::parse(j.dump()).get<E>(), e) << j.dump();
}

TEST(AuditEvents, EveryEventRoundTripsWithEveryFieldSet) {
  expect_round_trip(ev::AssessmentEvent{.run = kCtx, .level = "HIGH", .score = 31,
                                        .findings = {{"SR-PROC-003", "high", 4, "runs a shell"}},
                                        .input_code = std::vector<CodeRef>{{"lib.py", std::string(64, 'b'), 3, true}}});
  expect_round_trip(ev::BlockedEvent{.run = kCtx, .level = "BLOCKED", .score = 99, .trust_requested = "trusted"});
  expect_round_trip(ev::OverrideEvent{.run = kCtx, .reason = "reviewed by ops", .uid = 1000, .level = "BLOCKED",
                                      .trust_used = "untrusted"});
  expect_round_trip(ev::OverrideRefusedEvent{.run = kCtx, .reason = "x", .uid = 7, .why = "too short", .level = "BLOCKED",
                                             .trust_requested = "unknown"});
  expect_round_trip(ev::RunStartEvent{
      .run = kCtx,
      .trust_requested = "trusted",
      .trust_used = "untrusted",
      .limits = {.cpu_count = 0.5, .mem_limit_bytes = 1 << 28, .pids_limit = 64, .timeout_s = 2.5,
                 .tmp_size_bytes = 1, .output_limit_bytes = 2, .work_size_bytes = 3, .output_files_limit = 4,
                 .output_bytes_limit = 5, .network_mode = "none",
                 .adjustments = {{"mem_limit", "2g", "1g", "host has less", }}},
      .config_digest = "c",
      .config = "/etc/sandboxrun/sandbox.yaml",
      .image_digest = "sha256:d",
      .uid = 0,
      .args = {"--n", "3"},
      .overridden = true,
      .inputs = {{{"data/a.csv", 10, std::string(64, 'c'), 0644}, true}},
      .env = std::vector<std::string>{"API_URL"},
      .id_slot = sandboxrun::IdSlotRecord{3, 100196608, 100196608, 100131072},
      .diff_from = CodeDiff{"run-0", std::string(64, 'e'), 2, 1, true},
      .session = true});
  expect_round_trip(ev::RunEndEvent{.run = kCtx,
                                    .status = "oom",
                                    .exit_code = 137,
                                    .duration_ms = 1200,
                                    .resources = sandboxrun::ResourcesRecord{9, 1 << 30, 12, 1, 4},
                                    .cgroup = "v2",
                                    .error = "e",
                                    .output_truncated = ev::OutputTruncated{true, false},
                                    .degradations = std::vector<std::string>{"no pids limit"},
                                    .network = ev::NetworkSummary{2, 3},
                                    .outputs = std::vector<ev::ManifestEntry>{{{"out.png", 5, "f", 0600}, false}},
                                    .outputs_truncated = true,
                                    .outputs_skipped = 8});
  expect_round_trip(ev::LimitEvent{.run = kCtx, .kind = "pids", .refused_forks = 40});
  expect_round_trip(ev::CellEvent{.run = kCtx, .cell = 2, .level = "BLOCKED", .score = 40, .findings = {},
                                  .refused = false, .override_reason = "reviewed"});
  expect_round_trip(ev::FilePutEvent{.run = kCtx, .file = {.path = "data/m.py", .size = 3, .sha256 = "ab", .mode = 0644},
                                     .level = "LOW", .findings = {}, .refused = false, .override_reason = {}});
  expect_round_trip(ev::FileGetEvent{.run = kCtx, .file = {.path = "out.csv", .size = 9, .sha256 = "cd", .mode = 0}});
  expect_round_trip(ev::CellEndEvent{.run = kCtx, .cell = 2, .status = "error", .duration_ms = 12,
                                     .ename = "ZeroDivisionError", .resources = sandboxrun::ResourcesRecord{
                                         .cpu_ms = 3, .memory_peak_bytes = 4096, .pids_peak = 2, .oom_kills = 0,
                                         .pids_limit_hits = 0}});
  expect_round_trip(ev::NetworkEvent{.run = kCtx, .host = "pypi.org", .port = 443, .address = "192.0.2.1",
                                     .verdict = "allowed", .reason = "", .bytes_up = 1, .bytes_down = 2});
  expect_round_trip(ev::DeniedEvent{
      .run = kCtx,
      .denied = {.syscalls = {{"bpf", 3, {{1, 2, 3}}}},
                 .network = {{"evil.example", 80, "not in the allowlist"}},
                 .network_refused_count = 150,
                 .syscalls_other_count = 2,
                 .killed = sandboxrun::KilledRecord{"SIGSYS", "x32"}}});
  expect_round_trip(ev::DepsEvent{
      .run = kCtx,
      .deps = {.requirements = {"six==1.16.0"}, .key = "k", .python = "3.11", .index = "http://127.0.0.1:1/simple",
               .cache = "miss", .installed = {{"six", "1.16.0", std::nullopt, "u"}, {"a", "1", "ff", "v"}},
               .connections = {{"pypi.example", 443, "192.0.2.2", "allowed", "", 10, 20}},
               .duration_ms = 12.5, .waited_for_builder = true, .rebuilt = "damaged", .evicted = 2,
               .eviction_error = "e", .bytes = 1, .files = 2, .path = "/run/deps"},
      .status = "failed",
      .error = "pip said no"});
  expect_round_trip(ev::PruneEvent{.files = {"audit.log.64"}, .through_seq = 64, .through_hash = std::string(64, '1')});
  expect_round_trip(ev::PruneObjectsEvent{.referenced = 1, .deleted = 2, .deleted_bytes = 3, .kept_recent = 4,
                                          .index_removed = 5, .grace_s = 3600});
  expect_round_trip(ev::RepairEvent{.truncated_at = 10, .truncated_bytes = 3, .tail = {"torn-tail", "a", 3, true}});
}

TEST(AuditEvents, WritesOnlyWhatItHolds) {
  // The early failure of a run: no code, no resources, no duration.
  const json end = ev::RunEndEvent{.status = "error", .exit_code = 125, .error = "no image"};
  EXPECT_EQ(end, json({{"status", "error"}, {"exit_code", 125}, {"error", "no image"}}));
  // The run context flattens into the record; labels only when there are some.
  const json blocked = ev::BlockedEvent{.run = {.code = kCtx.code}, .level = "BLOCKED", .score = 1};
  EXPECT_TRUE(blocked.contains("code"));
  EXPECT_FALSE(blocked.contains("run"));
  EXPECT_FALSE(blocked.contains("labels"));
  EXPECT_FALSE(blocked.contains("caller"));
  EXPECT_EQ(json(ev::BlockedEvent{.run = kCtx}).at("labels"), json({{"team", "data"}}));
  // A diff that is exact says nothing about approximation; an approximate one says so.
  EXPECT_FALSE(json(CodeDiff{"r", "s", 1, 1, false}).contains("approximate"));
  EXPECT_EQ(json(CodeDiff{"r", "s", 1, 1, true}).at("approximate"), true);
  // The denied record: seccomp's answer always, counts only when there are more than listed.
  const json denied = ev::DeniedEvent{.denied = {.syscalls = {{"bpf", 1, {}}}}};
  EXPECT_EQ(denied.at("answer"), "EPERM");
  EXPECT_FALSE(denied.contains("syscalls_other_count"));
  EXPECT_FALSE(denied.contains("network_refused_count"));
  EXPECT_FALSE(denied.contains("killed"));
  // A wheel pip gave no hash for keeps its null (the result's shape before the type existed).
  EXPECT_TRUE(json(sandboxrun::InstalledPackage{"six", "1", std::nullopt, "u"}).at("sha256").is_null());
}

TEST(AuditEvents, ReadsARunEndAsTheWriterMadeIt) {
  // A run_end line as sandboxrun 0.1 wrote it (executor_launch.cpp): peak memory under resources.
  const json line = json::parse(R"({"cgroup":"v1","code":{"name":"job.py","sha256":"ab","size":3,"stored":true},
    "duration_ms":41,"event":"run_end","exit_code":0,"hash":"h","prev":"p",
    "resources":{"cpu_ms":7,"memory_peak_bytes":5242880,"oom_kills":0,"pids_limit_hits":0,"pids_peak":1},
    "run_id":"r","seq":3,"status":"exited","ts":"t"})");
  const auto end = ev::read_event<ev::RunEndEvent>(line);
  ASSERT_TRUE(end);
  ASSERT_TRUE(end->resources);
  EXPECT_EQ(end->resources->memory_peak_bytes, 5242880u);
  EXPECT_EQ(end->duration_ms, 41u);
  EXPECT_EQ(end->run.code->name, "job.py");
  EXPECT_EQ(end->status, "exited");
  // A record from before a field existed reads as its default; a field of the wrong type does not read.
  EXPECT_TRUE(ev::read_event<ev::RunEndEvent>(json({{"status", "exited"}})));
  EXPECT_FALSE(ev::read_event<ev::RunEndEvent>(json({{"status", 3}})));
  EXPECT_FALSE(ev::read_event<ev::RunEndEvent>(json({{"resources", {{"memory_peak_bytes", "lots"}}}})));
  EXPECT_FALSE(ev::read_event<ev::RunEndEvent>(json::array()));
}

// docs/audit.md, section "## Events": one table per heading, `field` | type | meaning.
std::map<std::string, std::vector<std::pair<std::string, std::string>>> documented_tables() {
  std::ifstream in(std::string(SANDBOXRUN_SOURCE_DIR) + "/docs/audit.md");
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> tables;
  std::string line, heading;
  bool in_events = false;
  const std::regex row(R"(^\| `([a-z_0-9]+)` \| ([a-z ]+) \|.*)");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_events = line == "## Events";
    if (!in_events) continue;
    if (line.rfind("### `", 0) == 0) {
      heading = line.substr(5, line.find('`', 5) - 5);
      tables[heading];
    }
    std::smatch m;
    if (!heading.empty() && std::regex_match(line, m, row)) tables[heading].emplace_back(m[1], m[2]);
  }
  return tables;
}

// The documented rows of a run event follow a "(run context)" row that stands for RunContext.
template <class T>
std::vector<std::pair<std::string, std::string>> declared(bool run_event) {
  auto fields = sandboxrun::record::schema<T>();
  if (run_event) fields.erase(fields.begin(), fields.begin() + std::tuple_size_v<decltype(ev::RunContext::fields)>);
  return fields;
}

TEST(AuditEvents, TheDocsTablesNameWhatTheTypesDeclare) {
  const auto docs = documented_tables();
  ASSERT_FALSE(docs.empty()) << "docs/audit.md has no '## Events' section with tables";
  auto check = [&](const std::string& heading, const std::vector<std::pair<std::string, std::string>>& fields) {
    auto it = docs.find(heading);
    ASSERT_NE(it, docs.end()) << "docs/audit.md has no table for " << heading;
    EXPECT_EQ(it->second, fields) << "docs/audit.md's table for " << heading << " differs from its type";
  };
  check(std::string(ev::AssessmentEvent::kEvent), declared<ev::AssessmentEvent>(true));
  check(std::string(ev::BlockedEvent::kEvent), declared<ev::BlockedEvent>(true));
  check(std::string(ev::OverrideEvent::kEvent), declared<ev::OverrideEvent>(true));
  check(std::string(ev::OverrideRefusedEvent::kEvent), declared<ev::OverrideRefusedEvent>(true));
  check(std::string(ev::RunStartEvent::kEvent), declared<ev::RunStartEvent>(true));
  check(std::string(ev::RunEndEvent::kEvent), declared<ev::RunEndEvent>(true));
  check(std::string(ev::CellEvent::kEvent), declared<ev::CellEvent>(true));
  check(std::string(ev::CellEndEvent::kEvent), declared<ev::CellEndEvent>(true));
  check(std::string(ev::FilePutEvent::kEvent), declared<ev::FilePutEvent>(true));
  check(std::string(ev::FileGetEvent::kEvent), declared<ev::FileGetEvent>(true));
  check(std::string(ev::LimitEvent::kEvent), declared<ev::LimitEvent>(true));
  check(std::string(ev::NetworkEvent::kEvent), declared<ev::NetworkEvent>(true));
  check(std::string(ev::DeniedEvent::kEvent), declared<ev::DeniedEvent>(true));
  check(std::string(ev::DepsEvent::kEvent), declared<ev::DepsEvent>(true));
  check(std::string(ev::PruneEvent::kEvent), declared<ev::PruneEvent>(false));
  check(std::string(ev::PruneObjectsEvent::kEvent), declared<ev::PruneObjectsEvent>(false));
  check(std::string(ev::RepairEvent::kEvent), declared<ev::RepairEvent>(false));
  check("run context", declared<ev::RunContext>(false));
  check("manifest entry", declared<ev::ManifestEntry>(false));
  check("cell output item", declared<ev::CellOutputItem>(false));
  check("code", declared<CodeRef>(false));
  check("diff_from", declared<CodeDiff>(false));
  check("finding", declared<sandboxrun::Finding>(false));
  check("limits", declared<sandboxrun::LimitsRecord>(false));
  check("adjustment", declared<sandboxrun::AdjustmentRecord>(false));
  check("resources", declared<sandboxrun::ResourcesRecord>(false));
  check("id_slot", declared<sandboxrun::IdSlotRecord>(false));
  check("denied call", declared<sandboxrun::DeniedCall>(false));
  check("refused connection", declared<sandboxrun::RefusedConnection>(false));
  check("killed", declared<sandboxrun::KilledRecord>(false));
  check("installed package", declared<sandboxrun::InstalledPackage>(false));
  check("connection", declared<sandboxrun::ConnectionReport>(false));
}

}  // namespace
