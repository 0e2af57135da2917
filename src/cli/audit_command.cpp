// `sandboxrun audit verify|show|tail|repair|prune-objects`: the options, and which log.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "audit_command.hpp"
#include "cli.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cli {

namespace {

struct Common {
  std::string log;
  std::string config;
};

audit_cmd::Resolved resolve(const Common& c, const std::optional<std::filesystem::path>& default_config) {
  audit_cmd::Resolved r;
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

}  // namespace

int audit_command(const std::vector<std::string>& args, const std::optional<std::filesystem::path>& default_config) {
  CLI::App app("Inspect and check the tamper-evident audit log", "sandboxrun audit");
  app.require_subcommand(1);
  Common common;
  auto add_common = [&](CLI::App* sub) {
    sub->add_option("--log,--audit-log", common.log, "audit log file (default: from audit.yaml; --audit-log as for a run)");
    sub->add_option("--config", common.config, "audit.yaml to use");
  };
  bool as_json = false, no_objects = false;
  std::string key, anchor, run, caller, diff, session, grace = "1h";
  size_t n = 10, last = 0;

  CLI::App* verify = app.add_subcommand("verify", "check the hash chain and the stored objects; exit 0 when intact");
  add_common(verify);
  verify->add_option("--key", key, "HMAC key file (default: key_file from audit.yaml)");
  verify->add_flag("--json", as_json, "print the result as JSON");
  verify->add_flag("--no-objects", no_objects, "check the hash chain only, not the stored objects");
  verify->add_option("--anchor", anchor,
                     "checkpoints to hold the log to (default: its anchor file), e.g. the lines checkpoint.stream "
                     "sent to a log pipeline")
      ->check(CLI::ExistingFile);
  CLI::App* show = app.add_subcommand("show", "table of runs, or one run's records");
  add_common(show);
  show->add_flag("--json", as_json, "JSON lines");
  show->add_option("--run", run, "show the records of this run id");
  show->add_option("--diff", diff,
                   "unified diff of this run's code against its diff_from (the previous version); with --session: "
                   "cell N against N-1, or A..B");
  show->add_option("--session", session, "the cells of this session (its id), in order");
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
  if (!session.empty() && (!run.empty() || !caller.empty() || last > 0)) {
    std::cerr << "sandboxrun audit show: --session ID is a view of its own; --run, --caller and --last do not go with it\n";
    return exit_code::usage;
  }
  if (!diff.empty() && !run.empty()) {
    std::cerr << "sandboxrun audit show: --diff RUN_ID and --run ID are separate views; pass one\n";
    return exit_code::usage;
  }
  try {
    const audit_cmd::Resolved r = resolve(common, default_config);
    if (verify->parsed()) return audit_cmd::verify(r, key, anchor, as_json, !no_objects);
    if (show->parsed()) return audit_cmd::show(r, as_json, run, diff, caller, last, session);
    if (tail->parsed()) return audit_cmd::tail(r, n, as_json);
    if (prune->parsed()) return audit_cmd::prune_objects(r, grace);
    return audit_cmd::repair(r);
  } catch (const Error& e) {
    std::cerr << "sandboxrun audit: " << e.describe() << "\n";
    return 1;
  }
}

}  // namespace sandboxrun::cli
