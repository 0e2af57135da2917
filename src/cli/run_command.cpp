// `sandboxrun [run]`: config -> assessment -> decision -> launcher -> monitor -> result -> audit.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <future>
#include <iostream>

#include "cli.hpp"
#include "result_json.hpp"
#include "sandboxrun/assess.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/egress_proxy.hpp"
#include "sandboxrun/image.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/launch.hpp"
#include "sandboxrun/seccomp.hpp"
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
  bool verbose = false;
};

// Reads the script without following a final symlink and only if it is a regular file, so a
// FIFO or device cannot hang or feed the launcher. Returns nullopt (with a message) on failure.
std::optional<std::string> read_script(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    int err = errno;
    std::string why = err == ELOOP ? "it is a symbolic link; pass the real file" : std::strerror(err);
    spdlog::error("cannot open {}: {}", path, why);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    spdlog::error("{} is not a regular file", path);
    return std::nullopt;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxScriptBytes) {
    spdlog::error("{} is {} bytes; the limit is {}", path, st.st_size, format_size(kMaxScriptBytes));
    return std::nullopt;
  }
  try {
    return read_fd(fd.get(), kMaxScriptBytes, path, "pass a Python file of at most " + format_size(kMaxScriptBytes));
  } catch (const Error& e) {
    spdlog::error("{}", e.describe());
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

// The rootfs of the run and its identity for the audit log: an OCI layout ("oci-layout" file
// present) goes through the verified, cached unpack; a directory is used as it is.
struct ResolvedImage {
  std::filesystem::path rootfs;
  std::string digest;
  std::vector<std::string> env;
};

ResolvedImage resolve_image(const std::string& where) {
  image::ImageRef ref = image::parse_image_ref(where);
  std::error_code ec;
  if (std::filesystem::exists(ref.layout / "oci-layout", ec)) {
    image::CachedImage cached = image::ensure_image(ref, image::default_cache_dir());
    return {cached.rootfs, cached.manifest_digest, cached.config.env};
  }
  ResolvedImage r{std::filesystem::absolute(where), "dir:" + std::filesystem::absolute(where).string(), {}};
  // build-image.sh records the manifest digest the default rootfs was unpacked from.
  std::filesystem::path stamp = r.rootfs.parent_path() / ("." + r.rootfs.filename().string() + ".digest");
  if (std::filesystem::exists(stamp, ec)) {
    std::string d = read_file(stamp.string());
    while (!d.empty() && std::isspace(static_cast<unsigned char>(d.back()))) d.pop_back();
    if (!d.empty()) r.digest = d;
  }
  return r;
}

// The image's environment first (its PATH knows where its python lives), then ours on top.
void apply_image(SandboxSpec& spec, const ResolvedImage& img) {
  spec.rootfs = img.rootfs;
  for (const auto& kv : img.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    if (key == "PATH" || key == "LANG" || key.rfind("PYTHON", 0) == 0 || !spec.env.count(key))
      spec.env[key] = kv.substr(eq + 1);
  }
  std::error_code ec;
  if (!std::filesystem::exists(spec.rootfs / "usr/bin/python3", ec) &&
      std::filesystem::exists(spec.rootfs / "usr/local/bin/python3", ec))
    spec.python = "/usr/local/bin/python3";
}

// The built-in analysis of the exact bytes that will run; with Bandit enabled, Bandit reads a
// private copy of those same bytes (never the caller's file, which may change meanwhile).
Assessment assess_bytes(const std::string& script, const SecurityConfig& security) {
  if (!security.bandit.enabled) return assess_source(script, security);
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir == '/' ? tmpdir : "/tmp") + "/sandboxrun-assess-XXXXXX.py";
  UniqueFd fd(::mkstemps(tmpl.data(), 3));
  if (!fd) throw_errno("cannot create a temporary copy for bandit in " + tmpl, "check that TMPDIR (or /tmp) is writable");
  struct Unlink {
    const char* path;
    ~Unlink() { ::unlink(path); }
  } unlink_copy{tmpl.c_str()};
  if (!write_all(fd.get(), script.data(), script.size())) throw_errno("cannot write " + tmpl);
  return assess_file(tmpl, security);
}

void print_findings(const Assessment& a) {
  std::cerr << "sandboxrun: assessment " << to_string(a.level) << " (score " << a.score << ")\n";
  for (const auto& f : a.findings)
    std::cerr << "  line " << f.line << ": [" << f.severity << "] " << f.rule << ": " << f.message << "\n";
}

nlohmann::json network_to_json(const net::EgressProxy& proxy) {
  auto c = proxy.counters();
  nlohmann::json conns = nlohmann::json::array();
  for (const auto& r : proxy.records())
    conns.push_back({{"host", r.host}, {"port", r.port}, {"address", r.address},
                     {"verdict", net::to_string(r.verdict)}, {"reason", r.reason},
                     {"bytes_up", r.bytes_up}, {"bytes_down", r.bytes_down}});
  return {{"allowed", c.allowed}, {"denied", c.denied}, {"bytes_up", c.bytes_up},
          {"bytes_down", c.bytes_down}, {"records_dropped", c.records_dropped}, {"connections", conns}};
}

void explain_end(const RunOutcome& o, const SandboxSpec& spec) {
  switch (o.status) {
    case RunStatus::timeout:
      spdlog::error("timeout: the program ran longer than {}s and was killed", spec.limits.timeout_s);
      break;
    case RunStatus::oom:
      spdlog::error("out of memory: the program exceeded mem_limit {} and was killed",
                    format_size(spec.limits.memory_bytes));
      break;
    case RunStatus::error: spdlog::error("{}", o.error); break;
    default: break;
  }
}

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
  app.add_option("--timeout", opt.timeout, "wall-clock seconds (may only tighten)")->check(CLI::PositiveNumber);
  app.add_option("--memory", opt.memory, "memory limit such as 128m (may only tighten)");
  app.add_option("--cpus", opt.cpus, "CPUs, fractional allowed (may only tighten)")->check(CLI::PositiveNumber);
  app.add_option("--pids", opt.pids, "process/thread limit (may only tighten)")->check(CLI::Range(8, 1 << 22));
  app.add_option("--override", opt.override_reason, "run a BLOCKED file anyway; the reason is audited");
  app.add_option("--audit-log", opt.audit_log, "audit log file (overrides config)");
  app.add_option("--stats", opt.stats, "write resource samples as JSON lines to PATH, or - for stdout");
  app.add_option("--image", opt.image, "rootfs directory or OCI image layout[:tag]");
  app.add_flag("-v,--verbose", opt.verbose, "log what the launcher does");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  if (opt.verbose) spdlog::set_level(spdlog::level::info);

  RunOverrides ov;
  ov.timeout_s = opt.timeout;
  ov.cpus = opt.cpus;
  ov.pids = opt.pids;
  if (opt.memory) {
    auto m = parse_size(*opt.memory);
    if (!m || *m < (16u << 20)) {
      spdlog::error("--memory {}: expected a size like 128m or 1g, at least 16MiB", *opt.memory);
      return exit_code::usage;
    }
    ov.memory_bytes = m;
  }

  // From here to the sandbox's placement is config, assessment and audit work: long enough to
  // hide the cgroup v1 migration's grace period behind it.
  MigrationWarmup cgroup_warmup;
  const auto entered = std::chrono::steady_clock::now();
  auto script = read_script(opt.file);
  if (!script) return exit_code::file_missing;

  SandboxConfig cfg;
  SecurityConfig security;
  std::optional<AuditLog> audit;
  RunReport report;
  HostResources host;
  // The assessor's rules (the largest file) load on a second thread while this one reads
  // sandbox.yaml and compiles the seccomp profile of the requested level; the assessment rarely
  // changes the level, and when it does the other profile is compiled then. A compile error
  // surfaces only if that profile is the one used.
  std::filesystem::path early_profile;
  std::optional<SeccompProgram> early_seccomp;
  std::exception_ptr early_seccomp_error;
  try {
    const std::filesystem::path config_file = find_config(opt.config);
    const std::filesystem::path config_dir = config_file.parent_path();  // SandboxConfig::dir
    auto security_load = std::async(std::launch::async, [config_dir] {
      return load_security_config(config_dir / "security.yaml", config_dir.parent_path());
    });
    cfg = load_sandbox_config(config_file);
    report.trust_requested = opt.trust.empty() ? cfg.default_trust : *parse_trust(opt.trust);
    host = probe_host_resources();
    early_profile = resolve_spec(cfg, report.trust_requested, ov, host).seccomp_profile;
    try {
      early_seccomp = compile_seccomp_profile(early_profile, SeccompContext{});
    } catch (const Error&) {
      early_seccomp_error = std::current_exception();
    }
    security = security_load.get();
    audit.emplace(AuditLog::open(load_audit_config(cfg.dir / "audit.yaml"),
                                 opt.audit_log ? std::optional<std::filesystem::path>(*opt.audit_log)
                                               : std::nullopt));
  } catch (const Error& e) {
    spdlog::error("{}", e.describe());
    return exit_code::setup_failed;
  }

  report.run_id = new_run_id();
  const std::string name = base_name(opt.file);
  auto emit = [&](const RunReport& r) {
    if (!opt.json) return;
    std::string text = dump_json(report_to_json(r)) + "\n";
    write_all(1, text.data(), text.size());
  };

  // Everything from here is recorded: an audit failure stops the run (no unaudited runs).
  try {
    Assessment assessment = assess_bytes(*script, security);
    report.assessment = assessment.to_json();
    nlohmann::json code = audit->store_code(*script, name);
    audit->append("assessment", report.run_id,
                  {{"code", code}, {"level", to_string(assessment.level)}, {"score", assessment.score},
                   {"findings", report.assessment["findings"]}});

    std::optional<Trust> steered =
        steer_trust(assessment.level, report.trust_requested, opt.override_reason.has_value(), security);
    if (!steered) {
      report.audit_seq = audit->append("blocked", report.run_id,
                                       {{"code", code}, {"level", to_string(assessment.level)},
                                        {"score", assessment.score}, {"trust_requested", to_string(report.trust_requested)}});
      report.outcome.status = RunStatus::error;
      report.outcome.exit_code = exit_code::blocked;
      if (opt.json) {
        nlohmann::json j = report_to_json(report);
        j["status"] = "blocked";
        std::string text = dump_json(j) + "\n";
        write_all(1, text.data(), text.size());
      } else {
        print_findings(assessment);
        spdlog::error("{} was BLOCKED by the assessor; run it anyway with --override \"reason\" (audited)", opt.file);
      }
      return exit_code::blocked;
    }
    bool overridden = opt.override_reason && !steer_trust(assessment.level, report.trust_requested, false, security);
    if (overridden)
      audit->append("override", report.run_id,
                    {{"code", code}, {"reason", *opt.override_reason}, {"uid", ::getuid()},
                     {"level", to_string(assessment.level)}, {"trust_used", to_string(*steered)}});
    if (*steered != report.trust_requested)
      spdlog::warn("assessment {} (score {}): running as {} instead of {}", to_string(assessment.level),
                   assessment.score, to_string(*steered), to_string(report.trust_requested));

    SandboxSpec spec = resolve_spec(cfg, *steered, ov, host);
    ResolvedImage img = resolve_image(opt.image ? *opt.image : cfg.image);
    apply_image(spec, img);
    if (spec.network.mode == NetworkMode::allowlist) {
      net::validate_network_settings(spec.network);  // fail closed before anything starts
      for (const char* k : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "PIP_PROXY"})
        spec.env[k] = "http://127.0.0.1:3128";
      spec.env["NO_PROXY"] = "";
      spec.env["no_proxy"] = "";
    }
    for (const auto& a : spec.adjustments) spdlog::info("{}: {} -> {} ({})", a.limit, a.from, a.to, a.reason);
    report.spec = &spec;

    StatsSink stats(opt.stats);
    LaunchRequest req;
    req.spec = spec;
    req.run_id = report.run_id;
    req.script_name = name;
    req.script = std::move(*script);
    req.args = opt.args;
    req.capture = opt.json;
    req.wipe_begin = wipe_begin;
    req.wipe_end = wipe_end;
    req.cgroup_warmup = &cgroup_warmup;
    if (stats.enabled())
      req.on_sample = [&stats](const CgroupUsage& u, std::chrono::milliseconds t) { stats.write(u, t); };
    std::unique_ptr<net::EgressProxy> proxy;
    req.on_proxy_socket = [&](UniqueFd listen_fd) {
      proxy = std::make_unique<net::EgressProxy>(std::move(listen_fd), spec.network);
      proxy->start();
    };
    if (spec.seccomp_profile != early_profile) {
      req.seccomp = compile_seccomp_profile(spec.seccomp_profile, SeccompContext{});
    } else if (early_seccomp_error) {
      std::rethrow_exception(early_seccomp_error);
    } else {
      req.seccomp = std::move(*early_seccomp);
    }

    nlohmann::json limits = limits_to_json(spec);
    audit->append("run_start", report.run_id,
                  {{"code", code}, {"trust_requested", to_string(report.trust_requested)},
                   {"trust_used", to_string(spec.trust)}, {"limits", limits}, {"config_digest", cfg.digest},
                   {"config", cfg.file.string()}, {"image_digest", img.digest}, {"uid", ::getuid()},
                   {"args", opt.args}, {"overridden", overridden}},
                  /*durable=*/true);
    report.prepare = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - entered);
    try {
      report.outcome = run_sandbox(req);
    } catch (const Error& e) {
      report.outcome = RunOutcome{};
      report.outcome.error = e.describe();
    }
    if (proxy) {
      proxy->stop();
      report.network = network_to_json(*proxy);
      for (const auto& c : report.network["connections"]) {
        nlohmann::json rec = c;
        rec["code"] = code;
        audit->append("network", report.run_id, rec);
      }
    }

    const RunOutcome& o = report.outcome;
    if (o.status == RunStatus::oom || o.status == RunStatus::timeout)
      audit->append("limit", report.run_id, {{"code", code}, {"kind", to_string(o.status)}});
    if (o.usage.pids_max_hits > 0)
      audit->append("limit", report.run_id,
                    {{"code", code}, {"kind", "pids"}, {"refused_forks", o.usage.pids_max_hits}});
    nlohmann::json end = {{"code", code}, {"status", to_string(o.status)}, {"exit_code", o.exit_code},
                          {"duration_ms", o.duration.count()}, {"resources", resources_to_json(o.usage)},
                          {"cgroup", o.cgroup_backend}};
    if (!o.error.empty()) end["error"] = o.error;
    if (!o.degradations.empty()) end["degradations"] = o.degradations;
    if (!report.network.empty()) end["network"] = {{"allowed", report.network["allowed"]}, {"denied", report.network["denied"]}};
    report.audit_seq = audit->append("run_end", report.run_id, end);
    for (const auto& d : o.degradations) spdlog::warn("degraded: {}", d);
    emit(report);
    if (!opt.json) explain_end(o, spec);
    return o.exit_code;
  } catch (const Error& e) {
    spdlog::error("{}", e.describe());
    report.outcome = RunOutcome{};
    report.outcome.error = e.describe();
    report.spec = nullptr;
    emit(report);
    return exit_code::setup_failed;
  }
}

}  // namespace sandboxrun::cli
