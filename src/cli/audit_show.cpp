// `sandboxrun audit show` (a table of runs, one run's records, a run's code diff) and
// `sandboxrun audit tail` (the last records).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <iostream>
#include <unordered_map>

#include "audit_command.hpp"
#include "sandboxrun/audit_events.hpp"
#include "sandboxrun/audit_read.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli::audit_cmd {

namespace {

using nlohmann::json;

struct RunSummary {
  std::string run_id, ts, name, sha256, level, trust, status, override_reason, caller;
  std::optional<int64_t> exit_code;
  std::optional<uint64_t> duration_ms, memory_peak;
};

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Calls fn(record) for every parseable record of the log set, oldest first.
template <typename Fn>
void for_each_record(const std::filesystem::path& log, Fn fn) {
  for (const auto& f : audit_log_files(log)) {
    std::ifstream in(f);
    if (!in) {
      if (f == log) throw_errno("cannot open " + f.string(), "check --log or the path in audit.yaml");
      continue;
    }
    std::string line;
    uint64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        std::cerr << "sandboxrun audit: " << f.string() << " line " << n
                  << " is not a record (run `sandboxrun audit verify`)\n";
        continue;
      }
      fn(j);
    }
  }
}

std::vector<RunSummary> summarize(const std::filesystem::path& log) {
  std::vector<RunSummary> runs;
  std::unordered_map<std::string, size_t> index;
  for_each_record(log, [&](const json& j) {
    std::string id = str(j, "run_id");
    if (id.empty()) return;
    auto [it, fresh] = index.try_emplace(id, runs.size());
    if (fresh) {
      runs.emplace_back();
      runs.back().run_id = id;
      runs.back().ts = str(j, "ts");
    }
    RunSummary& s = runs[it->second];
    const auto ctx = audit::read_event<audit::RunContext>(j);
    if (!ctx) return;  // a field of the wrong type: `audit verify` says what is wrong
    if (s.caller.empty() && ctx->caller) s.caller = *ctx->caller;
    if (ctx->code) {
      s.name = ctx->code->name;
      s.sha256 = ctx->code->sha256;
    }
    const std::string ev = str(j, "event");
    if (ev == audit::AssessmentEvent::kEvent) {
      if (auto e = audit::read_event<audit::AssessmentEvent>(j)) s.level = e->level;
    } else if (ev == audit::BlockedEvent::kEvent || ev == audit::OverrideRefusedEvent::kEvent) {
      s.status = "blocked";
    } else if (ev == audit::OverrideEvent::kEvent) {
      if (auto e = audit::read_event<audit::OverrideEvent>(j)) s.override_reason = e->reason;
    } else if (ev == audit::RunStartEvent::kEvent) {
      if (auto e = audit::read_event<audit::RunStartEvent>(j)) s.trust = e->trust_used;
    } else if (ev == audit::LimitEvent::kEvent) {
      if (auto e = audit::read_event<audit::LimitEvent>(j); e && s.status.empty()) s.status = e->kind;
    } else if (ev == audit::RunEndEvent::kEvent) {
      if (auto e = audit::read_event<audit::RunEndEvent>(j)) {
        s.status = e->status;
        s.exit_code = e->exit_code;
        s.duration_ms = e->duration_ms;
        if (e->resources) s.memory_peak = e->resources->memory_peak_bytes;
      }
    }
  });
  return runs;
}

json summary_json(const RunSummary& s) {
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  return {{"run_id", s.run_id},   {"ts", s.ts},          {"file", s.name},
          {"sha256", s.sha256},   {"level", s.level},    {"trust", s.trust},
          {"status", s.status},   {"exit_code", opt(s.exit_code)},
          {"duration_ms", opt(s.duration_ms)}, {"memory_peak_bytes", opt(s.memory_peak)},
          {"override", s.override_reason}, {"caller", s.caller}};
}

void print_table(const std::vector<RunSummary>& runs) {
  std::printf("%-26s %-36s %-20s %-7s %-9s %-9s %5s %10s %9s\n", "TIME", "RUN", "FILE", "LEVEL",
              "TRUST", "STATUS", "EXIT", "DURATION", "PEAK MEM");
  auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  for (const auto& s : runs) {
    std::string dur = s.duration_ms ? std::to_string(*s.duration_ms) + "ms" : "-";
    std::string mem = s.memory_peak ? format_size(*s.memory_peak) : "-";
    std::string code = s.exit_code ? std::to_string(*s.exit_code) : "-";
    std::string status = dash(s.status) + (s.override_reason.empty() ? "" : "*");
    std::printf("%-26s %-36s %-20s %-7s %-9s %-9s %5s %10s %9s\n", s.ts.c_str(), s.run_id.c_str(),
                dash(s.name).c_str(), dash(s.level).c_str(), dash(s.trust).c_str(), status.c_str(),
                code.c_str(), dur.c_str(), mem.c_str());
  }
}

// One record for people: seq, time, event, run, then the event's own fields.
void print_record(const json& j) {
  json rest = j;
  for (const char* k : {"seq", "ts", "run_id", "event", "prev", "hash", "kid"}) rest.erase(k);
  std::printf("%8s  %s  %-11s %s %s\n", j.contains("seq") ? j["seq"].dump().c_str() : "?",
              str(j, "ts").c_str(), str(j, "event").c_str(), str(j, "run_id").c_str(),
              rest.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
}

void print_code_diff(const std::filesystem::path& log, const std::string& run_id) {
  const AuditCodeDiff d = audit_code_diff(log, run_id);
  if (d.unified.empty())
    std::cout << d.name << ": run " << run_id << " ran the same code as run " << d.from_run << " (sha256 " << d.sha256
              << ")\n";
  else
    std::cout << d.unified;
  if (d.approximate)
    std::cerr << "sandboxrun audit: the versions differ in too many places for a minimal diff; this one is valid "
                 "but longer\n";
}

// One row of `audit show --session`: a cell (its record and its end) or a file put or got.
struct SessionRow {
  std::string ts, kind, level, status, detail, sha256;
  std::optional<uint64_t> cell, duration_ms;
};

json row_json(const SessionRow& r) {
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  return {{"ts", r.ts},         {"kind", r.kind},        {"cell", opt(r.cell)},   {"level", r.level},
          {"status", r.status}, {"duration_ms", opt(r.duration_ms)}, {"detail", r.detail}, {"sha256", r.sha256}};
}

int show_session(const std::filesystem::path& log, const std::string& session, bool as_json) {
  std::vector<SessionRow> rows;
  std::map<uint64_t, size_t> cell_rows;
  bool found = false;
  for_each_record(log, [&](const json& j) {
    if (str(j, "run_id") != session) return;
    found = true;
    const std::string ev = str(j, "event");
    if (ev == audit::CellEvent::kEvent) {
      auto e = audit::read_event<audit::CellEvent>(j);
      if (!e) return;
      cell_rows[e->cell] = rows.size();
      rows.push_back({str(j, "ts"), "cell", e->level, e->refused ? "blocked" : "running", "",
                      e->run.code ? e->run.code->sha256 : "", e->cell, std::nullopt});
    } else if (ev == audit::CellEndEvent::kEvent) {
      auto e = audit::read_event<audit::CellEndEvent>(j);
      if (!e || !cell_rows.count(e->cell)) return;
      SessionRow& r = rows[cell_rows[e->cell]];
      r.status = e->status;
      r.duration_ms = e->duration_ms;
      r.detail = e->ename.value_or("");
    } else if (ev == audit::FilePutEvent::kEvent) {
      if (auto e = audit::read_event<audit::FilePutEvent>(j))
        rows.push_back({str(j, "ts"), "put", e->level.value_or(""), e->refused ? "blocked" : "ok",
                        e->file.path + " (" + format_size(e->file.size) + ")", e->file.sha256, std::nullopt,
                        std::nullopt});
    } else if (ev == audit::FileGetEvent::kEvent) {
      if (auto e = audit::read_event<audit::FileGetEvent>(j))
        rows.push_back({str(j, "ts"), "get", "", "ok", e->file.path + " (" + format_size(e->file.size) + ")",
                        e->file.sha256, std::nullopt, std::nullopt});
    } else if (ev == audit::RunEndEvent::kEvent) {
      if (auto e = audit::read_event<audit::RunEndEvent>(j))
        rows.push_back({str(j, "ts"), "end", "", e->status, "", "", std::nullopt, e->duration_ms});
    }
  });
  if (!found) throw Error("no records for session " + session + " in " + log.string());
  if (as_json) {
    for (const auto& r : rows) std::cout << row_json(r).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("%-26s %-5s %5s %-7s %-8s %10s  %s\n", "TIME", "WHAT", "CELL", "LEVEL", "STATUS", "DURATION", "DETAIL");
  for (const auto& r : rows) {
    const std::string cell = r.cell ? std::to_string(*r.cell) : "-";
    const std::string dur = r.duration_ms ? std::to_string(*r.duration_ms) + "ms" : "-";
    std::printf("%-26s %-5s %5s %-7s %-8s %10s  %s\n", r.ts.c_str(), r.kind.c_str(), cell.c_str(),
                r.level.empty() ? "-" : r.level.c_str(), r.status.c_str(), dur.c_str(), r.detail.c_str());
  }
  return 0;
}

// --diff with --session: "N" (cell N against N-1) or "A..B".
int show_cell_diff(const std::filesystem::path& log, const std::string& session, const std::string& spec) {
  uint64_t from = 0, to = 0;
  const size_t dots = spec.find("..");
  try {
    size_t used = 0;
    if (dots == std::string::npos) {
      to = std::stoull(spec, &used);
      if (used != spec.size() || to < 2) throw std::invalid_argument(spec);
      from = to - 1;
    } else {
      from = std::stoull(spec.substr(0, dots), &used);
      if (used != dots) throw std::invalid_argument(spec);
      to = std::stoull(spec.substr(dots + 2), &used);
      if (used != spec.size() - dots - 2) throw std::invalid_argument(spec);
    }
  } catch (const std::logic_error&) {
    std::cerr << "sandboxrun audit show: --diff " << spec
              << ": with --session, give a cell N (against N-1, N >= 2) or A..B\n";
    return exit_code::usage;
  }
  const AuditCodeDiff d = audit_cell_diff(log, session, from, to);
  if (d.unified.empty()) std::cout << d.name << ": the same code (sha256 " << d.sha256 << ")\n";
  else std::cout << d.unified;
  return 0;
}

}  // namespace

int show(const Resolved& r, bool as_json, const std::string& run, const std::string& diff, const std::string& caller,
         size_t last, const std::string& session) {
  if (!session.empty()) return diff.empty() ? show_session(r.log, session, as_json) : show_cell_diff(r.log, session, diff);
  if (!diff.empty()) {
    print_code_diff(r.log, diff);
    return 0;
  }
  if (run.empty()) {
    auto runs = summarize(r.log);
    if (!caller.empty())
      runs.erase(std::remove_if(runs.begin(), runs.end(), [&](const RunSummary& s) { return s.caller != caller; }),
                 runs.end());
    if (last > 0 && runs.size() > last) runs.erase(runs.begin(), runs.end() - static_cast<std::ptrdiff_t>(last));
    if (as_json) {
      for (const auto& s : runs) std::cout << summary_json(s).dump() << "\n";
    } else {
      print_table(runs);
    }
    return 0;
  }
  bool found = false;
  for_each_record(r.log, [&](const json& j) {
    if (str(j, "run_id") != run) return;
    found = true;
    if (as_json) std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    else print_record(j);
  });
  if (!found) throw Error("no records for run " + run + " in " + r.log.string());
  return 0;
}

int tail(const Resolved& r, size_t n, bool as_json) {
  const AuditTail t = audit_tail(r.log, n);
  for (const auto& torn : t.torn)
    std::cerr << "sandboxrun audit: " << torn.file.string() << " ends with a torn record at byte " << torn.offset
              << " (run `sandboxrun audit repair`)\n";
  for (const auto& line : t.lines) {
    if (as_json) {
      std::cout << line << "\n";
      continue;
    }
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) std::cout << "(not a record) " << line << "\n";
    else print_record(j);
  }
  return 0;
}

}  // namespace sandboxrun::cli::audit_cmd
