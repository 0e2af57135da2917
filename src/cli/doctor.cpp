// `sandboxrun doctor`: what this host supports, what is missing, and the fix for each.
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli.hpp"
#include "doctor_checks.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/executor.hpp"
#include "sandboxrun/id_slots.hpp"
#include "sandboxrun/launch.hpp"

namespace sandboxrun::cli {

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// unshare(CLONE_NEWUSER) in a child, as the launcher's clone will ask for it: 0, or the errno.
int probe_userns() {
  const pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) ::_exit(::unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0xff));
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return EIO;
  return WEXITSTATUS(status);
}

Check check_userns() {
  return judge_userns({.root = ::geteuid() == 0,
                       .max_user_namespaces = read_first_line("/proc/sys/user/max_user_namespaces"),
                       .unprivileged_userns_clone = read_first_line("/proc/sys/kernel/unprivileged_userns_clone"),
                       .apparmor_restrict_unprivileged =
                           read_first_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
                       .probe_errno = probe_userns()});
}

Check check_seccomp() {
  bool ok = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  std::string actions = read_first_line("/proc/sys/kernel/seccomp/actions_avail");
  return {"seccomp filters", ok, true, actions.empty() ? "" : "actions: " + actions,
          "a kernel built with CONFIG_SECCOMP_FILTER"};
}

Check check_landlock(LandlockMode mode) {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  std::string detail = abi > 0 ? "ABI " + std::to_string(abi) : "not available";
  detail += std::string(" (landlock: ") + to_string(mode) + ")";
  if (abi > 0 && abi < 4) detail += "; ABI < 4: TCP connect is not restricted in allowlist mode";
  if (abi > 0 && abi < 6) detail += "; ABI < 6: no abstract-socket and signal scoping";
  return {"Landlock", abi > 0 || mode == LandlockMode::off, mode == LandlockMode::required, detail,
          "boot a kernel with CONFIG_SECURITY_LANDLOCK and landlock in lsm= (sandboxes then get a second wall "
          "behind the mount namespace)"};
}

Check check_id_ranges(const IdRanges& r) {
  const std::string range = std::to_string(r.base) + ".." + std::to_string(static_cast<uint64_t>(r.base) + r.size - 1);
  if (::geteuid() != 0)
    return {"id range", true, false, range + " (used as root; unprivileged runs map the caller's own id)", ""};
  try {
    check_id_range(r);
  } catch (const Error& e) {
    return {"id range", false, true, e.what(), e.hint()};
  }
  std::vector<std::string> owners = accounts_in_range(r);
  std::string detail = range + ", " + std::to_string(r.slots()) + " slots of " + std::to_string(r.slot_size) + " ids";
  if (!owners.empty()) {
    detail += "; owned by host accounts:";
    for (const auto& o : owners) detail += " " + o;
  }
  return {"id range", owners.empty(), true, detail,
          "move id_ranges.base in sandbox.yaml to ids no account uses, and reserve them: "
          "useradd --system --no-create-home sandboxrun; usermod --add-subuids BASE-END --add-subgids BASE-END sandboxrun"};
}

// A container mounts its cgroup hierarchies read-only (on cgroup v1 beneath a tmpfs that may
// itself be writable): any cgroup or cgroup2 mount mounted "ro".
bool cgroup_mounts_read_only() {
  std::ifstream in("/proc/self/mounts");
  std::string dev, point, type, opts, rest;
  while (in >> dev >> point >> type >> opts && std::getline(in, rest))
    if ((type == "cgroup" || type == "cgroup2") && (opts == "ro" || opts.rfind("ro,", 0) == 0)) return true;
  return false;
}

Check check_cgroups(const CgroupSettings& settings) {
  CgroupSupport s = probe_cgroups(settings);
  std::string ctl;
  for (const auto& c : s.controllers) ctl += (ctl.empty() ? "" : ",") + c;
  return judge_cgroups(
      {.root = ::geteuid() == 0,
       .fs_read_only = cgroup_mounts_read_only(),
       .can_limit = s.can_limit_memory && s.can_limit_pids,
       .summary = s.version + " controllers: " + (ctl.empty() ? "none" : ctl) + (s.detail.empty() ? "" : "; " + s.detail)});
}

Check check_default_image(const SandboxConfig& cfg) {
  try {
    const std::filesystem::path rootfs = sandboxrun::check_image(cfg.image);
    return {"default image", true, true, cfg.image + " (" + rootfs.string() + ")", ""};
  } catch (const Error& e) {
    return {"default image", false, true, e.what(), "run `sandboxrun image build-default` (as root)"};
  }
}

// A sandbox at the config's default trust level, its records in a scratch log removed after.
Check check_trial(const std::filesystem::path& config) {
  TrialFacts f{.root = ::geteuid() == 0};
  std::string dir = (std::filesystem::temp_directory_path() / "doctor-trial.XXXXXX").string();
  if (!::mkdtemp(dir.data()))
    return {"trial run", false, true, "cannot make a scratch directory in " + dir, "check $TMPDIR (or /tmp)"};
  try {
    Executor ex = Executor::open({.config = config, .audit_log = dir + "/audit.log", .single_run = true});
    RunRequest req;
    req.code = "print('ok')\n";
    req.name = "doctor.py";
    const RunResult r = ex.run(req);
    if (r.status != RunStatus::exited || r.exit_code != 0 || r.outcome.stdout_data != "ok\n")
      f.error = !r.error.empty() ? r.error : "status " + std::string(to_string(r.status)) + ", exit " +
                                                std::to_string(r.exit_code) + ": " + r.outcome.stderr_data.substr(0, 300);
    for (const auto& d : r.outcome.degradations) f.degradations += (f.degradations.empty() ? "" : "; ") + d;
  } catch (const Error& e) {
    f.error = e.describe();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return judge_trial(f);
}

}  // namespace

int doctor_command(const std::vector<std::string>& argv) {
  CLI::App app{"Report what this host supports", "sandboxrun doctor"};
  std::optional<std::string> config;
  app.add_option("--config", config, "sandbox.yaml, or the directory holding it");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  std::vector<Check> checks;
  checks.push_back(check_userns());
  checks.push_back(check_seccomp());
  SandboxConfig cfg;
  try {
    std::filesystem::path file = find_config(config);
    cfg = load_sandbox_config(file);
    checks.push_back({"config", true, true, file.string(), ""});
    checks.push_back(check_landlock(cfg.landlock));
    checks.push_back(check_id_ranges(cfg.id_ranges));
    checks.push_back(check_cgroups(cfg.cgroup));
    checks.push_back(check_default_image(cfg));
    // What the probes cannot see shows when a sandbox starts: only worth it when they passed.
    if (std::all_of(checks.begin(), checks.end(), [](const Check& c) { return c.ok || !c.required; }))
      checks.push_back(check_trial(file));
  } catch (const Error& e) {
    checks.push_back({"config", false, true, e.what(), e.hint()});
  }
  bool all_required = true;
  for (const auto& c : checks) {
    const char* mark = c.ok ? "ok     " : (c.required ? "MISSING" : "absent ");
    std::cout << mark << "  " << c.name << ": " << c.detail << "\n";
    if (!c.ok && !c.fix.empty()) std::cout << "         fix: " << c.fix << "\n";
    if (!c.ok && c.required) all_required = false;
  }
  std::cout << (all_required ? "sandboxrun can run sandboxes on this host\n"
                             : "sandboxrun cannot run sandboxes on this host until the above is fixed\n");
  return all_required ? 0 : 1;
}

}  // namespace sandboxrun::cli
