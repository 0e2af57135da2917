// The pipeline of one run: assessment -> decision -> spec -> launch -> result, each step audited
// as it happens. Everything that does not change between runs is loaded once in open().
#include "sandboxrun/executor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <future>
#include <map>
#include <mutex>

#include "deps_phase.hpp"
#include "image_resolve.hpp"
#include "result_json.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/egress_proxy.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/install_paths.hpp"
#include "sandboxrun/seccomp.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun {

using nlohmann::json;

namespace {

constexpr Trust kTrustLevels[] = {Trust::untrusted, Trust::unknown, Trust::trusted};

// A profile compiled at open(), or why it could not be: the error surfaces only in a run that
// uses that profile, so a broken profile of one level does not stop the others.
struct CompiledProfile {
  std::optional<SeccompProgram> program;
  std::exception_ptr error;
};

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

json network_to_json(const net::EgressProxy& proxy) {
  auto c = proxy.counters();
  json conns = json::array();
  for (const auto& r : proxy.records())
    conns.push_back({{"host", r.host}, {"port", r.port}, {"address", r.address},
                     {"verdict", net::to_string(r.verdict)}, {"reason", r.reason},
                     {"bytes_up", r.bytes_up}, {"bytes_down", r.bytes_down}});
  return {{"allowed", c.allowed}, {"denied", c.denied}, {"bytes_up", c.bytes_up},
          {"bytes_down", c.bytes_down}, {"records_dropped", c.records_dropped}, {"connections", conns}};
}

}  // namespace

struct Executor::Impl {
  SandboxConfig cfg;
  SecurityConfig security;
  HostResources host;
  std::map<std::filesystem::path, CompiledProfile> profiles;  // every trust level's, by path
  // One writer handle for every thread: appends are serialised here (and across processes by
  // the log's own flock).
  mutable std::mutex audit_mu;
  mutable std::optional<AuditLog> audit;

  const SeccompProgram& profile(const std::filesystem::path& path) const {
    auto it = profiles.find(path);
    if (it == profiles.end())
      throw Error("seccomp profile " + path.string() + " was not compiled when the executor opened",
                  "report this as a bug");
    if (it->second.error) std::rethrow_exception(it->second.error);
    return *it->second.program;
  }

  uint64_t append(const std::string& event, const std::string& run_id, json fields, bool durable = false) const {
    std::lock_guard lock(audit_mu);
    return audit->append(event, run_id, std::move(fields), durable);
  }
  CodeRef store_code(std::string_view code, const std::string& name) const {
    std::lock_guard lock(audit_mu);
    return audit->store_code(code, name);
  }

  // The run's sandbox spec, image and seccomp program (everything but the launch). Throws Error.
  void prepare_launch(const RunRequest& req, RunResult& r, LaunchRequest& launch) const;
  // Launches the prepared request and records what happened.
  void launch_and_record(const RunRequest& req, RunResult& r, LaunchRequest& launch, const json& code,
                         MigrationWarmup& warmup, std::chrono::steady_clock::time_point entered) const;
};

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;
Executor::~Executor() = default;

Executor Executor::open(const ExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  const std::filesystem::path config_file =
      find_config(options.config ? std::optional<std::string>(options.config->string()) : std::nullopt);
  const std::filesystem::path config_dir = config_file.parent_path();
  // The assessor's rules (the largest file) load on a second thread while this one reads
  // sandbox.yaml and compiles the seccomp profiles.
  auto security_load = std::async(std::launch::async, [config_dir] {
    return load_security_config(config_dir / "security.yaml", install_paths().data_dir);
  });
  impl->cfg = load_sandbox_config(config_file);
  impl->host = probe_host_resources();
  const std::filesystem::path cache_root = default_cache_root();
  const std::filesystem::path seccomp_cache = cache_root.empty() ? cache_root : cache_root / "seccomp";
  for (Trust t : kTrustLevels) {
    const std::filesystem::path profile = resolve_spec(impl->cfg, t, {}, impl->host).seccomp_profile;
    if (impl->profiles.count(profile)) continue;
    CompiledProfile& c = impl->profiles[profile];
    try {
      c.program = load_or_compile_seccomp_profile(profile, SeccompContext{}, seccomp_cache);
    } catch (const Error&) {
      c.error = std::current_exception();
    }
  }
  impl->security = security_load.get();
  impl->audit.emplace(AuditLog::open(load_audit_config(impl->cfg.dir / "audit.yaml"), options.audit_log));
  return Executor(std::move(impl));
}

const SandboxConfig& Executor::config() const { return impl_->cfg; }
const std::filesystem::path& Executor::audit_log_path() const { return impl_->audit->path(); }

Assessment Executor::assess(std::string_view source) const { return assess_bytes(source, impl_->security); }

void Executor::Impl::prepare_launch(const RunRequest& req, RunResult& r, LaunchRequest& launch) const {
  SandboxSpec spec = resolve_spec(cfg, *r.decision.used, req.limits, host);
  core::ResolvedImage img = core::resolve_image(req.image ? *req.image : cfg.image);
  core::apply_image(spec, img);
  r.image_digest = img.digest;
  if (spec.network.mode == NetworkMode::allowlist) {
    net::validate_network_settings(spec.network);  // fail closed before anything starts
    for (const char* k : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "PIP_PROXY"})
      spec.env[k] = "http://127.0.0.1:3128";
    spec.env["NO_PROXY"] = "";
    spec.env["no_proxy"] = "";
  }
  launch.seccomp = &profile(spec.seccomp_profile);
  launch.run_id = r.run_id;
  launch.script_name = req.name;
  launch.script = req.code;
  launch.args = req.args;
  launch.capture = req.capture;
  launch.stdout_fd = req.stdout_fd;
  launch.stderr_fd = req.stderr_fd;
  launch.on_sample = req.on_sample;
  launch.wipe_begin = req.wipe_begin;
  launch.wipe_end = req.wipe_end;
  launch.spec = spec;
  r.spec = std::move(spec);
}

void Executor::Impl::launch_and_record(const RunRequest& req, RunResult& r, LaunchRequest& launch, const json& code,
                                       MigrationWarmup& warmup, std::chrono::steady_clock::time_point entered) const {
  const SandboxSpec& spec = *r.spec;
  std::unique_ptr<net::EgressProxy> proxy;
  launch.on_proxy_socket = [&](UniqueFd listen_fd) {
    proxy = std::make_unique<net::EgressProxy>(std::move(listen_fd), spec.network);
    proxy->start();
  };
  launch.cgroup_warmup = &warmup;
  append("run_start", r.run_id,
         {{"code", code}, {"trust_requested", to_string(r.decision.requested)}, {"trust_used", to_string(spec.trust)},
          {"limits", core::limits_to_json(spec)}, {"config_digest", cfg.digest}, {"config", cfg.file.string()},
          {"image_digest", r.image_digest}, {"uid", ::getuid()}, {"args", req.args},
          {"overridden", r.decision.overridden}},
         /*durable=*/false);
  // The record must be on disk before any untrusted code runs, but the sync (an fdatasync, ~5 ms)
  // need not delay the sandbox's setup: the launcher holds the payload back until it is done.
  launch.before_exec = [this] {
    std::lock_guard lock(audit_mu);
    audit->sync();
  };
  r.prepare = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - entered);
  try {
    r.outcome = run_sandbox(launch);
  } catch (const Error& e) {
    r.outcome = RunOutcome{};
    r.outcome.error = e.describe();
  }
  json net_summary;
  if (proxy) {
    proxy->stop();
    r.network = network_to_json(*proxy);
    const net::ProxyCounters c = proxy->counters();
    net_summary = {{"allowed", c.allowed}, {"denied", c.denied}};
    for (const auto& rec : proxy->records())
      append("network", r.run_id,
             {{"code", code}, {"host", rec.host}, {"port", rec.port}, {"address", rec.address},
              {"verdict", net::to_string(rec.verdict)}, {"reason", rec.reason},
              {"bytes_up", rec.bytes_up}, {"bytes_down", rec.bytes_down}});
  }
  const RunOutcome& o = r.outcome;
  r.status = o.status;
  r.exit_code = o.exit_code;
  r.signal = o.signal;
  r.error = o.error;
  for (const auto& d : o.degradations) r.warnings.push_back("degraded: " + d);
  if (o.status == RunStatus::oom || o.status == RunStatus::timeout)
    append("limit", r.run_id, {{"code", code}, {"kind", to_string(o.status)}});
  if (o.usage.pids_max_hits > 0)
    append("limit", r.run_id, {{"code", code}, {"kind", "pids"}, {"refused_forks", o.usage.pids_max_hits}});
  json end = {{"code", code}, {"status", to_string(o.status)}, {"exit_code", o.exit_code},
              {"duration_ms", o.duration.count()}, {"resources", core::resources_to_json(o.usage)},
              {"cgroup", o.cgroup_backend}};
  if (!o.error.empty()) end["error"] = o.error;
  if (!o.degradations.empty()) end["degradations"] = o.degradations;
  if (!net_summary.is_null()) end["network"] = net_summary;
  r.audit_seq = append("run_end", r.run_id, std::move(end));
}

RunResult Executor::run(const RunRequest& req) const {
  const Impl& im = *impl_;
  // From here to the sandbox's placement is assessment and audit work: long enough to hide the
  // cgroup v1 migration's grace period behind it.
  MigrationWarmup warmup;
  const auto entered = std::chrono::steady_clock::now();
  RunResult r;
  r.run_id = new_run_id();
  r.decision.requested = req.trust.value_or(im.cfg.default_trust);

  try {
    r.assessment = assess(req.code);
  } catch (const Error& e) {
    r.error = e.describe();
    r.exit_code = exit_code::setup_failed;
    r.audit_seq = im.append("run_end", r.run_id, {{"status", "error"}, {"exit_code", r.exit_code}, {"error", r.error}});
    return r;
  }
  const Assessment& a = r.assessment;
  const json code = im.store_code(req.code, req.name);
  const json findings = a.to_json()["findings"];
  im.append("assessment", r.run_id,
            {{"code", code}, {"level", to_string(a.level)}, {"score", a.score}, {"findings", findings}});

  r.decision.used = steer_trust(a.level, r.decision.requested, req.override_reason.has_value(), im.security);
  if (r.decision.refused()) {
    r.status = RunStatus::blocked;
    r.exit_code = exit_code::blocked;
    r.audit_seq = im.append("blocked", r.run_id,
                            {{"code", code}, {"level", to_string(a.level)}, {"score", a.score},
                             {"trust_requested", to_string(r.decision.requested)}});
    return r;
  }
  r.decision.overridden = req.override_reason && !steer_trust(a.level, r.decision.requested, false, im.security);
  if (r.decision.overridden)
    im.append("override", r.run_id,
              {{"code", code}, {"reason", *req.override_reason}, {"uid", ::getuid()}, {"level", to_string(a.level)},
               {"trust_used", to_string(*r.decision.used)}});
  if (*r.decision.used != r.decision.requested)
    r.warnings.push_back("assessment " + std::string(to_string(a.level)) + " (score " + std::to_string(a.score) +
                         "): running as " + to_string(*r.decision.used) + " instead of " +
                         to_string(r.decision.requested));

  LaunchRequest launch;
  core::DepsHold deps_hold;  // keeps the installed set from eviction until the run ends
  try {
    im.prepare_launch(req, r, launch);
    if (!req.requirements.empty() || !launch.spec.requirements.empty()) {
      const SeccompProgram& untrusted = im.profile(resolve_spec(im.cfg, Trust::untrusted, {}, im.host).seccomp_profile);
      core::DepsInputs in{im.cfg, im.host, untrusted, r.run_id, r.image_digest, req.requirements,
                          req.requirements_origin, [&](json ev) {
                            ev["code"] = code;
                            im.append("deps", r.run_id, std::move(ev));
                          }};
      deps_hold = core::provide_deps(in, launch.spec, r.deps);
      r.spec = launch.spec;
    }
  } catch (const Error& e) {
    // Nothing started: the run ends here, and the log says why.
    r.status = RunStatus::error;
    r.exit_code = exit_code::setup_failed;
    r.error = e.describe();
    r.audit_seq = im.append("run_end", r.run_id,
                            {{"code", code}, {"status", "error"}, {"exit_code", r.exit_code}, {"error", r.error}});
    return r;
  }
  im.launch_and_record(req, r, launch, code, warmup, entered);
  return r;
}

}  // namespace sandboxrun
