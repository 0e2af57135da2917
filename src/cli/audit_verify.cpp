// `sandboxrun audit verify`: the hash chain and the stored objects, for a person or as JSON.
#include <iostream>

#include "audit_command.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli::audit_cmd {

namespace {

using nlohmann::json;

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

}  // namespace

int verify(const Resolved& r, const std::string& key_path, const std::string& anchor, bool as_json, bool objects) {
  AuditVerifyOptions opt;
  opt.log = r.log;
  opt.anchor = anchor.empty() ? audit::anchor_path(r.cfg, r.log) : std::filesystem::path(anchor);
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

}  // namespace sandboxrun::cli::audit_cmd
