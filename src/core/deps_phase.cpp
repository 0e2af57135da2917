// Phase 1 ("deps") of a run with requirements. The install runs pip in its own sandbox: the same
// image, namespaces and the untrusted level's seccomp profile, with network only through the
// egress proxy and only to the package index, writing into an empty directory that the cache
// publishes atomically. The program's run (phase 2) then gets that directory read-only and never
// sees the index: its own network mode is untouched.
#include "deps_phase.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "net/egress_proxy.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/launch.hpp"
#include "common/safe_open.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::core {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Runs pip in-process as `python3 -m pip` would (the launcher always runs a script).
constexpr const char* kPipDriver =
    "import runpy, sys\n"
    "sys.argv[0] = 'pip'\n"
    "runpy.run_module('pip', run_name='__main__', alter_sys=True)\n";
constexpr const char* kOutName = "deps-out";  // phase 1's output directory, /run/deps-out
constexpr const char* kSiteName = "deps";     // phase 2's installed set, /run/deps
constexpr size_t kMaxReportBytes = 16u << 20;

// "python3.11": the newest python3.N directory of the image's library directory. Part of the
// cache key: an installed set is only valid for the interpreter it was installed for.
std::string image_python(const SandboxSpec& spec) {
  const fs::path lib = spec.rootfs / (spec.python.rfind("/usr/local/", 0) == 0 ? "usr/local/lib" : "usr/lib");
  std::string best;
  int best_minor = -1;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(lib, ec)) {
    const std::string n = de.path().filename().string();
    if (n.rfind("python3.", 0) != 0) continue;
    char* end = nullptr;
    const long minor = std::strtol(n.c_str() + 8, &end, 10);
    if (*end == '\0' && minor > best_minor) best_minor = static_cast<int>(minor), best = n;
  }
  return best.empty() ? "python3" : best;
}

std::vector<std::string> index_hosts(const PackageIndex& index) {
  std::vector<std::string> hosts = index.hosts;
  hosts.push_back(url_host(index.url));
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  return hosts;
}

std::string cache_key(const deps::Requirements& reqs, const std::string& image_digest, const std::string& python,
                      const PackageIndex& index) {
  std::string material = "sandboxrun-deps v1\nonly-binary :all:\nimage " + image_digest + "\npython " + python +
                         "\nindex " + index.url + "\n";
  for (const auto& h : index_hosts(index)) material += "host " + h + "\n";
  material += "requirements\n" + reqs.text();
  return sha256_hex(material);
}

// The last lines of pip's stderr: its reason, without the progress noise before it.
std::string tail_lines(const std::string& text, size_t lines, size_t max_bytes) {
  size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n' || text[pos - 1] == ' ')) --pos;
  const size_t end = pos;
  for (size_t n = 0; pos > 0 && n < lines; --pos)
    if (text[pos - 1] == '\n' && ++n == lines) break;
  std::string t = text.substr(pos, end - pos);
  if (t.size() > max_bytes) t = "..." + t.substr(t.size() - max_bytes);
  return t;
}

// Phase 1's sandbox: the untrusted level's settings with the limits above, the image of the run.
SandboxSpec install_spec(const DepsInputs& in, const SandboxSpec& run_spec, const fs::path& out) {
  SandboxSpec s = resolve_spec(in.cfg, Trust::untrusted, {}, in.host);
  s.rootfs = run_spec.rootfs;
  s.python = run_spec.python;
  s.limits.timeout_s = kDepsTimeoutS;
  s.limits.pids = kDepsPids;
  s.limits.tmp_bytes = kDepsTmpBytes;
  s.limits.memory_bytes = kDepsMemoryBytes;
  if (in.host.memory_available > 0)
    s.limits.memory_bytes = std::min<uint64_t>(
        s.limits.memory_bytes,
        static_cast<uint64_t>(static_cast<double>(in.host.memory_available) * in.cfg.host_memory_share));
  s.adjustments.clear();
  s.requirements.clear();
  s.network.mode = NetworkMode::allowlist;
  s.network.allowlist = index_hosts(in.cfg.package_index);
  for (const char* k : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "PIP_PROXY"})
    s.env[k] = "http://127.0.0.1:3128";
  s.env["NO_PROXY"] = "";
  s.env["no_proxy"] = "";
  // --target ignores the image's own packages; Debian's "externally managed" marker does not apply.
  s.env["PIP_BREAK_SYSTEM_PACKAGES"] = "1";
  s.env["PIP_NO_CACHE_DIR"] = "1";
  s.run_binds = {{out, kOutName, true}};
  return s;
}

std::vector<std::string> pip_args(const DepsInputs& in, const deps::Requirements& reqs) {
  const std::string dir = std::string("/run/") + kOutName;
  std::vector<std::string> a = {"install", "--no-input", "--disable-pip-version-check", "--progress-bar", "off",
                                "--only-binary", ":all:", "--target", dir + "/site", "--report", dir + "/report.json",
                                "-r", dir + "/requirements.txt", "--index-url", in.cfg.package_index.url,
                                // An unreachable index fails in seconds, not after minutes of retries.
                                "--retries", "0", "--timeout", "15"};
  if (reqs.hashes) a.push_back("--require-hashes");
  // A plain-http index is an explicit configuration choice; pip ignores it unless trusted.
  if (in.cfg.package_index.url.rfind("http://", 0) == 0) {
    a.push_back("--trusted-host");
    a.push_back(url_host(in.cfg.package_index.url));
  }
  return a;
}

// Runs phase 1 into build.out; returns the installed packages (from pip's report). Throws Error
// with pip's reason when it fails.
std::vector<InstalledPackage> install(const DepsInputs& in, const deps::Requirements& reqs, const SandboxSpec& run_spec,
                                      const deps::BuildDir& build, DepsReport& record) {
  {
    // Written before the sandbox exists, into the build directory it will see.
    UniqueFd out(::open(build.out.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!out) throw_errno("cannot open " + build.out.string());
    UniqueFd f = open_trusted_at(out.get(), "requirements.txt", O_WRONLY | O_CREAT | O_EXCL, 0644,
                                 build.out / "requirements.txt");
    const std::string text = reqs.text();
    if (::fchmod(f.get(), 0644) != 0 || !write_all(f.get(), text.data(), text.size()))
      throw_errno("cannot write the requirements into " + build.out.string());
  }
  LaunchRequest l;
  l.spec = install_spec(in, run_spec, build.out);
  net::validate_network_settings(l.spec.network);  // fail closed before anything starts
  l.seccomp = &in.seccomp;
  l.run_id = in.run_id + "-deps";
  l.script_name = "sandboxrun_deps.py";
  l.script = kPipDriver;
  l.args = pip_args(in, reqs);
  l.capture = true;
  std::unique_ptr<net::EgressProxy> proxy;
  l.on_proxy_socket = [&](UniqueFd listen_fd) {
    proxy = std::make_unique<net::EgressProxy>(std::move(listen_fd), l.spec.network);
    proxy->start();
  };
  RunOutcome o = run_sandbox(l);
  // pip reports a refused or unreachable index as "no matching distribution": the proxy knows why.
  std::string refused;
  size_t refusals = 0;
  if (proxy) {
    proxy->stop();
    record.connections = proxy->report().connections;
    for (const auto& rec : proxy->records())
      // Refused by the policy, or allowed but never connected (no upstream address).
      if ((rec.verdict != net::Verdict::allowed || rec.address.empty()) && !rec.reason.empty() && ++refusals <= 3)
        refused += (refused.empty() ? "" : "; ") + rec.host + ":" + std::to_string(rec.port) + " (" + rec.reason + ")";
  }
  if (o.status != RunStatus::exited || o.exit_code != 0) {
    std::string why = tail_lines(o.stderr_data, 8, 2000);
    if (o.status == RunStatus::timeout) why = "pip ran longer than " + std::to_string(int(kDepsTimeoutS)) + " s. " + why;
    else if (o.status == RunStatus::oom) why = "pip exceeded the install phase's memory limit. " + why;
    else if (o.status == RunStatus::error) why = o.error;
    if (!refused.empty())
      throw Error("installing the requirements failed: the package index could not be reached: " + refused +
                      (refusals > 3 ? " and " + std::to_string(refusals - 3) + " more" : "") + ". pip said: " + why,
                  "check that " + in.cfg.package_index.url +
                      " resolves and answers from this host, and that its hosts are in package_index");
    throw Error("installing the requirements failed: " + why,
                "check the requirement names, versions and hashes against " + in.cfg.package_index.url);
  }
  UniqueFd out(::open(build.out.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  UniqueFd rep(out ? ::openat(out.get(), "report.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1);
  if (!rep) return {};
  try {
    return deps::installed_from_report(json::parse(read_fd(rep.get(), kMaxReportBytes, "pip's report")))
        .get<std::vector<InstalledPackage>>();
  } catch (const std::exception&) {
    return {};  // the report is informative only: the manifest is what the cache trusts
  }
}

}  // namespace

DepsHold provide_deps(const DepsInputs& in, const SandboxSpec& spec, std::optional<DepsReport>& report) {
  deps::Requirements reqs;
  for (const auto& line : spec.requirements) reqs.lines.push_back(line);
  reqs = deps::parse_requirements(reqs.text(), in.cfg.file.string() + " (requirements)");
  if (!in.requirements.empty()) deps::merge(reqs, deps::parse_requirements(in.requirements, in.requirements_origin));
  if (reqs.empty()) return {};

  const auto started = std::chrono::steady_clock::now();
  const std::string python = image_python(spec);
  const std::string key = cache_key(reqs, in.image_digest, python, in.cfg.package_index);
  DepsReport& record = report.emplace();
  record.requirements = reqs.lines;
  record.key = key;
  record.python = python;
  record.index = in.cfg.package_index.url;
  auto finish = [&](const std::optional<std::string>& error) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
    record.duration_ms = static_cast<double>(us.count()) / 1000.0;
    if (in.audit) in.audit(record, error);
  };

  DepsHold hold;
  try {
    const deps::Cache cache = deps::Cache::open(deps::cache_dir(in.cfg));
    std::string damage;
    hold.lock = cache.lock(key, /*exclusive=*/false);
    std::optional<deps::EntryInfo> entry = cache.lookup(key, false, &damage);
    if (!entry) {
      // Build under the exclusive lock; whoever waited for it finds the entry published.
      hold.lock = deps::KeyLock();
      hold.lock = cache.lock(key, /*exclusive=*/true);
      entry = cache.lookup(key, false, &damage);
      if (entry) {
        record.cache = "hit";
        record.waited_for_builder = true;
      } else {
        record.cache = "miss";
        if (!damage.empty()) {
          record.rebuilt = damage;
          cache.remove(key);
        }
        const deps::BuildDir build = cache.make_build_dir();
        struct Cleanup {
          const deps::Cache& c;
          const deps::BuildDir& b;
          ~Cleanup() { c.remove_build_dir(b); }
        } cleanup{cache, build};
        const std::vector<InstalledPackage> installed = install(in, reqs, spec, build, record);
        json rec = {{"requirements", reqs.lines}, {"python", python}, {"image_digest", in.image_digest},
                    {"index", in.cfg.package_index.url}, {"installed", installed}};
        entry = cache.publish(build, key, rec);
        // Eviction after publishing, so the cap holds; the new entry is kept whatever its size.
        // A failed eviction does not fail the run that built a good entry: it is reported.
        try {
          const auto evicted = cache.gc(in.cfg.cache_max_size, false, key);
          if (!evicted.removed.empty() || !evicted.damaged.empty())
            record.evicted = evicted.removed.size() + evicted.damaged.size();
        } catch (const Error& e) {
          record.eviction_error = e.describe();
        }
      }
      hold.lock.downgrade();
    }
    // The entry's own manifest (written by the build above, then read back by every later run).
    const auto installed = sandboxrun::record::read<std::vector<InstalledPackage>>(entry->record.value("installed", json::array()));
    record.installed = installed.value_or(std::vector<InstalledPackage>{});
    record.bytes = entry->bytes;
    record.files = entry->files;
    hold.site = RunBind{cache.site(key), kSiteName, false};
  } catch (const Error& e) {
    finish(e.describe());
    throw;
  }
  record.path = std::string("/run/") + kSiteName;
  finish(std::nullopt);
  return hold;
}

}  // namespace sandboxrun::core
