// The pipeline of one run: assessment -> decision -> spec -> launch -> result, each step audited
// as it happens. Everything that does not change between runs is loaded once in open().
#include "sandboxrun/executor.hpp"
#include "executor_impl.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

#include "deps_phase.hpp"
#include "warm_pool.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/fd.hpp"
#include "common/install_paths.hpp"
#include "sandboxrun/seccomp.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun {

using nlohmann::json;

namespace {

constexpr Trust kTrustLevels[] = {Trust::untrusted, Trust::unknown, Trust::trusted};


// The built-in analysis of the exact bytes that will run; with Bandit enabled, Bandit reads a
// private copy of those same bytes (never the caller's file, which may change meanwhile).
Assessment assess_bytes(std::string_view code, const SecurityConfig& security) {
  if (!security.bandit.enabled) return assess_source(code, security);
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir == '/' ? tmpdir : "/tmp") + "/sandboxrun-assess-XXXXXX.py";
  UniqueFd fd(::mkstemps(tmpl.data(), 3));
  if (!fd) throw_errno("cannot create a temporary copy for bandit in " + tmpl, "check that TMPDIR (or /tmp) is writable");
  struct Unlink {
    const char* path;
    ~Unlink() { ::unlink(path); }
  } unlink_copy{tmpl.c_str()};
  if (!write_all(fd.get(), code.data(), code.size())) throw_errno("cannot write " + tmpl);
  return assess_file(tmpl, security);
}


// A library caller may build RunRequest::inputs by hand: the same rules as load_input(); and
// samples need monitoring on.
void check_request(const RunRequest& req, const SandboxConfig& cfg, const std::string& script_name) {
  uint64_t total = 0;
  size_t path_bytes = 0;
  std::set<std::string> seen{script_name};
  for (const auto& f : req.inputs) {
    // The inputs manifest goes into run_start: it must fit an audit record.
    if ((path_bytes += f.path.size()) > OutputManifest::kMaxPathBytes)
      throw Error("the input paths together exceed " + std::to_string(OutputManifest::kMaxPathBytes) + " bytes",
                  "pass fewer files or shorter names").as(ErrorKind::usage);
    if (!plain_relative_path(f.path))
      throw Error("input '" + f.path + "' is not a plain relative path inside /work", "name it like data/a.csv").as(ErrorKind::usage);
    if (!seen.insert(f.path).second)
      throw Error("two files would be /work/" + f.path, "give the input another name (SRC:NAME)").as(ErrorKind::usage);
    total += f.data.size();
  }
  if (req.inputs.size() > cfg.input_files_limit)
    throw Error(std::to_string(req.inputs.size()) + " input files; input_files_limit is " +
                    std::to_string(cfg.input_files_limit), "pass fewer, or raise input_files_limit in sandbox.yaml").as(ErrorKind::usage);
  if (total > cfg.input_limit)
    throw Error("the inputs hold " + format_size(total) + "; input_limit is " + format_size(cfg.input_limit),
                "pass less, or raise input_limit in sandbox.yaml").as(ErrorKind::usage);
  if (req.on_sample && !cfg.monitoring)
    throw Error("resource samples were asked for (--stats), but monitoring.enabled is false in " + cfg.file.string(),
                "set monitoring.enabled: true, or run without --stats").as(ErrorKind::usage);
}


}  // namespace


Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;
Executor::~Executor() = default;

Executor Executor::open(const ExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  Impl& im = *impl;
  // A service's pool starts first: it makes namespaces between runs. A single run's one is made
  // when the run takes it (a pool of size 0).
  im.single_run = options.single_run;
  im.stop_signals = options.stop_signals;
  im.netns = options.single_run ? std::make_unique<launch::NetnsPool>(0) : std::make_unique<launch::NetnsPool>();
  const std::filesystem::path config_file =
      find_config(options.config ? std::optional<std::string>(options.config->string()) : std::nullopt);
  const std::filesystem::path config_dir = config_file.parent_path();
  // One thread, in order: sandbox.yaml first, so that a broken one is the error reported, then
  // the files beside it. Loading on two threads gained nothing on a host that packs threads onto
  // one CPU (a new thread runs first, on its creator's CPU, for the ~1 ms bursts here) and cost
  // a thread: measured on the development VM, interleaved, the CLI 24.59 -> 23.75 ms and 100
  // runs 8 at a time 3-6% faster, sequential.
  im.cfg = load_sandbox_config(config_file);
  im.host = probe_host_resources();
  const std::filesystem::path cache_root = default_cache_root();
  im.seccomp_cache = cache_root.empty() ? cache_root : cache_root / "seccomp";
  if (!options.single_run)
    for (Trust t : kTrustLevels) {
      const std::filesystem::path profile = resolve_spec(im.cfg, t, {}, im.host).seccomp_profile;
      if (!im.profiles.count(profile)) im.profiles.emplace(profile, im.compile_profile(profile));
    }
  im.security = load_security_config(config_dir / "security.yaml", install_paths().data_dir);
  try {
    const AuditConfig audit_cfg = load_audit_config(config_dir / "audit.yaml");
    if (options.stdout_is_protocol && audit_cfg.stream == CheckpointStream::out)
      throw Error((config_dir / "audit.yaml").string() + ": checkpoint.stream: stdout would write into the protocol "
                  "on standard output", "set checkpoint.stream: stderr (or none) for this command");
    im.audit.emplace(AuditLog::open(audit_cfg, options.audit_log));
  } catch (Error& e) {
    throw std::move(e).as(ErrorKind::audit);  // a broken audit.yaml stays a config error
  }
  im.cgroups = std::make_shared<const CgroupHost>(im.cfg.cgroup);
  // A sandbox set up ahead would hold the container's cgroup that cgroup.mode enclosing gives
  // to one run at a time.
  if (options.warm && !options.single_run && im.cfg.cgroup.mode != CgroupMode::enclosing) {
    im.warm_pool = std::make_unique<core::WarmPool>([&im](Trust t) { return im.prepare_warm(t); });
    im.warm_pool->want(im.cfg.default_trust);
  }
  return Executor(std::move(impl));
}

const SandboxConfig& Executor::config() const { return impl_->cfg; }
bool Executor::wait_warm(Trust trust, std::chrono::milliseconds timeout) const {
  return impl_->warm_pool && impl_->warm_pool->wait_ready(trust, timeout);
}
const std::filesystem::path& Executor::audit_log_path() const { return impl_->audit->path(); }

Assessment Executor::assess(std::string_view source) const { return impl_->assess_text(source); }
Assessment Executor::Impl::assess_text(std::string_view source) const { return assess_bytes(source, security); }

Assessment Executor::Impl::assess_job(const RunRequest& req, std::vector<CodeRef>& stored) const {
  Assessment a = assess_bytes(req.code, security);
  for (const auto& f : req.inputs) {
    if (!is_python(f.path)) continue;
    Assessment m = assess_bytes(f.data, security);
    stored.push_back(store_code(f.data, f.path));
    a.level = std::max(a.level, m.level);
    a.score += m.score;
    for (auto& finding : m.findings) {
      finding.message = f.path + ": " + finding.message;
      a.findings.push_back(std::move(finding));
    }
    for (auto& n : m.notes) a.notes.push_back(f.path + ": " + n);
  }
  return a;
}


RunResult Executor::run(const RunRequest& req) const { return impl_->execute(req, nullptr); }

RunResult Executor::Impl::execute(const RunRequest& req, const SessionPlan* session) const {
  const Impl& im = *this;
  const auto entered = std::chrono::steady_clock::now();
  RunResult r;
  r.decision.requested = req.trust.value_or(im.cfg.default_trust);
  // A bad caller, label or run id is the caller's mistake: refused before anything is recorded
  // (a record under a duplicate run id would merge two runs in the log).
  try {
    validate_run_identity(req);
    if (req.stdin_fd >= 0 && req.stdin_data)
      throw Error("the request sets both stdin_fd and stdin_data", "give the program's stdin one way only");
  } catch (const Error& e) {
    r.error = e.describe();
    r.error_kind = ErrorKind::usage;
    r.exit_code = exit_code::usage;
    return r;
  }
  // Claimed before anything is recorded, so that no record carries an id twice.
  bool claimed = true;
  try {
    claimed = !req.run_id || im.claim_run_id(*req.run_id);
  } catch (const Error& e) {
    r.error = "cannot check the run id: " + e.describe();
    r.error_kind = ErrorKind::audit;
    r.exit_code = exit_code::setup_failed;
    return r;
  }
  if (!claimed) {
    r.error = Error("run id " + *req.run_id + " is already in the audit log " + im.audit->path().string(),
                    "choose a new --run-id, or leave it out for a random one")
                  .describe();
    r.error_kind = ErrorKind::usage;
    r.exit_code = exit_code::usage;
    return r;
  }
  // A sandbox set up ahead for this trust level, when the request fits one: its run id is this
  // run's (its cgroup has the name), and it is dropped if the run ends up not fitting after all.
  std::optional<core::WarmSandbox> warm;
  if (im.warm_pool && core::fits_warm(req, im.security.max_bytes)) warm = im.warm_pool->take(r.decision.requested);
  r.run_id = warm ? warm->base.run_id : req.run_id ? *req.run_id : new_run_id();
  r.caller = req.caller;
  r.labels = req.labels;

  std::vector<CodeRef> input_code;
  try {
    check_request(req, im.cfg, sandbox_script_name(req.name));
    for (const auto& f : req.inputs) r.inputs.push_back(record_of(f));
    if (!session) r.assessment = im.assess_job(req, input_code);
  } catch (const Error& e) {
    r.error = e.describe();
    r.error_kind = e.kind();
    r.exit_code = exit_code::setup_failed;
    r.audit_seq = im.append(audit::RunEndEvent{.status = "error", .exit_code = r.exit_code, .error = r.error}, r);
    return r;
  }
  const Assessment& a = r.assessment;
  // Stored and recorded when the next record is written, or while the sandbox sets itself up.
  Impl::RunRecords log(im, r);
  const CodeRef code = im.code_ref(req.code, req.name);
  const audit::RunContext ctx{.code = code};
  if (code.stored) log.defer([&im, &req, sha = code.sha256] { im.store_file(req.code, sha, /*code=*/true); });
  if (session) {
    // The driver is sandboxrun's own program; each cell is assessed and recorded (session.cpp).
    r.decision.used = r.decision.requested;
  } else {
    log.defer_record(audit::AssessmentEvent{.run = ctx, .level = to_string(a.level), .score = a.score,
                                            .findings = a.findings,
                                            .input_code = input_code.empty() ? std::nullopt : std::optional(input_code)});
    r.decision =
        decide(a.level, r.decision.requested, req.override_reason, im.security, ProcessIdentity::of_this_process());
  }
  // An override that the verdict needs must pass the policy, or the run is refused here.
  if (const auto& why = r.decision.override_refused) {
    r.status = RunStatus::blocked;
    r.exit_code = exit_code::blocked;
    r.error = "override refused: " + *why;
    const std::string_view given = std::string_view(*req.override_reason).substr(0, OverridePolicy::kMaxReasonBytes);
    r.audit_seq = log.append(audit::OverrideRefusedEvent{.run = ctx, .reason = std::string(given), .uid = ::getuid(),
                                                         .why = *why, .level = to_string(a.level),
                                                         .trust_requested = to_string(r.decision.requested)});
    return r;
  }
  if (r.decision.refused()) {
    r.status = RunStatus::blocked;
    r.exit_code = exit_code::blocked;
    r.audit_seq = log.append(audit::BlockedEvent{.run = ctx, .level = to_string(a.level), .score = a.score,
                                                 .trust_requested = to_string(r.decision.requested)});
    return r;
  }
  if (r.decision.overridden)
    log.defer_record(audit::OverrideEvent{.run = ctx, .reason = *req.override_reason, .uid = ::getuid(),
                                          .level = to_string(a.level), .trust_used = to_string(*r.decision.used)});
  if (*r.decision.used != r.decision.requested)
    r.warnings.push_back("assessment " + std::string(to_string(a.level)) + " (score " + std::to_string(a.score) +
                         "): running as " + to_string(*r.decision.used) + " instead of " +
                         to_string(r.decision.requested));

  LaunchRequest launch;
  UniqueFd out_dir;
  core::DepsHold deps_hold;  // keeps the installed set from eviction until the run ends
  try {
    if (warm) launch.id_slot = warm->base.id_slot;
    // Checked (and created) before anything starts, the dependency phase included.
    if (req.output_dir) out_dir = open_output_dir(*req.output_dir);
    im.prepare_launch(req, r, launch, [&](const SandboxSpec& spec) {
      const SeccompProgram& untrusted = im.profile(resolve_spec(im.cfg, Trust::untrusted, {}, im.host).seccomp_profile);
      core::DepsInputs in{im.cfg, im.host, untrusted, r.run_id, r.image_digest, req.requirements,
                          req.requirements_origin,
                          [&](const DepsReport& report, const std::optional<std::string>& error) {
                            log.append(audit::DepsEvent{.run = ctx, .deps = report,
                                                        .status = error ? "failed" : "ok", .error = error});
                          }};
      try {
        deps_hold = core::provide_deps(in, spec, r.deps);
      } catch (Error& e) {
        throw std::move(e).as(ErrorKind::deps);
      }
      return deps_hold.site;
    });
    if (warm && (*r.decision.used != warm->trust || r.image_digest != warm->image_digest)) warm.reset();
  } catch (const Error& e) {
    // Nothing started: the run ends here, and the log says why.
    r.status = RunStatus::error;
    r.exit_code = exit_code::setup_failed;
    r.error = e.describe();
    r.error_kind = e.kind();
    r.audit_seq = log.append(audit::RunEndEvent{.run = ctx, .status = "error", .exit_code = r.exit_code, .error = r.error});
    return r;
  }
  if (session) {
    launch.lifetime_s = session->lifetime_s;
    launch.on_started = session->on_started;
  }
  im.launch_and_record(req, r, launch, code, log, std::move(out_dir), entered, warm ? &*warm : nullptr);
  return r;
}

}  // namespace sandboxrun
