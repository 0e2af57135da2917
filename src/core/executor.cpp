// The pipeline of one run: assessment -> decision -> spec -> launch -> result, each step audited
// as it happens. Everything that does not change between runs is loaded once in open().
#include "sandboxrun/executor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "deps_phase.hpp"
#include "image_resolve.hpp"
#include "result_json.hpp"
#include "sandboxrun/audit.hpp"
#include "audit/audit_verify.hpp"
#include "launch/netns_pool.hpp"
#include "net/egress_proxy.hpp"
#include "sandboxrun/fd.hpp"
#include "common/install_paths.hpp"
#include "sandboxrun/seccomp.hpp"
#include "common/size.hpp"

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

bool is_python(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".py") == 0;
}

// A library caller may build RunRequest::inputs by hand: the same rules as load_input().
void check_inputs(const RunRequest& req, const SandboxConfig& cfg, const std::string& script_name) {
  uint64_t total = 0;
  size_t path_bytes = 0;
  std::set<std::string> seen{script_name};
  for (const auto& f : req.inputs) {
    // The inputs manifest goes into run_start: it must fit an audit record.
    if ((path_bytes += f.path.size()) > OutputManifest::kMaxPathBytes)
      throw Error("the input paths together exceed " + std::to_string(OutputManifest::kMaxPathBytes) + " bytes",
                  "pass fewer files or shorter names");
    if (!plain_relative_path(f.path))
      throw Error("input '" + f.path + "' is not a plain relative path inside /work", "name it like data/a.csv");
    if (!seen.insert(f.path).second)
      throw Error("two files would be /work/" + f.path, "give the input another name (SRC:NAME)");
    total += f.data.size();
  }
  if (req.inputs.size() > cfg.input_files_limit)
    throw Error(std::to_string(req.inputs.size()) + " input files; input_files_limit is " +
                    std::to_string(cfg.input_files_limit), "pass fewer, or raise input_files_limit in sandbox.yaml");
  if (total > cfg.input_limit)
    throw Error("the inputs hold " + format_size(total) + "; input_limit is " + format_size(cfg.input_limit),
                "pass less, or raise input_limit in sandbox.yaml");
}

// A manifest for the audit log: each entry says whether its bytes are in the object store.
json records_to_json(const std::vector<FileRecord>& records, const std::vector<bool>& stored) {
  json a = json::array();
  for (size_t i = 0; i < records.size(); ++i) {
    a.push_back(to_json(records[i]));
    a.back()["stored"] = i < stored.size() && stored[i];
  }
  return a;
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
  class RunRecords;
  SandboxConfig cfg;
  SecurityConfig security;
  HostResources host;
  std::map<std::filesystem::path, CompiledProfile> profiles;  // every trust level's, by path
  // One writer handle for every thread: appends are serialised here (and across processes by
  // the log's own flock).
  mutable std::mutex audit_mu;
  mutable std::optional<AuditLog> audit;
  // Network namespaces made between runs (as root): a run's clone enters one instead of
  // making its own, the costliest part of the clone.
  std::unique_ptr<launch::NetnsPool> netns;
  // The host's cgroup side (probe, parents, sweep), worked out at open instead of every run.
  std::shared_ptr<const CgroupHost> cgroups;

  const SeccompProgram& profile(const std::filesystem::path& path) const {
    auto it = profiles.find(path);
    if (it == profiles.end())
      throw Error("seccomp profile " + path.string() + " was not compiled when the executor opened",
                  "report this as a bug");
    if (it->second.error) std::rethrow_exception(it->second.error);
    return *it->second.program;
  }

  // Every record of a run carries who it is for.
  uint64_t append(const std::string& event, const RunResult& r, json fields) const {
    if (r.caller) fields["caller"] = *r.caller;
    if (!r.labels.empty()) fields["labels"] = r.labels;
    std::lock_guard lock(audit_mu);
    return audit->append(event, r.run_id, std::move(fields));
  }
  // Claims the run id in the audit log's index: false when a record or an earlier claim has it.
  bool claim_run_id(const std::string& id) const {
    std::lock_guard lock(audit_mu);
    return audit->claim_run_id(id);
  }
  CodeRef code_ref(std::string_view code, const std::string& name) const { return audit->code_ref(code, name); }
  CodeRef store_code(std::string_view code, const std::string& name) const {
    std::lock_guard lock(audit_mu);
    return audit->store_code(code, name);
  }
  bool store_file(std::string_view data, const std::string& sha256, bool code = false) const {
    std::lock_guard lock(audit_mu);
    return audit->store_file(data, sha256, code);
  }
  std::optional<CodeDiff> version_diff(const RunRequest& req, const RunResult& r) const {
    std::lock_guard lock(audit_mu);
    return audit->version_diff(r.caller, req.name, req.code);
  }
  void set_latest_version(const RunRequest& req, RunResult& r, const std::string& sha256) const {
    try {
      std::lock_guard lock(audit_mu);
      audit->set_latest_version(r.caller, req.name, sha256, r.run_id);
    } catch (const Error& e) {
      r.warnings.push_back("audit: the next run of " + req.name + " will not diff against this one: " + e.describe());
    }
  }

  // The script and every .py input, assessed: the most severe verdict wins, and an input's
  // findings name its file. Each of them is kept in the code store (refs in `stored`).
  Assessment assess_job(const RunRequest& req, json& stored) const;
  // The run's sandbox spec, image and seccomp program (everything but the launch). Throws Error.
  void prepare_launch(const RunRequest& req, RunResult& r, LaunchRequest& launch) const;
  // Copies what the program left in /work to the output directory (also after a timeout, an
  // OOM kill or a signal: the fd outlives the sandbox).
  // `stored` says, per copied file, whether the object store kept it.
  void collect_job_outputs(const RunRequest& req, RunResult& r, const UniqueFd& work_dir, const UniqueFd& out_dir,
                           std::vector<bool>& stored) const;
  // Launches the prepared request and records what happened.
  void launch_and_record(const RunRequest& req, RunResult& r, LaunchRequest& launch, const json& code,
                         RunRecords& log, UniqueFd out_dir, std::chrono::steady_clock::time_point entered) const;
};

// One run's audit records, in order. The steps up to run_start may wait (defer): the launcher
// takes them while the sandbox sets itself up (before_exec), before it releases the payload, and
// any record appended earlier takes them first, so the log's order is the order of events and
// no program starts unrecorded. A step is dropped only once it succeeded.
class Executor::Impl::RunRecords {
 public:
  RunRecords(const Impl& im, const RunResult& r) : im_(im), r_(r) {}
  void defer(std::function<void()> step) { pending_.push_back(std::move(step)); }
  void defer_record(std::string event, json fields) {
    defer([this, event = std::move(event), fields = std::move(fields)] { im_.append(event, r_, fields); });
  }
  void flush() {
    for (; !pending_.empty(); pending_.pop_front()) pending_.front()();
  }
  uint64_t append(const std::string& event, json fields) {
    flush();
    return im_.append(event, r_, std::move(fields));
  }

 private:
  const Impl& im_;
  const RunResult& r_;
  std::deque<std::function<void()>> pending_;
};

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;
Executor::~Executor() = default;

Executor Executor::open(const ExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  // Started first: its first namespace (~0.5 ms) is made while the configuration loads.
  impl->netns = options.single_run ? std::make_unique<launch::NetnsPool>(1, 1) : std::make_unique<launch::NetnsPool>();
  const std::filesystem::path config_file =
      find_config(options.config ? std::optional<std::string>(options.config->string()) : std::nullopt);
  const std::filesystem::path config_dir = config_file.parent_path();
  // Two threads: sandbox.yaml and the seccomp programs on a second one; the assessor's rules,
  // the audit log, then the cgroup host (which needs sandbox.yaml's settings) on this one. The
  // rules go here since decoding them allocates the most, and this thread's heap grows in large
  // steps where a second thread's grows a page at a time (an mprotect each); the rest is split
  // to even out the two threads.
  Impl& im = *impl;
  std::promise<void> cfg_loaded;  // declared first: outlives the thread that sets it
  std::future<void> cfg_ready = cfg_loaded.get_future();
  auto sandbox_load = std::async(std::launch::async, [&im, &cfg_loaded, config_file] {
    try {
      im.cfg = load_sandbox_config(config_file);
    } catch (...) {
      cfg_loaded.set_exception(std::current_exception());
      throw;
    }
    cfg_loaded.set_value();  // im.cfg is not written again
    im.host = probe_host_resources();
    const std::filesystem::path cache_root = default_cache_root();
    const std::filesystem::path seccomp_cache = cache_root.empty() ? cache_root : cache_root / "seccomp";
    for (Trust t : kTrustLevels) {
      const std::filesystem::path profile = resolve_spec(im.cfg, t, {}, im.host).seccomp_profile;
      if (im.profiles.count(profile)) continue;
      CompiledProfile& c = im.profiles[profile];
      try {
        c.program = load_or_compile_seccomp_profile(profile, SeccompContext{}, seccomp_cache);
      } catch (const Error&) {
        c.error = std::current_exception();
      }
    }
  });
  bool cfg_ok = true;
  try {
    im.security = load_security_config(config_dir / "security.yaml", install_paths().data_dir);
    im.audit.emplace(AuditLog::open(load_audit_config(config_dir / "audit.yaml"), options.audit_log));
  } catch (...) {
    // A broken sandbox.yaml is the error to report: the files beside it come second.
    try {
      cfg_ready.get();
    } catch (...) {
      sandbox_load.get();  // rethrows the sandbox.yaml error, after the thread has finished
    }
    throw;
  }
  try {
    cfg_ready.get();
  } catch (...) {
    cfg_ok = false;  // sandbox_load.get() rethrows it
  }
  if (cfg_ok) im.cgroups = std::make_shared<const CgroupHost>(im.cfg.cgroup);
  sandbox_load.get();
  return Executor(std::move(impl));
}

const SandboxConfig& Executor::config() const { return impl_->cfg; }
const std::filesystem::path& Executor::audit_log_path() const { return impl_->audit->path(); }

Assessment Executor::assess(std::string_view source) const { return assess_bytes(source, impl_->security); }

Assessment Executor::Impl::assess_job(const RunRequest& req, json& stored) const {
  Assessment a = assess_bytes(req.code, security);
  stored = json::array();
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

void Executor::Impl::prepare_launch(const RunRequest& req, RunResult& r, LaunchRequest& launch) const {
  SandboxSpec spec = resolve_spec(cfg, *r.decision.used, req.limits, host);
  for (const auto& [k, v] : req.env) spec.env[k] = v;  // before what the run itself sets below
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
  launch.inputs = &req.inputs;
  launch.stdin_fd = req.stdin_fd;
  launch.stdin_data = req.stdin_data ? &*req.stdin_data : nullptr;
  // Claimed here, not in the launcher, so that run_start can name the host ids the run will use.
  if (::geteuid() == 0) launch.id_slot = std::make_shared<const IdSlot>(IdSlot::claim(spec.id_ranges));
  launch.spec = spec;
  r.spec = std::move(spec);
}

void Executor::Impl::launch_and_record(const RunRequest& req, RunResult& r, LaunchRequest& launch, const json& code,
                                       RunRecords& log, UniqueFd out_dir, std::chrono::steady_clock::time_point entered) const {
  const SandboxSpec& spec = *r.spec;
  std::unique_ptr<net::EgressProxy> proxy;
  launch.on_proxy_socket = [&](UniqueFd listen_fd) {
    proxy = std::make_unique<net::EgressProxy>(std::move(listen_fd), spec.network);
    proxy->start();
  };
  // --output: filled from /work after the run.
  UniqueFd work_dir;
  if (out_dir) launch.on_work_dir = [&work_dir](UniqueFd fd) { work_dir = std::move(fd); };
  std::vector<bool> inputs_stored;
  for (size_t i = 0; i < req.inputs.size(); ++i)
    inputs_stored.push_back(store_file(req.inputs[i].data, r.inputs[i].sha256, is_python(req.inputs[i].path)));
  json start = {{"code", code}, {"trust_requested", to_string(r.decision.requested)}, {"trust_used", to_string(spec.trust)},
                {"limits", core::limits_to_json(spec)}, {"config_digest", cfg.digest}, {"config", cfg.file.string()},
                {"image_digest", r.image_digest}, {"uid", ::getuid()}, {"args", req.args},
                {"overridden", r.decision.overridden}, {"inputs", records_to_json(r.inputs, inputs_stored)}};
  if (!req.env.empty()) {
    json names = json::array();  // values may be credentials: the names say what was set
    for (const auto& kv : req.env) names.push_back(kv.first);
    start["env"] = std::move(names);
  }
  if (launch.id_slot) start["id_slot"] = core::id_slot_to_json(launch.id_slot->info());
  log.defer([this, &req, &r, start = std::move(start)]() mutable {
    if (std::optional<CodeDiff> diff = version_diff(req, r)) start["diff_from"] = *diff;
    append("run_start", r, std::move(start));
  });
  // The records must be on disk before any untrusted code runs, but writing them and the sync
  // (an fdatasync, ~5 ms on some disks) need not delay the sandbox's setup: the launcher holds
  // the payload back until they are done.
  launch.before_exec = [this, &log] {
    log.flush();
    std::lock_guard lock(audit_mu);
    audit->sync();
  };
  // Only the next run's diff_from reads it: written once this program runs.
  launch.after_exec = [this, &req, &r, sha = code.value("sha256", "")] { set_latest_version(req, r, sha); };
  r.prepare = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - entered);
  const UniqueFd prepared_netns = netns->take();  // empty: the clone makes one
  launch.netns_fd = prepared_netns.get();
  launch.cgroup_host = cgroups;
  try {
    r.outcome = run_sandbox(launch);
  } catch (const Error& e) {
    r.outcome = RunOutcome{};
    r.outcome.error = e.describe();
  }
  if (prepared_netns) netns->replenish();
  json net_summary;
  if (proxy) {
    proxy->stop();
    r.network = network_to_json(*proxy);
    const net::ProxyCounters c = proxy->counters();
    net_summary = {{"allowed", c.allowed}, {"denied", c.denied}};
    // Every allowed connection is a record; refusals past the first kMaxRefusedListed are
    // counted in one, so a program cannot flood the log (and push older runs out) with them.
    uint64_t refused = 0;
    for (const auto& rec : proxy->records()) {
      if (rec.verdict != net::Verdict::allowed && ++refused > core::kMaxRefusedListed) continue;
      log.append("network",
             {{"code", code}, {"host", rec.host}, {"port", rec.port}, {"address", rec.address},
              {"verdict", net::to_string(rec.verdict)}, {"reason", rec.reason},
              {"bytes_up", rec.bytes_up}, {"bytes_down", rec.bytes_down}});
    }
    if (refused > core::kMaxRefusedListed)
      log.append("network", {{"code", code}, {"verdict", "denied"}, {"omitted", refused - core::kMaxRefusedListed},
                             {"reason", "more refused connections than are recorded one by one"}});
  }
  std::vector<bool> outputs_stored;
  if (req.output_dir) collect_job_outputs(req, r, work_dir, out_dir, outputs_stored);
  const RunOutcome& o = r.outcome;
  r.status = o.status;
  r.exit_code = o.exit_code;
  r.signal = o.signal;
  r.error = o.error;
  // A limit asked for and not granted is said, not only recorded in limits.adjustments.
  for (const auto& a : r.spec->adjustments)
    if (a.requested) r.warnings.push_back(a.limit + " " + a.from + " not granted, " + a.to + " applies: " + a.reason);
  for (const auto& d : o.degradations) r.warnings.push_back("degraded: " + d);
  r.warnings.insert(r.warnings.end(), o.warnings.begin(), o.warnings.end());
  if (o.status == RunStatus::oom || o.status == RunStatus::timeout)
    log.append("limit", {{"code", code}, {"kind", to_string(o.status)}});
  if (o.usage.pids_max_hits > 0)
    log.append("limit", {{"code", code}, {"kind", "pids"}, {"refused_forks", o.usage.pids_max_hits}});
  json end = {{"code", code}, {"status", to_string(o.status)}, {"exit_code", o.exit_code},
              {"duration_ms", o.duration.count()}, {"resources", core::resources_to_json(o.usage)},
              {"cgroup", o.cgroup_backend}};
  if (!o.error.empty()) end["error"] = o.error;
  if (o.stdout_truncated || o.stderr_truncated)
    end["output_truncated"] = {{"stdout", o.stdout_truncated}, {"stderr", o.stderr_truncated}};
  if (!o.degradations.empty()) end["degradations"] = o.degradations;
  if (!net_summary.is_null()) end["network"] = net_summary;
  if (r.outputs) {
    end["outputs"] = records_to_json(r.outputs->files, outputs_stored);
    end["outputs_truncated"] = r.outputs->truncated;
    end["outputs_skipped"] = r.outputs->skipped_count;
  }
  if (json denied = core::denied_to_json(o.denied, r.network); !denied.is_null()) {
    denied["code"] = code;
    log.append("denied", std::move(denied));
  }
  r.audit_seq = log.append("run_end", std::move(end));
}

void Executor::Impl::collect_job_outputs(const RunRequest& req, RunResult& r, const UniqueFd& work_dir,
                                         const UniqueFd& out_dir, std::vector<bool>& stored) const {
  const Limits& lim = r.spec->limits;
  if (!work_dir) {
    r.outputs = OutputManifest{};
    r.outputs->error = "the sandbox ended before /work was ready; no outputs";
    return;
  }
  // The script and the inputs come back only when the program changed them.
  std::vector<InputFile> as_given = req.inputs;
  as_given.push_back({sandbox_script_name(req.name), req.code, 0444});
  // A file the store cannot keep is still delivered; its manifest entry says stored: false (one
  // warning: a full disk would otherwise give one per file).
  auto keep = [&, warned = false](const FileRecord& f, std::string_view data) mutable {
    try {
      stored.push_back(store_file(data, f.sha256));
    } catch (const Error& e) {
      stored.push_back(false);
      if (!std::exchange(warned, true))
        r.warnings.push_back("audit: output " + f.path + " (and any later ones marked stored: false) not kept in "
                             "the object store: " + e.describe());
    }
  };
  r.outputs = collect_outputs(work_dir.get(), out_dir.get(), as_given, {lim.output_files, lim.output_total_bytes}, keep);
  if (!r.outputs->error.empty()) r.warnings.push_back("--output: " + r.outputs->error);
  if (r.outputs->truncated)
    r.warnings.push_back("--output: " + std::to_string(r.outputs->skipped_count) +
                         " file(s) not copied; output_files_limit " + std::to_string(lim.output_files) +
                         ", output_bytes_limit " + format_size(lim.output_total_bytes));
}

RunResult Executor::run(const RunRequest& req) const {
  const Impl& im = *impl_;
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
    r.exit_code = exit_code::usage;
    return r;
  }
  // Claimed before anything is recorded, so that no record carries an id twice.
  bool claimed = true;
  try {
    claimed = !req.run_id || im.claim_run_id(*req.run_id);
  } catch (const Error& e) {
    r.error = "cannot check the run id: " + e.describe();
    r.exit_code = exit_code::setup_failed;
    return r;
  }
  if (!claimed) {
    r.error = Error("run id " + *req.run_id + " is already in the audit log " + im.audit->path().string(),
                    "choose a new --run-id, or leave it out for a random one")
                  .describe();
    r.exit_code = exit_code::usage;
    return r;
  }
  r.run_id = req.run_id ? *req.run_id : new_run_id();
  r.caller = req.caller;
  r.labels = req.labels;

  json input_code;
  try {
    check_inputs(req, im.cfg, sandbox_script_name(req.name));
    for (const auto& f : req.inputs) r.inputs.push_back(record_of(f));
    r.assessment = im.assess_job(req, input_code);
  } catch (const Error& e) {
    r.error = e.describe();
    r.exit_code = exit_code::setup_failed;
    r.audit_seq = im.append("run_end", r, {{"status", "error"}, {"exit_code", r.exit_code}, {"error", r.error}});
    return r;
  }
  const Assessment& a = r.assessment;
  // Stored and recorded when the next record is written, or while the sandbox sets itself up.
  Impl::RunRecords log(im, r);
  const CodeRef ref = im.code_ref(req.code, req.name);
  const json code = ref;
  if (ref.stored) log.defer([&im, &req, sha = ref.sha256] { im.store_file(req.code, sha, /*code=*/true); });
  const json findings = a.to_json()["findings"];
  json assessed = {{"code", code}, {"level", to_string(a.level)}, {"score", a.score}, {"findings", findings}};
  if (!input_code.empty()) assessed["input_code"] = input_code;
  log.defer_record("assessment", std::move(assessed));

  // An override that the verdict needs must pass the policy, or the run is refused here.
  if (req.override_reason && !steer_trust(a.level, r.decision.requested, false, im.security))
    if (auto why = check_override(im.security.override_policy, *req.override_reason, ProcessIdentity::of_this_process(),
                                  im.security.source.string())) {
      r.decision.override_refused = *why;
      r.status = RunStatus::blocked;
      r.exit_code = exit_code::blocked;
      r.error = "override refused: " + *why;
      const std::string_view given = std::string_view(*req.override_reason).substr(0, OverridePolicy::kMaxReasonBytes);
      r.audit_seq = log.append("override_refused",
                               {{"code", code}, {"reason", given}, {"uid", ::getuid()}, {"why", *why},
                               {"level", to_string(a.level)}, {"trust_requested", to_string(r.decision.requested)}});
      return r;
    }
  r.decision.used = steer_trust(a.level, r.decision.requested, req.override_reason.has_value(), im.security);
  if (r.decision.refused()) {
    r.status = RunStatus::blocked;
    r.exit_code = exit_code::blocked;
    r.audit_seq = log.append("blocked",
                             {{"code", code}, {"level", to_string(a.level)}, {"score", a.score},
                             {"trust_requested", to_string(r.decision.requested)}});
    return r;
  }
  r.decision.overridden = req.override_reason && !steer_trust(a.level, r.decision.requested, false, im.security);
  if (r.decision.overridden)
    log.defer_record("override", {{"code", code}, {"reason", *req.override_reason}, {"uid", ::getuid()},
                                  {"level", to_string(a.level)}, {"trust_used", to_string(*r.decision.used)}});
  if (*r.decision.used != r.decision.requested)
    r.warnings.push_back("assessment " + std::string(to_string(a.level)) + " (score " + std::to_string(a.score) +
                         "): running as " + to_string(*r.decision.used) + " instead of " +
                         to_string(r.decision.requested));

  LaunchRequest launch;
  UniqueFd out_dir;
  core::DepsHold deps_hold;  // keeps the installed set from eviction until the run ends
  try {
    im.prepare_launch(req, r, launch);
    // Checked (and created) before anything starts.
    if (req.output_dir) out_dir = open_output_dir(*req.output_dir);
    if (!req.requirements.empty() || !launch.spec.requirements.empty()) {
      const SeccompProgram& untrusted = im.profile(resolve_spec(im.cfg, Trust::untrusted, {}, im.host).seccomp_profile);
      core::DepsInputs in{im.cfg, im.host, untrusted, r.run_id, r.image_digest, req.requirements,
                          req.requirements_origin, [&](json ev) {
                            ev["code"] = code;
                            log.append("deps", std::move(ev));
                          }};
      deps_hold = core::provide_deps(in, launch.spec, r.deps);
      r.spec = launch.spec;
    }
  } catch (const Error& e) {
    // Nothing started: the run ends here, and the log says why.
    r.status = RunStatus::error;
    r.exit_code = exit_code::setup_failed;
    r.error = e.describe();
    r.audit_seq = log.append("run_end",
                             {{"code", code}, {"status", "error"}, {"exit_code", r.exit_code}, {"error", r.error}});
    return r;
  }
  im.launch_and_record(req, r, launch, code, log, std::move(out_dir), entered);
  return r;
}

}  // namespace sandboxrun
