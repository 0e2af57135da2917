// `sandboxrun [run]`: arguments -> RunRequest -> Executor::run -> exit status and output.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/executor.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli {

namespace {

constexpr uint64_t kMaxScriptBytes = 16ull << 20;

struct RunOptions {
  std::string file;
  std::vector<std::string> args;
  std::string trust;
  std::optional<std::string> config;
  bool json = false;
  std::optional<double> timeout;
  std::optional<std::string> memory;
  std::optional<double> cpus;
  std::optional<uint64_t> pids;
  std::optional<std::string> override_reason;
  std::optional<std::string> audit_log;
  std::optional<std::string> stats;
  std::optional<std::string> image;
  std::vector<std::string> inputs;
  bool stdin_stream = false;
  std::optional<std::string> output;
  std::optional<std::string> caller;
  std::vector<std::string> labels;
  std::vector<std::string> env;
  std::optional<std::string> run_id;
  std::optional<std::string> requirements;
  bool verbose = false;
};

// Reads the script without following a final symlink and only if it is a regular file, so a
// FIFO or device cannot hang or feed the launcher. Returns nullopt (with a message) on failure.
// `option`: the option that named the file ("--requirements"), said in every message; empty for
// the program itself.
std::optional<std::string> read_script(const std::string& path, const std::string& option = {}) {
  const std::string what = option.empty() ? path : option + " " + path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    int err = errno;
    std::string why = err == ELOOP ? "it is a symbolic link; pass the real file" : std::strerror(err);
    log::error("cannot open {}: {}", what, why);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    log::error("{} is not a regular file", what);
    return std::nullopt;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxScriptBytes) {
    log::error("{} is {} bytes; the limit is {}", what, st.st_size, format_size(kMaxScriptBytes));
    return std::nullopt;
  }
  try {
    return read_fd(fd.get(), kMaxScriptBytes, path, "pass a Python file of at most " + format_size(kMaxScriptBytes));
  } catch (const Error& e) {
    log::error("{}", e.describe());
    return std::nullopt;
  }
}

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A stats sink: "-" is stdout, anything else a file created fresh.
class StatsSink {
 public:
  explicit StatsSink(const std::optional<std::string>& where) {
    if (!where) return;
    if (*where == "-") {
      fd_ = 1;
      return;
    }
    owned_.reset(::open(where->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!owned_) throw_errno("cannot open stats file " + *where, "pass a writable path or - for stdout");
    fd_ = owned_.get();
  }
  bool enabled() const { return fd_ >= 0; }
  void write(const CgroupUsage& u, std::chrono::milliseconds t) const {
    nlohmann::json j = {{"t_ms", t.count()},          {"memory_bytes", u.memory_current},
                        {"memory_peak_bytes", u.memory_peak}, {"cpu_ms", u.cpu_usec / 1000},
                        {"pids", u.pids_current},     {"oom_kills", u.oom_kills}};
    std::string line = j.dump() + "\n";
    write_all(fd_, line.data(), line.size());
  }

 private:
  UniqueFd owned_;
  int fd_ = -1;
};

// The assessor's finding for a file that cannot compile (policies/assess-rules.yaml).
constexpr std::string_view kDoesNotCompile = "SR-INTENT-072";

void print_findings(const Assessment& a) {
  std::cerr << "sandboxrun: assessment " << to_string(a.level) << " (score " << a.score << ")\n";
  for (const auto& f : a.findings)
    std::cerr << "  line " << f.line << ": [" << f.severity << "] " << f.rule << ": " << f.message << "\n";
}

// What the person at the shell is told after a streamed run that did not end normally.
void explain_end(const RunResult& r, const std::string& file) {
  switch (r.status) {
    case RunStatus::blocked:
      print_findings(r.assessment);
      if (r.decision.override_refused) {
        log::error("{} was BLOCKED by the assessor and the {}", file, r.error);
      } else if (std::any_of(r.assessment.findings.begin(), r.assessment.findings.end(),
                             [](const Finding& f) { return f.rule == kDoesNotCompile; })) {
        // An override would not help: Python could not run it either.
        log::error("{} was BLOCKED: it is not Python 3 that compiles (an unclosed string or bracket, or another "
                   "language); fix the file, as an override would only run a SyntaxError",
                   file);
      } else {
        log::error("{} was BLOCKED by the assessor; run it anyway with --override \"reason\" (audited)", file);
      }
      break;
    case RunStatus::timeout:
      log::error("timeout: the program ran longer than {}s and was killed", r.spec->limits.timeout_s);
      break;
    case RunStatus::oom:
      log::error("out of memory: the program exceeded mem_limit {} and was killed",
                 format_size(r.spec->limits.memory_bytes));
      break;
    case RunStatus::error: log::error("{}", r.error); break;
    default: break;
  }
}

// Each KEY=VALUE of a repeatable option into `into`; false (said) at the first without a KEY.
}  // namespace

int run_command(const std::vector<std::string>& argv, char* wipe_begin, char* wipe_end) {
  RunOptions opt;
  CLI::App app{"Run a Python file in the sandbox", "sandboxrun run"};
  app.add_option("FILE", opt.file, "Python file to run")->required();
  app.add_option("ARGS", opt.args, "arguments for the program (after --)");
  app.add_option("--trust", opt.trust, "trust level: untrusted, unknown or trusted (default from config)")
      ->check(CLI::IsMember({"untrusted", "unknown", "trusted"}));
  app.add_option("--config", opt.config, "sandbox.yaml, or the directory holding it");
  app.add_flag("--json", opt.json, "capture output and print one JSON result object");
  app.add_option("--timeout", opt.timeout, "wall-clock seconds (may only tighten)")->check(positive_number("seconds"));
  app.add_option("--memory", opt.memory, "memory limit such as 128m (may only tighten)");
  app.add_option("--cpus", opt.cpus, "CPUs, fractional allowed (may only tighten)")->check(positive_number("CPUs"));
  app.add_option("--pids", opt.pids, "process/thread limit (may only tighten)")->check(CLI::Range(8, 1 << 22));
  app.add_option("--override", opt.override_reason, "run a BLOCKED file anyway; the reason is audited");
  app.add_option("--audit-log", opt.audit_log, "audit log file (overrides config)");
  app.add_option("--stats", opt.stats, "write resource samples as JSON lines to PATH, or - for stdout");
  app.add_option("--image", opt.image, "image name, rootfs directory or OCI image layout[:tag]");
  // One value per occurrence: `--input a.csv lib job.py` must not take lib as a second input.
  app.add_option("--input", opt.inputs, "copy a file or directory into /work (SRC[:NAME], repeatable)")
      ->allow_extra_args(false);
  app.add_flag("-i,--stdin", opt.stdin_stream, "stream this command's stdin to the program");
  app.add_option("--output", opt.output, "copy files created or changed under /work to DIR (new or empty)");
  app.add_option("--caller", opt.caller, "who the run is for (audited)");
  app.add_option("--label", opt.labels, "KEY=VALUE recorded with the run (repeatable)")->allow_extra_args(false);
  app.add_option("-e,--env", opt.env, "KEY=VALUE in the program's environment (repeatable; names audited)")
      ->allow_extra_args(false);
  app.add_option("--run-id", opt.run_id, "the run's id (A-Z a-z 0-9 . _ -, at most 64; must be new)");
  app.add_option("--requirements", opt.requirements,
                 "pip requirements file, installed in a separate, cached phase (index only, binary wheels)");
  app.add_flag("-v,--verbose", opt.verbose, "log what the launcher does");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  if (opt.verbose) log::set_level(log::Level::info);
  // Words after FILE are the program's only after `--`: `--input a.csv b.py job.py` must not run
  // b.py with job.py as its argument without a word.
  if (!opt.args.empty() && std::find(argv.begin(), argv.end(), "--") == argv.end()) {
    log::error("{} is followed by {}: one file runs; pass the program's arguments after -- ({} -- {}), and more "
               "files with --input",
               opt.file, opt.args.front(), opt.file, opt.args.front());
    return exit_code::usage;
  }
  if (opt.json && opt.stats && *opt.stats == "-") {
    // Both would write to stdout, and the result would no longer be one JSON object there.
    log::error("--stats - and --json both write to stdout: give --stats a file");
    return exit_code::usage;
  }

  RunRequest req;
  if (opt.memory) {
    auto m = parse_size(*opt.memory);
    if (!m || *m < (16u << 20)) {
      log::error("--memory {}: expected a size like 128m or 1g, at least 16MiB", *opt.memory);
      return exit_code::usage;
    }
    req.limits.memory_bytes = m;
  }
  req.limits.timeout_s = opt.timeout;
  req.limits.cpus = opt.cpus;
  req.limits.pids = opt.pids;
  if (!opt.trust.empty()) req.trust = parse_trust(opt.trust);
  req.override_reason = opt.override_reason;
  req.image = opt.image;
  req.args = opt.args;
  req.capture = opt.json;
  req.caller = opt.caller;
  req.run_id = opt.run_id;
  if (!key_values("--env", opt.env, req.env) || !key_values("--label", opt.labels, req.labels)) return exit_code::usage;
  try {
    validate_run_identity(req);
  } catch (const Error& e) {
    log::error("{}", e.describe());
    return exit_code::usage;
  }
  req.wipe_begin = wipe_begin;
  req.wipe_end = wipe_end;

  auto script = read_script(opt.file);
  if (!script) return exit_code::file_missing;
  req.code = std::move(*script);
  req.name = base_name(opt.file);
  if (opt.requirements) {
    // The same checks: a regular file, bounded. A missing one is a setup error, as a missing
    // --input is (125).
    auto text = read_script(*opt.requirements, "--requirements");
    if (!text) return exit_code::setup_failed;
    req.requirements = std::move(*text);
    req.requirements_origin = *opt.requirements;
  }

  try {
    ExecutorOptions eo;
    eo.single_run = true;
    if (opt.config) eo.config = *opt.config;
    if (opt.audit_log) eo.audit_log = *opt.audit_log;
    const auto opening = std::chrono::steady_clock::now();
    Executor executor = Executor::open(eo);
    const double open_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - opening).count();
    // Inputs are read here, once, before anything starts; over a cap is a setup error (125).
    const InputLimits input_limits{executor.config().input_limit, executor.config().input_files_limit};
    for (const auto& arg : opt.inputs) {
      auto [src, name] = parse_input_arg(arg);
      load_input(src, name, input_limits, req.inputs);
    }
    if (opt.stdin_stream) req.stdin_fd = 0;
    if (opt.output) req.output_dir = *opt.output;
    StatsSink stats(opt.stats);
    if (stats.enabled())
      req.on_sample = [&stats](const CgroupUsage& u, std::chrono::milliseconds t) { stats.write(u, t); };
    RunResult r = executor.run(req);
    if (r.spec)
      for (const auto& a : r.spec->adjustments)
        if (!a.requested) log::info("{}: {} -> {} ({})", a.limit, a.from, a.to, a.reason);  // the rest are warnings
    for (const auto& w : r.warnings) log::warn("{}", w);
    if (r.outputs && !opt.json)
      for (const auto& s : r.outputs->skipped) log::warn("--output: {} not copied: {}", s.path, s.reason);
    if (opt.json) {
      // A setup failure is said on stderr too: the JSON may go to a program, the message to a person.
      if (r.status == RunStatus::error || r.decision.override_refused) log::error("{}", r.error);
      nlohmann::json j = r.to_json();
      j["timings_ms"]["open"] = open_ms;  // config, rules, seccomp programs: once per process here
      std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      write_all(1, text.data(), text.size());
    } else {
      if (r.outcome.stdout_truncated || r.outcome.stderr_truncated)
        log::warn("the program's output was cut at output_limit ({} per stream)",
                  format_size(r.spec->limits.output_bytes));
      if (auto denied = DeniedRecord::of(r.outcome.denied, r.network)) log::warn("{}", denied->summary());
      explain_end(r, opt.file);
    }
    return r.exit_code;
  } catch (const Error& e) {
    // The configuration could not be loaded, or the audit log could not record the run.
    log::error("{}", e.describe());
    if (opt.json) {
      nlohmann::json j = {{"status", "error"},
                          {"exit_code", exit_code::setup_failed},
                          {"error", e.describe()},
                          {"error_kind", to_string(e.kind())}};
      std::string text = j.dump() + "\n";
      write_all(1, text.data(), text.size());
    }
    return exit_code::setup_failed;
  }
}

}  // namespace sandboxrun::cli
