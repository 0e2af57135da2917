#include "session_cli.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/job_io.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli {

void add_session_options(CLI::App& app, SessionOptions& opt) {
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
  app.add_option("--idle-timeout", opt.idle_timeout,
                 "seconds without a cell before the session is closed (may only shorten sessions.idle_timeout)")
      ->check(positive_number("seconds"));
  app.add_option("--caller", opt.caller, "who the session is for (audited)");
  app.add_option("-e,--env", opt.env, "KEY=VALUE in the session's environment (repeatable; names audited)")
      ->allow_extra_args(false);
  app.add_option("--label", opt.labels, "KEY=VALUE recorded with the session (repeatable)")->allow_extra_args(false);
  app.add_flag("--svg-figures", opt.svg_figures, "matplotlib figures as image/svg+xml too (PNG always)");
  app.add_option("-I,--input", opt.inputs, "SRC[:NAME] copied into /work before the first cell (repeatable; "
                                           ".py files are part of the session's code)")
      ->allow_extra_args(false);
  app.add_option("--requirements", opt.requirements, "pip requirements file, installed first (cached)");
}

std::optional<SessionSetup> session_setup(const SessionOptions& opt) {
  SessionSetup s;
  SessionRequest& req = s.request;
  if (opt.trust) req.trust = parse_trust(*opt.trust);
  if (opt.image) req.image = *opt.image;
  if (opt.memory) {
    const auto m = parse_size(*opt.memory);
    if (!m) {
      log::error("--memory {}: expected a size such as 128m or 1g", *opt.memory);
      return std::nullopt;
    }
    req.limits.memory_bytes = *m;
  }
  req.limits.cpus = opt.cpus;
  req.limits.timeout_s = opt.timeout;
  req.lifetime_s = opt.lifetime;
  req.idle_timeout_s = opt.idle_timeout;
  req.caller = opt.caller;
  req.svg_figures = opt.svg_figures;
  if (!key_values("--env", opt.env, req.env) || !key_values("--label", opt.labels, req.labels)) return std::nullopt;
  if (opt.requirements) {
    std::ifstream in(*opt.requirements, std::ios::binary);
    if (!in) {
      log::error("--requirements {}: {}", *opt.requirements, std::strerror(errno));
      return std::nullopt;
    }
    req.requirements.assign(std::istreambuf_iterator<char>(in), {});
    req.requirements_origin = *opt.requirements;
  }
  if (opt.config) s.executor.config = *opt.config;
  if (opt.audit_log) s.executor.audit_log = *opt.audit_log;
  return s;
}

void load_session_inputs(const SessionOptions& opt, const Executor& executor, SessionRequest& request) {
  const InputLimits limits{executor.config().input_limit, executor.config().input_files_limit};
  for (const auto& arg : opt.inputs) {
    auto [src, name] = parse_input_arg(arg);
    load_input(src, name, limits, request.inputs);
  }
}

namespace {

// A display item or result as a terminal shows it: its text/plain, or what it is.
std::string shown(const MimeBundle& b) {
  const auto plain = b.find("text/plain");
  const std::string text = plain == b.end() ? "" : plain->second;
  for (const char* t : {"image/png", "image/jpeg", "image/svg+xml"})
    if (b.count(t)) return "[" + std::string(t) + ", " + text + "]";
  return text;
}

}  // namespace

void print_cell(CellStatus status, const CellOutput& out, const std::string& message) {
  std::cout << out.stdout_data << std::flush;
  std::cerr << out.stderr_data;
  for (const auto& d : out.display) std::cout << shown(d) << "\n";
  if (out.result) std::cout << shown(*out.result) << "\n";
  if (out.error)
    for (const auto& line : out.error->traceback) std::cerr << line;
  if (status == CellStatus::blocked || status == CellStatus::lost || status == CellStatus::timeout)
    log::error("{}: {}", to_string(status), message);
  std::cout << std::flush;
}

int cell_exit_code(CellStatus status) {
  switch (status) {
    case CellStatus::ok: return 0;
    case CellStatus::error: return 1;
    case CellStatus::timeout: return exit_code::timeout;
    case CellStatus::blocked: return exit_code::blocked;
    case CellStatus::lost: return exit_code::setup_failed;
  }
  return exit_code::setup_failed;
}

}  // namespace sandboxrun::cli
