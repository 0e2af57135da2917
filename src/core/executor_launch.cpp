// One run from its decision on: the sandbox spec, the launch (or a sandbox prepared ahead), and
// what the run left: network records, outputs, the run_end record.
#include <unistd.h>

#include "deps_phase.hpp"
#include "executor_impl.hpp"
#include "image_resolve.hpp"
#include "sandboxrun/size.hpp"
#include "net/egress_proxy.hpp"

namespace sandboxrun {

using nlohmann::json;

namespace {

// A manifest for the audit log: each entry says whether its bytes are in the object store.
std::vector<audit::ManifestEntry> manifest(const std::vector<FileRecord>& records, const std::vector<bool>& stored) {
  std::vector<audit::ManifestEntry> out;
  for (size_t i = 0; i < records.size(); ++i) out.push_back({records[i], i < stored.size() && stored[i]});
  return out;
}


}  // namespace

void Executor::Impl::prepare_launch(const RunRequest& req, RunResult& r, LaunchRequest& launch,
                                    const DepsStep& deps) const {
  SandboxSpec resolved = resolve_spec(cfg, *r.decision.used, req.limits, host);
  core::ResolvedImage img = core::resolve_image(req.image ? *req.image : cfg.image);
  r.image_digest = img.digest;
  std::optional<RunBind> deps_site;
  if (deps && (!req.requirements.empty() || !resolved.requirements.empty())) {
    SandboxSpec with_image = resolved;  // the interpreter the set is installed for
    core::apply_image(with_image, img);
    deps_site = deps(with_image);
  }
  SandboxSpec spec = core::finalize_spec(std::move(resolved), req.env, img, deps_site);
  launch.seccomp = &profile(spec.seccomp_profile);
  launch.run_id = r.run_id;
  launch.script_name = req.name;
  launch.script = req.code;
  launch.args = req.args;
  launch.capture = req.capture;
  launch.stdout_fd = req.stdout_fd;
  launch.stderr_fd = req.stderr_fd;
  launch.on_sample = req.on_sample;
  launch.cancel_fd = req.cancel_fd;
  launch.stop_signals = stop_signals;
  launch.wipe_begin = req.wipe_begin;
  launch.wipe_end = req.wipe_end;
  launch.inputs = &req.inputs;
  launch.stdin_fd = req.stdin_fd;
  launch.stdin_data = req.stdin_data ? &*req.stdin_data : nullptr;
  // Claimed here, not in the launcher, so that run_start can name the host ids the run will use.
  if (::geteuid() == 0 && !launch.id_slot) launch.id_slot = std::make_shared<const IdSlot>(IdSlot::claim(spec.id_ranges));
  launch.spec = spec;
  r.spec = std::move(spec);
}

core::WarmSandbox Executor::Impl::prepare_warm(Trust t) const {
  core::WarmSandbox w;
  w.trust = t;
  RunRequest none;
  RunResult r;
  r.decision.used = t;
  prepare_launch(none, r, w.base, {});
  if (w.base.spec.network.mode != NetworkMode::none || !w.base.spec.requirements.empty())
    throw Error("trust level " + std::string(to_string(t)) + " has network or requirements: no sandbox ahead");
  w.image_digest = r.image_digest;
  w.base.run_id = new_run_id();
  w.netns = netns->take();
  w.base.netns_fd = w.netns.get();
  w.base.cgroup_host = cgroups;
  w.base.max_script = security.max_bytes;
  w.base.inputs = nullptr;
  // Asks for /work to be passed back; the run's own on_work_dir receives it (or drops it).
  w.base.on_work_dir = [](UniqueFd) {};
  w.sandbox = PreparedSandbox::prepare(w.base);
  return w;
}

void Executor::Impl::launch_and_record(const RunRequest& req, RunResult& r, LaunchRequest& launch, const CodeRef& code,
                                       RunRecords& log, UniqueFd out_dir, std::chrono::steady_clock::time_point entered,
                                       core::WarmSandbox* warm) const {
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
  audit::RunStartEvent start{.run = {.code = code},
                             .trust_requested = to_string(r.decision.requested),
                             .trust_used = to_string(spec.trust),
                             .limits = LimitsRecord::of(spec),
                             .config_digest = cfg.digest,
                             .config = cfg.file.string(),
                             .image_digest = r.image_digest,
                             .uid = ::getuid(),
                             .args = req.args,
                             .overridden = r.decision.overridden,
                             .inputs = manifest(r.inputs, inputs_stored),
                             .session = launch.lifetime_s.has_value()};
  if (!req.env.empty()) {
    start.env.emplace();  // values may be credentials: the names say what was set
    for (const auto& kv : req.env) start.env->push_back(kv.first);
  }
  if (launch.id_slot) start.id_slot = IdSlotRecord::of(launch.id_slot->info());
  log.defer([this, &req, &r, start = std::move(start)]() mutable {
    start.diff_from = version_diff(req, r);
    append(std::move(start), r);
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
  // The next sandbox set up ahead is made while this program runs, not while it starts (the two
  // would contend for the CPU and the kernel's mount locks).
  launch.after_exec = [this, &req, &r, sha = code.sha256] {
    set_latest_version(req, r, sha);
    if (warm_pool && core::fits_warm(req, security.max_bytes)) warm_pool->want(*r.decision.used);
  };
  r.prepare = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - entered);
  const UniqueFd prepared_netns = warm ? UniqueFd() : netns->take();  // empty: the clone makes one
  launch.netns_fd = warm ? warm->netns.get() : prepared_netns.get();
  launch.cgroup_host = cgroups;
  // A service's runs return once their result is in; pid 1's exit and the cgroup's removal
  // finish on the pool's thread.
  if (warm_pool) {
    launch.defer_teardown = [this](std::shared_ptr<void> remains) { warm_pool->dispose(std::move(remains)); };
  } else if (single_run) {
    launch.defer_teardown = [this](std::shared_ptr<void> rest) {
      std::lock_guard lock(remains_mu);
      single_remains.push_back(std::move(rest));
    };
  }
  try {
    r.outcome = warm ? warm->sandbox->run(launch) : run_sandbox(launch);
  } catch (const Error& e) {
    r.outcome = RunOutcome{};
    r.outcome.error = e.describe();
    r.error_kind = e.kind() == ErrorKind::other ? ErrorKind::host : e.kind();
  }
  if (prepared_netns) netns->replenish();
  const audit::RunContext ctx{.code = code};
  if (proxy) {
    proxy->stop();
    r.network = proxy->report();
    // Every allowed connection is a record; refusals past the first kMaxRefusedListed are
    // counted in one, so a program cannot flood the log (and push older runs out) with them.
    uint64_t refused = 0;
    for (const auto& c : r.network->connections) {
      if (c.verdict != "allowed" && ++refused > kMaxRefusedListed) continue;
      log.append(audit::NetworkEvent{.run = ctx, .host = c.host, .port = c.port, .address = c.address,
                                     .verdict = c.verdict, .reason = c.reason, .bytes_up = c.bytes_up,
                                     .bytes_down = c.bytes_down});
    }
    if (refused > kMaxRefusedListed)
      log.append(audit::NetworkEvent{.run = ctx, .verdict = "denied",
                                     .reason = "more refused connections than are recorded one by one",
                                     .omitted = refused - kMaxRefusedListed});
  }
  std::vector<bool> outputs_stored;
  if (req.output_dir) collect_job_outputs(req, r, work_dir, out_dir, outputs_stored);
  const RunOutcome& o = r.outcome;
  r.status = o.status;
  r.exit_code = o.exit_code;
  r.signal = o.signal;
  r.error = o.error;
  // Any error the monitor reports but an interruption is pid 1's failed set-up step.
  if (!o.error.empty() && r.error_kind == ErrorKind::other)
    r.error_kind = o.interrupted_by ? ErrorKind::interrupted : ErrorKind::host;
  // A limit asked for and not granted is said, not only recorded in limits.adjustments.
  for (const auto& a : r.spec->adjustments)
    if (a.requested) r.warnings.push_back(a.limit + " " + a.from + " not granted, " + a.to + " applies: " + a.reason);
  for (const auto& d : o.degradations) r.warnings.push_back("degraded: " + d);
  r.warnings.insert(r.warnings.end(), o.warnings.begin(), o.warnings.end());
  if (o.status == RunStatus::oom || o.status == RunStatus::timeout)
    log.append(audit::LimitEvent{.run = ctx, .kind = to_string(o.status)});
  if (o.usage.pids_max_hits > 0)
    log.append(audit::LimitEvent{.run = ctx, .kind = "pids", .refused_forks = o.usage.pids_max_hits});
  audit::RunEndEvent end{.run = ctx,
                         .status = to_string(o.status),
                         .exit_code = o.exit_code,
                         .duration_ms = static_cast<uint64_t>(o.duration.count()),
                         .resources = ResourcesRecord::of(o.usage),
                         .cgroup = o.cgroup_backend};
  if (!o.error.empty()) end.error = o.error;
  if (o.stdout_truncated || o.stderr_truncated) end.output_truncated = {o.stdout_truncated, o.stderr_truncated};
  if (!o.degradations.empty()) end.degradations = o.degradations;
  if (r.network) end.network = {r.network->allowed, r.network->denied};
  if (r.outputs) {
    end.outputs = manifest(r.outputs->files, outputs_stored);
    end.outputs_truncated = r.outputs->truncated;
    end.outputs_skipped = r.outputs->skipped_count;
  }
  if (auto denied = DeniedRecord::of(o.denied, r.network)) log.append(audit::DeniedEvent{.run = ctx, .denied = *denied});
  r.audit_seq = log.append(std::move(end));
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

}  // namespace sandboxrun
