// `sandboxrun repl [options]`: a session at a terminal (or fed by a pipe). Each block of lines
// is a cell: a block ends at an empty line, as Python's own prompt ends a compound statement, or
// at the end of the input. The cell's output is shown as a notebook would (its stdout and
// stderr, display items as text, the value of a trailing expression, the traceback), or with
// --json as one JSON object per cell.
#include <unistd.h>

#include <iostream>
#include <string>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/executor.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli {

namespace {

struct ReplOptions {
  std::optional<std::string> trust, config, audit_log, image, memory, caller;
  std::optional<double> timeout, cpus, lifetime;
  bool json = false;
};

// The next cell: lines up to an empty one (or the end); nullopt at the end of the input.
std::optional<std::string> next_block(bool prompt) {
  std::string block, line;
  if (prompt) std::cerr << ">>> " << std::flush;
  while (std::getline(std::cin, line)) {
    if (line.empty()) {
      if (!block.empty()) return block;
      if (prompt) std::cerr << ">>> " << std::flush;
      continue;
    }
    block += line + "\n";
    if (prompt) std::cerr << "... " << std::flush;
  }
  if (!block.empty()) return block;
  return std::nullopt;
}

// A display item or result as a terminal shows it: its text/plain, or what it is.
std::string shown(const MimeBundle& b) {
  for (const char* t : {"image/png", "image/jpeg", "image/svg+xml"})
    if (b.count(t)) return "[" + std::string(t) + ", " + b.at("text/plain") + "]";
  return b.at("text/plain");
}

void print_cell(const CellResult& c) {
  std::cout << c.output.stdout_data << std::flush;
  std::cerr << c.output.stderr_data;
  for (const auto& d : c.output.display) std::cout << shown(d) << "\n";
  if (c.output.result) std::cout << shown(*c.output.result) << "\n";
  if (c.output.error)
    for (const auto& line : c.output.error->traceback) std::cerr << line;
  if (c.status == CellStatus::blocked || c.status == CellStatus::lost || c.status == CellStatus::timeout)
    log::error("{}: {}", to_string(c.status), c.message);
  std::cout << std::flush;
}

}  // namespace

int repl_command(const std::vector<std::string>& argv) {
  ReplOptions opt;
  CLI::App app{"Run Python blocks in one sandboxed interpreter that keeps its state (a session)", "sandboxrun repl"};
  app.add_option("--trust", opt.trust, "trust level: untrusted, unknown or trusted (default from config)")
      ->check(CLI::IsMember({"untrusted", "unknown", "trusted"}));
  app.add_option("--config", opt.config, "sandbox.yaml, or the directory holding it");
  app.add_option("--audit-log", opt.audit_log, "audit log file (overrides config)");
  app.add_option("--image", opt.image, "image name, rootfs directory or OCI image layout[:tag]");
  app.add_option("--timeout", opt.timeout, "seconds per cell (may only tighten)")->check(positive_number("seconds"));
  app.add_option("--memory", opt.memory, "memory limit of the session such as 128m (may only tighten)");
  app.add_option("--cpus", opt.cpus, "CPUs (may only tighten)")->check(positive_number("CPUs"));
  app.add_option("--lifetime", opt.lifetime, "seconds the session may last (may only shorten sessions.lifetime)")
      ->check(positive_number("seconds"));
  app.add_option("--caller", opt.caller, "who the session is for (audited)");
  app.add_flag("--json", opt.json, "print one JSON object per cell");
  if (auto rc = parse_or_exit(app, argv)) return *rc;

  SessionRequest req;
  if (opt.trust) req.trust = parse_trust(*opt.trust);
  if (opt.image) req.image = *opt.image;
  if (opt.memory) {
    const auto m = parse_size(*opt.memory);
    if (!m) {
      log::error("--memory {}: expected a size such as 128m or 1g", *opt.memory);
      return exit_code::usage;
    }
    req.limits.memory_bytes = *m;
  }
  req.limits.cpus = opt.cpus;
  req.lifetime_s = opt.lifetime;
  req.caller = opt.caller;
  try {
    ExecutorOptions eo;
    if (opt.config) eo.config = *opt.config;
    if (opt.audit_log) eo.audit_log = *opt.audit_log;
    Executor executor = Executor::open(eo);
    Session session = executor.open_session(req);
    const bool prompt = !opt.json && ::isatty(0);
    if (prompt) std::cerr << "sandboxrun session " << session.id() << " (an empty line runs a block; Ctrl-D ends)\n";
    int rc = 0;
    while (auto code = next_block(prompt)) {
      const CellResult c = session.run({.code = *code, .timeout_s = opt.timeout});
      if (opt.json) std::cout << c.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      else print_cell(c);
      rc = c.status == CellStatus::ok ? 0 : c.status == CellStatus::error ? 1 : c.status == CellStatus::timeout ? 124
           : c.status == CellStatus::blocked ? exit_code::blocked : exit_code::setup_failed;
      if (c.status == CellStatus::lost) break;
    }
    session.close();
    return rc;
  } catch (const Error& e) {
    log::error("{}", e.describe());
    return exit_code::setup_failed;
  }
}

}  // namespace sandboxrun::cli
