// `sandboxrun audit verify|show|tail|repair|prune-objects`.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <unordered_map>

#include "internal.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/audit_events.hpp"
#include "audit/audit_verify.hpp"
#include "audit/objects.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"
#include "common/safe_open.hpp"

namespace sandboxrun {

namespace {

using nlohmann::json;

struct Common {
  std::string log;
  std::string config;
};

struct Resolved {
  AuditConfig cfg;
  std::filesystem::path log;
};

Resolved resolve(const Common& c, const std::optional<std::filesystem::path>& default_config) {
  Resolved r;
  if (!c.config.empty()) {
    if (::access(c.config.c_str(), R_OK) != 0) throw_errno("cannot read " + c.config);
    r.cfg = load_audit_config(c.config);
  } else if (default_config) {
    r.cfg = load_audit_config(*default_config);
  }
  r.log = !c.log.empty() ? std::filesystem::path(c.log)
          : !r.cfg.path.empty() ? r.cfg.path
                                : default_audit_log_path();
  r.log = std::filesystem::absolute(r.log);
  return r;
}

// ---- verify ----

json object_problem_json(const AuditObjectProblem& p) {
  return {{"kind", p.kind}, {"seq", p.seq}, {"run_id", p.run_id}, {"path", p.path}, {"sha256", p.sha256},
          {"detail", p.detail}};
}

// One line per missing or altered object (the first kMaxListed, then how many more).
void print_object_problems(const AuditObjectsResult& o) {
  constexpr size_t kMaxListed = 100;
  for (size_t i = 0; i < o.problems.size() && i < kMaxListed; ++i) {
    const auto& p = o.problems[i];
    std::cout << "object " << (p.kind == "missing" ? "MISSING" : "ALTERED") << ": seq " << p.seq << " run "
              << (p.run_id.empty() ? "-" : p.run_id) << " " << p.path << " sha256 " << p.sha256 << ": " << p.detail
              << "\n";
  }
  if (o.problems.size() > kMaxListed)
    std::cout << "... and " << o.problems.size() - kMaxListed << " more object problem(s) (see --json)\n";
}

int cmd_verify(const Resolved& r, const std::string& key_path, bool as_json, bool objects) {
  AuditVerifyOptions opt;
  opt.log = r.log;
  opt.anchor = audit::anchor_path(r.cfg, r.log);
  opt.objects = objects;
  if (!key_path.empty()) opt.key = load_audit_key(key_path);
  else if (!r.cfg.key_file.empty()) opt.key = load_audit_key(r.cfg.key_file);
  // Nothing at all at this path (no log, rotated file, anchor, lock file or object store):
  // nothing was ever logged here (a wrong --log), which is not a damaged log. A log deleted
  // from beside its lock file or anchor still is one.
  std::error_code ec;
  auto there = [&ec](const std::filesystem::path& p) { return std::filesystem::exists(std::filesystem::symlink_status(p, ec)); };
  if (!there(opt.log) && !(opt.anchor && there(*opt.anchor)) && !there(opt.log.string() + ".lock") &&
      !there(audit::objects_dir(opt.log)) && rotated_audit_files(opt.log).empty()) {
    std::cerr << "sandboxrun: error: no audit log at " << opt.log.string()
              << " (nothing has been logged there: check --log, or audit.yaml's path)\n";
    return exit_code::usage;
  }
  AuditVerifyResult res = verify_audit_log(opt);
  if (as_json) {
    json out{{"ok", res.ok()},
             {"log", r.log.string()},
             {"files", res.files.size()},
             {"records", res.records},
             {"bytes", res.bytes},
             {"first_seq", res.first_seq},
             {"last_seq", res.last_seq},
             {"last_hash", res.last_hash},
             {"checkpoints_matched", res.checkpoints_matched},
             {"keyed", opt.key.has_value()}};
    if (res.damage) {
      const auto& d = *res.damage;
      out["damage"] = {{"kind", to_string(d.kind)},
                       {"file", d.file.string()},
                       {"line", d.line},
                       {"offset", d.offset},
                       {"seq", d.seq ? json(*d.seq) : json(nullptr)},
                       {"detail", d.detail}};
    }
    if (res.objects) {
      json problems = json::array();
      for (const auto& p : res.objects->problems) problems.push_back(object_problem_json(p));
      out["objects"] = {{"referenced", res.objects->referenced}, {"checked", res.objects->checked},
                        {"bytes", res.objects->bytes}, {"problems", problems}};
    }
    std::cout << out.dump() << "\n";
    return res.ok() ? 0 : 1;
  }
  if (res.objects) print_object_problems(*res.objects);
  if (res.ok()) {
    std::cout << "audit log intact: " << r.log.string() << ": " << res.records << " records";
    if (res.records) std::cout << " (seq " << res.first_seq << ".." << res.last_seq << ")";
    std::cout << " in " << res.files.size() << " file(s), " << res.checkpoints_matched
              << " checkpoint(s) matched" << (opt.key ? ", HMAC verified" : "");
    if (res.objects)
      std::cout << ", " << res.objects->checked << " object(s) re-hashed (" << format_size(res.objects->bytes) << ")";
    std::cout << "\n";
  } else if (!res.damage) {
    std::cout << "audit log chain intact, but " << res.objects->problems.size() << " object(s) of "
              << audit::objects_dir(r.log).string() << " are missing or altered\n";
  } else {
    const auto& d = *res.damage;
    std::cout << "audit log DAMAGED: " << to_string(d.kind) << ": " << d.file.string();
    if (d.line) std::cout << " line " << d.line << " (byte " << d.offset << ")";
    if (d.seq) std::cout << " seq " << *d.seq;
    std::cout << ": " << d.detail << "\n";
  }
  return res.ok() ? 0 : 1;
}

// ---- show ----

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

int cmd_show(const Resolved& r, bool as_json, const std::string& run, const std::string& diff,
             const std::string& caller, size_t last) {
  if (!diff.empty()) {
    audit::print_code_diff(r.log, diff);
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

// ---- tail ----

int cmd_tail(const Resolved& r, size_t n, bool as_json) {
  auto files = audit_log_files(r.log);
  std::vector<std::string> lines;  // newest first
  for (auto f = files.rbegin(); f != files.rend() && lines.size() < n; ++f) {
    UniqueFd fd(::open(f->c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
      if (*f == r.log) throw_errno("cannot open " + f->string(), "check --log or the path in audit.yaml");
      continue;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + f->string());
    auto size = static_cast<uint64_t>(st.st_size);
    while (size > 0 && lines.size() < n) {
      audit::LastLine last = audit::read_last_line(fd.get(), size, *f);
      if (last.torn)
        std::cerr << "sandboxrun audit: " << f->string() << " ends with a torn record at byte "
                  << last.offset << " (run `sandboxrun audit repair`)\n";
      else
        lines.push_back(std::move(last.line));
      size = last.offset;
    }
  }
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (as_json) {
      std::cout << *it << "\n";
      continue;
    }
    json j = json::parse(*it, nullptr, false);
    if (j.is_discarded()) std::cout << "(not a record) " << *it << "\n";
    else print_record(j);
  }
  return 0;
}

// ---- prune-objects ----

int cmd_prune_objects(const Resolved& r, const std::string& grace_text) {
  const auto grace = audit::parse_duration(grace_text);
  if (!grace) {
    std::cerr << "sandboxrun audit prune-objects: --grace wants a duration like 3600, 90s, 30m, 12h or 7d\n";
    return exit_code::usage;
  }
  if (::access(r.log.c_str(), F_OK) != 0) throw_errno("cannot prune the objects of " + r.log.string(), "check --log");
  AuditLog log = AuditLog::open(r.cfg, r.log);
  ObjectPruneResult p = log.prune_objects(*grace);
  std::cout << "pruned " << audit::objects_dir(r.log).string() << ": deleted " << p.deleted << " object(s) ("
            << format_size(p.deleted_bytes) << "), kept " << p.referenced << " named by the log and "
            << p.kept_recent << " younger than the grace period\n";
  return 0;
}

// ---- repair ----

int cmd_repair(const Resolved& r) {
  if (::access(r.log.c_str(), F_OK) != 0) throw_errno("cannot repair " + r.log.string(), "check --log");
  AuditLog log = AuditLog::open(r.cfg, r.log);
  std::string tail;
  uint64_t at = 0;
  {
    UniqueFd lock_fd = open_trusted_file(audit::lock_path(r.log), O_RDWR | O_CREAT, 0600);
    audit::FileLock lock(lock_fd.get(), audit::lock_path(r.log));
    UniqueFd fd = open_trusted_file(r.log, O_RDWR);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + r.log.string());
    audit::LastLine last = audit::read_last_line(fd.get(), static_cast<uint64_t>(st.st_size), r.log);
    if (!last.torn) {
      std::cout << "nothing to repair: " << r.log.string() << " ends with a complete record\n";
      return 0;
    }
    tail = std::move(last.line);
    at = last.offset;
    if (::ftruncate(fd.get(), static_cast<off_t>(at)) != 0 || ::fdatasync(fd.get()) != 0)
      throw_errno("cannot truncate " + r.log.string());
  }
  // The torn bytes are kept in the object store, so the repair loses nothing.
  CodeRef kept = log.store_code(tail, "torn-tail");
  uint64_t seq = audit::append_event(log, "", audit::RepairEvent{.truncated_at = at, .truncated_bytes = tail.size(), .tail = kept},
                              /*durable=*/true);
  std::cout << "repaired " << r.log.string() << ": removed a torn record of " << tail.size()
            << " bytes at byte " << at << " (kept as objects/" << kept.sha256
            << "), recorded as seq " << seq << "\n";
  return 0;
}

}  // namespace

int audit_command(const std::vector<std::string>& args,
                  const std::optional<std::filesystem::path>& default_config) {
  CLI::App app("Inspect and check the tamper-evident audit log", "sandboxrun audit");
  app.require_subcommand(1);
  Common common;
  auto add_common = [&](CLI::App* sub) {
    sub->add_option("--log,--audit-log", common.log, "audit log file (default: from audit.yaml; --audit-log as for a run)");
    sub->add_option("--config", common.config, "audit.yaml to use");
  };
  bool as_json = false, no_objects = false;
  std::string key, run, caller, diff, grace = "1h";
  size_t n = 10, last = 0;

  CLI::App* verify = app.add_subcommand("verify", "check the hash chain and the stored objects; exit 0 when intact");
  add_common(verify);
  verify->add_option("--key", key, "HMAC key file (default: key_file from audit.yaml)");
  verify->add_flag("--json", as_json, "print the result as JSON");
  verify->add_flag("--no-objects", no_objects, "check the hash chain only, not the stored objects");
  CLI::App* show = app.add_subcommand("show", "table of runs, or one run's records");
  add_common(show);
  show->add_flag("--json", as_json, "JSON lines");
  show->add_option("--run", run, "show the records of this run id");
  show->add_option("--diff", diff, "unified diff of this run's code against its diff_from (the previous version)");
  show->add_option("--caller", caller, "only the runs made for this caller (run --caller)");
  show->add_option("--last", last, "only the last N runs (of those shown)")->check(CLI::Range(size_t{1}, size_t{1000000}));
  CLI::App* tail = app.add_subcommand("tail", "the last records");
  add_common(tail);
  tail->add_option("-n", n, "how many records")->check(CLI::Range(size_t{1}, size_t{1000000}));
  tail->add_flag("--json", as_json, "print the raw records");
  CLI::App* repair = app.add_subcommand("repair", "cut a torn last record (after a crash) and record it");
  add_common(repair);
  CLI::App* prune = app.add_subcommand("prune-objects", "delete stored objects that no record of the log names");
  add_common(prune);
  prune->add_option("--grace", grace, "keep objects modified within this long (default 1h; 0 only when idle)");

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return exit_code::usage;
  }
  if (!diff.empty() && !run.empty()) {
    std::cerr << "sandboxrun audit show: --diff RUN_ID and --run ID are separate views; pass one\n";
    return exit_code::usage;
  }
  try {
    Resolved r = resolve(common, default_config);
    if (verify->parsed()) return cmd_verify(r, key, as_json, !no_objects);
    if (show->parsed()) return cmd_show(r, as_json, run, diff, caller, last);
    if (tail->parsed()) return cmd_tail(r, n, as_json);
    if (prune->parsed()) return cmd_prune_objects(r, grace);
    return cmd_repair(r);
  } catch (const Error& e) {
    std::cerr << "sandboxrun audit: " << e.describe() << "\n";
    return 1;
  }
}

}  // namespace sandboxrun
