// Parent side of one run: prepare the plan, create the cgroup, clone, map ids, release the
// child, monitor. RAII owns every fd, the cgroup and the child (killed if we unwind).
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <set>

#include "child_plan.hpp"
#include "id_slots_child.hpp"
#include "monitor.hpp"
#include "namespaces.hpp"
#include "release.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/launch.hpp"

namespace sandboxrun {

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::exited: return "exited";
    case RunStatus::signaled: return "signaled";
    case RunStatus::timeout: return "timeout";
    case RunStatus::oom: return "oom";
    case RunStatus::blocked: return "blocked";
    case RunStatus::error: return "error";
  }
  return "error";
}

using launch::ChildPlan;

namespace launch {

// Kills and reaps the sandbox's pid 1 if the launcher unwinds before the monitor did.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {}
    }
  }
  void release() { pid_ = -1; }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;

 private:
  pid_t pid_;
};

struct CapsGuard {
  cap_t caps = cap_init();
  ~CapsGuard() { cap_free(caps); }
  CapsGuard() = default;
  CapsGuard(const CapsGuard&) = delete;
  CapsGuard& operator=(const CapsGuard&) = delete;
};

}  // namespace launch

std::string sandbox_script_name(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (out.empty() || out[0] == '.') out = "main.py";
  return out.substr(0, 128);
}

namespace {

// Every directory from `path` up to / grants search to others: an id slot's uid may walk it.
bool searchable_by_all(const std::string& path) {
  for (std::filesystem::path p(path); ; p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
    if (p == p.root_path() || !p.has_relative_path()) return true;
  }
}

// The OOM killer's first choice in a cgroup is the highest oom_score_adj (1000 at most).
bool raise_oom_score(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/oom_score_adj";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd && ::write(fd.get(), "1000", 4) == 4;
}

unsigned long root_flags(const std::string& rootfs) {
  unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV;
  // Keep the atime flags of the underlying mount: in a user namespace they are locked.
  struct statvfs sv {};
  if (::statvfs(rootfs.c_str(), &sv) == 0) {
    if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  }
  return flags;
}

void build_plan(const LaunchRequest& req, ChildPlan& p) {
  const auto& spec = req.spec;
  const std::string host_rootfs = std::filesystem::canonical(spec.rootfs).string();
  p.rootfs = host_rootfs;
  if (::geteuid() == 0) {
    // pid 1 lives in an id slot's user namespace and may not be able to reach host_rootfs.
    p.root_tree.reset(::open_tree(AT_FDCWD, host_rootfs.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW));
    if (p.root_tree) {
      p.rootfs = launch::kAttachedRoot;
    } else if (errno != EPERM || !searchable_by_all(host_rootfs)) {
      const int err = errno;
      throw Error("cannot clone a mount of the image " + host_rootfs,
                  err == EPERM ? "as root the launcher needs CAP_SYS_ADMIN for an image only root can reach: put the "
                                 "image where every user may search (the image store /var/lib/sandboxrun is), or add "
                                 "CAP_SYS_ADMIN, or run sandboxrun as a non-root user"
                               : "",
                  err);
    }
    // Else root without CAP_SYS_ADMIN (a container's default capabilities): pid 1 binds the
    // image itself, in the mount namespace its own user namespace owns, as bubblewrap does.
  }
  launch::MountInputs m{.rootfs = p.rootfs,
                        .root_tree = p.root_tree ? p.root_tree.get() : -1,
                        .uid = spec.uid,
                        .gid = spec.gid,
                        .tmp_bytes = spec.limits.tmp_bytes,
                        .work_bytes = spec.limits.work_bytes,
                        .root_remount_flags = root_flags(host_rootfs),
                        .etc = &p.etc,
                        .inputs = req.inputs,
                        .pass_work_dir = static_cast<bool>(req.on_work_dir)};
  launch::plan_etc_files(spec, host_rootfs, p.rootfs, m.root_remount_flags, p.etc);
  p.max_script = std::max(req.max_script, req.script.size());
  m.run_bytes = p.max_script + p.etc.bytes() + (1 << 20);
  p.run_opts = launch::run_tmpfs_options(m.run_bytes);
  p.pass_work_dir = m.pass_work_dir;
  for (const auto& b : spec.run_binds) {
    if (b.name.empty() || b.name == "sandbox" || b.name == "sandboxrun" || b.name == "." || b.name == ".." || b.name.find('/') != std::string::npos)
      throw Error("bind name '" + b.name + "' is not one path component under /run", "report this as a bug");
    const std::string source = std::filesystem::canonical(b.source).string();
    UniqueFd tree(::open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW));
    if (!tree)
      throw Error("cannot clone a mount of " + source + " to bind it at /run/" + b.name,
                  errno == EPERM ? "the launcher lacks CAP_SYS_ADMIN (a container's default capabilities): run "
                                   "sandboxrun there as a non-root user, or add CAP_SYS_ADMIN"
                                 : "",
                  errno);
    // Never suid or devices; noexec and atime stay as on the host (wheels carry shared objects,
    // so a cache on a noexec filesystem cannot serve them).
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b.writable ? 0 : MOUNT_ATTR_RDONLY);
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
      throw_errno("cannot set the flags of the bind of " + source);
    m.run_binds.emplace_back(b.name, tree.get());
    p.bind_trees.push_back(std::move(tree));
  }
  p.workdir = spec.workdir;
  p.hostname = spec.hostname;
  p.uid = spec.uid;
  p.gid = spec.gid;
  p.proxy_socket = spec.network.mode == NetworkMode::allowlist;
  p.seccomp = req.seccomp->fprog();
  launch::prepare_landlock(spec, p.landlock);
  if (!spec.test_extra_writable_bind.empty()) {
    p.test_bind_tree.reset(::open_tree(AT_FDCWD, spec.test_extra_writable_bind.c_str(),
                                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW));
    if (!p.test_bind_tree) throw_errno("cannot clone a mount of " + spec.test_extra_writable_bind);
    m.test_bind_tree = p.test_bind_tree.get();
  }
  p.mounts = launch::plan_mounts(m);

  p.wipe_begin = req.wipe_begin;
  p.wipe_end = req.wipe_end;
  p.payload_stack_size = 64 * 1024;  // a few frames of system calls; under ASan, larger ones
  p.payload_stack = std::make_unique_for_overwrite<char[]>(p.payload_stack_size);
}

}  // namespace

void validate_rootfs(const std::string& rootfs, const std::string& python) {
  struct stat st {};
  if (rootfs.empty() || ::stat(rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("image rootfs " + (rootfs.empty() ? std::string("(none configured)") : rootfs) +
                    " is not a directory",
                "build the default image with `sandboxrun image build-default`, or set `image:` in sandbox.yaml", errno).as(ErrorKind::image);
  // /work is a mount point too; images rarely have one, so it is added once (an empty directory,
  // like the image's own /tmp), the first time the image runs.
  const std::string work = rootfs + "/work";
  if (::mkdir(work.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error("cannot create the mount point /work in image rootfs " + rootfs,
                "create an empty directory work/ in the image (or make the image store writable)", errno).as(ErrorKind::image);
  // Mount points must be real directories: a symlink here would redirect our mounts.
  for (const char* dir : {"proc", "dev", "tmp", "run", "work"}) {
    std::string p = rootfs + "/" + dir;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw Error("image rootfs " + rootfs + " has no directory /" + dir + " (or it is a symlink)",
                  "the image needs /proc, /dev, /tmp, /run and /work directories as mount points").as(ErrorKind::image);
  }
  std::string py = rootfs + python;
  if (::access(py.c_str(), X_OK) != 0 && ::faccessat(AT_FDCWD, py.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0)
    throw Error("image rootfs " + rootfs + " has no interpreter " + python,
                "use an image with python3 installed", errno).as(ErrorKind::image);
}

// A launch between its clone and its release: what start() built and finish() uses. Members
// are destroyed in reverse order: pid 1 (guard) before its cgroup, the cgroup before the slot.
struct PreparedSandbox::State {
  RunOutcome out;
  std::shared_ptr<const IdSlot> slot;
  std::unique_ptr<Cgroup> cgroup;
  launch::CapsGuard caps;
  ChildPlan plan;
  Pipe sync, error, status, out_pipe, err_pipe, in_pipe;
  UniqueFd go_event, devnull, control_read, notify_read;
  pid_t pid = -1;
  UniqueFd pidfd;
  std::optional<launch::ChildGuard> guard;
  std::string run_id;
  SandboxSpec spec;
  const SeccompProgram* seccomp = nullptr;
  bool released_setup = false;  // the go event reached pid 1
  bool used = false;
  std::chrono::steady_clock::time_point started;
};

namespace {

// Everything up to pid 1 setting itself up: cgroup, plan, channels, clone, id maps, the go
// event. pid 1 then waits for the release (finish).
void start(PreparedSandbox::State& st, const LaunchRequest& req) {
  RunOutcome& out = st.out;
  const auto& spec = req.spec;
  if (!req.seccomp) throw Error("launch request without a seccomp program", "compile spec.seccomp_profile first");
  validate_rootfs(spec.rootfs.string(), spec.python);
  st.run_id = req.run_id;
  st.spec = spec;
  st.seccomp = req.seccomp;
  // Always a user namespace: unprivileged, it maps the caller's own id; as root, a slot of the
  // reserved range, held until the sandbox is gone (declared before the cgroup, released after it).
  st.slot = req.id_slot;
  if (!st.slot && ::geteuid() == 0) st.slot = std::make_shared<const IdSlot>(IdSlot::claim(spec.id_ranges));
  if (st.slot) out.id_slot = st.slot->info();

  std::string degraded_reason;
  auto cgroup_started = std::chrono::steady_clock::now();
  st.cgroup = req.cgroup_host && req.cgroup_host->settings() == spec.cgroup
                  ? req.cgroup_host->create(req.run_id, spec.limits, &degraded_reason, &out.warnings)
                  : create_cgroup(req.run_id, spec.limits, spec.cgroup, &degraded_reason, &out.warnings);
  out.timings.cgroup = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - cgroup_started);
  out.cgroup_backend = st.cgroup ? st.cgroup->backend() : "none (degraded)";
  if (st.cgroup) out.degradations = st.cgroup->degradations();
  else out.degradations.push_back("no cgroup: memory, pids and cpu limits are not enforced (" + degraded_reason + ")");
  const bool enclosing = st.cgroup && st.cgroup->encloses_launcher();
  // A container holding one run is that run's slot: nothing else there shares its ids.
  if (!st.slot && !enclosing)
    out.degradations.push_back("no id slot: the sandbox user is uid " + std::to_string(::geteuid()) +
                               " on the host, as the caller's other processes and runs are (run as root for "
                               "id slots, or one run per container with cgroup.mode: enclosing)");

  ChildPlan& plan = st.plan;
  build_plan(req, plan);
  out.landlock_abi = plan.landlock.abi;
  plan.id_slot = st.slot != nullptr;
  plan.max_processes = st.cgroup ? st.cgroup->process_limit() : 0;
  plan.netns_prepared = req.netns_fd >= 0;
  if (!st.caps.caps) throw_errno("cap_init");
  plan.empty_caps = st.caps.caps;

  // The release channel is a socket, not a pipe: if pid 1 dies before it reads a release, the
  // launcher's send fails with EPIPE instead of raising SIGPIPE in the caller (a service).
  int sync_pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync_pair) != 0) throw_errno("socketpair for the release channel");
  st.sync = Pipe{UniqueFd(sync_pair[0]), UniqueFd(sync_pair[1])};
  st.go_event.reset(::eventfd(0, EFD_CLOEXEC));
  if (!st.go_event) throw_errno("eventfd for the first release");
  st.error = make_pipe();
  st.status = make_pipe();
  st.out_pipe = make_pipe();
  st.err_pipe = make_pipe();
  st.devnull.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!st.devnull) throw_errno("open /dev/null");
  // The program's stdin: a pipe the monitor feeds from req.stdin_fd (never the launcher's own
  // fd, which may be a terminal) or req.stdin_data, or /dev/null.
  if (req.stdin_fd >= 0 || req.stdin_data) {
    st.in_pipe = make_pipe();
    if (::fcntl(st.in_pipe.write.get(), F_SETFL, O_NONBLOCK) != 0) throw_errno("make the stdin pipe non-blocking");
  }
  int sv[2] = {-1, -1};
  if ((plan.proxy_socket || plan.pass_work_dir) && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw_errno("socketpair for the control socket");
  st.control_read.reset(sv[0]);
  UniqueFd control_write(sv[1]);
  // Denials reported, not just refused, when the profile allows it (SeccompProgram).
  int nv[2] = {-1, -1};
  out.denied.notify = !req.seccomp->notify_instructions.empty();
  if (out.denied.notify) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, nv) != 0) throw_errno("socketpair for the seccomp listener");
    plan.seccomp = req.seccomp->notify_fprog();
  }
  st.notify_read.reset(nv[0]);
  UniqueFd notify_write(nv[1]);

  plan.go_event = st.go_event.get();
  plan.sync_read = st.sync.read.get();
  plan.error_write = st.error.write.get();
  plan.status_write = st.status.write.get();
  plan.control_write = control_write.get();
  plan.notify_write = notify_write.get();
  plan.stdin_fd = st.in_pipe.read ? st.in_pipe.read.get() : st.devnull.get();
  plan.stdout_write = st.out_pipe.write.get();
  plan.stderr_write = st.err_pipe.write.get();

  const uid_t outside_uid = ::geteuid();
  const gid_t outside_gid = ::getegid();
  st.started = std::chrono::steady_clock::now();
  launch::CloneResult child;
  {
    // pid 1 starts in the run's cgroup: no migration after the clone (see CloneIntoCgroup).
    CloneIntoCgroup into(st.cgroup.get());
    child = launch::clone_sandbox(launch::namespace_flags(), into.clone_into_fd(),
                                  st.slot ? static_cast<long>(st.slot->info().host_root) : -1, req.netns_fd);
    if (child.pid == 0) launch::child_main(plan);  // never returns
    st.guard.emplace(child.pid);
    st.pid = child.pid;
    if (req.on_started) req.on_started(child.pid);
    st.pidfd = std::move(child.pidfd);
    // In the container's own cgroup an OOM kill must take the sandbox, never the launcher
    // (which would lose the result and the audit record): raising a score needs no privilege.
    if (enclosing && !raise_oom_score(child.pid))
      out.warnings.push_back("cannot raise the sandbox's oom_score_adj: an OOM kill in the container may "
                             "take the launcher instead of the sandbox");
    // pid 1 waits for its id maps and the eventfd: both first, so that it sets itself up while
    // this thread steps back out of the run's v1 cgroups (the end of this block) and closes
    // the child's ends below, instead of after them.
    if (st.slot) launch::write_slot_id_maps(child.pid, st.slot->info(), spec.uid, spec.gid, child.uid_map, child.gid_map);
    else launch::write_id_maps(child.pid, spec.uid, spec.gid, outside_uid, outside_gid);
    // The eventfd lets pid 1 set itself up; finish() then sends the release (release.hpp) and,
    // once before_exec returned, kStartPayload. The socket's write end stays open while we live:
    // pid 1 reads EOF if the launcher dies before either. A failed write means pid 1 is already
    // gone: the monitor reports why (its error pipe).
    const uint64_t go = 1;
    st.released_setup = ::write(st.go_event.get(), &go, sizeof go) == sizeof go;
  }

  // Close the child's ends in the parent so EOF means "every writer is gone".
  st.sync.read.reset();
  st.error.write.reset();
  st.status.write.reset();
  st.out_pipe.write.reset();
  st.err_pipe.write.reset();
  control_write.reset();
  st.in_pipe.read.reset();
  notify_write.reset();
}

// The release with this run's script, argv and environment, then the monitor to the end.
RunOutcome finish(const std::shared_ptr<PreparedSandbox::State>& state, const LaunchRequest& req) {
  PreparedSandbox::State& st = *state;
  RunOutcome& out = st.out;
  // From before the payload may start: a Ctrl-C once run_start is in the log must reach the
  // monitor (which kills the sandbox and reports it), not end the launcher by default.
  const launch::SignalGuard signals(req.stop_signals);
  // The release goes first, so that pid 1 places the script and drops its privileges while
  // before_exec runs (the run_start record made durable: an fdatasync, the longest step of a run
  // in a sandbox prepared ahead); the payload itself starts only on the 'X' after it.
  auto send_all = [&](const std::string& bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(st.sync.write.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  };
  if (st.released_setup) {
    const std::string name = sandbox_script_name(req.script_name);
    std::vector<std::string> argv{req.spec.python, "-B", "/work/" + name};
    argv.insert(argv.end(), req.args.begin(), req.args.end());
    std::vector<std::string> envp;
    for (const auto& [k, v] : req.spec.env) envp.push_back(k + "=" + v);
    if (send_all(launch::encode_release(name, req.script, argv, envp))) {
      if (req.before_exec) req.before_exec();
      send_all(std::string(1, launch::kStartPayload));
    }
  }

  launch::MonitorFds fds;
  fds.pidfd = std::move(st.pidfd);
  fds.stdout_read = std::move(st.out_pipe.read);
  fds.stderr_read = std::move(st.err_pipe.read);
  fds.status_read = std::move(st.status.read);
  fds.error_read = std::move(st.error.read);
  fds.control_read = std::move(st.control_read);
  fds.stdin_write = std::move(st.in_pipe.write);
  fds.notify_read = std::move(st.notify_read);
  // Once the monitor has reaped pid 1 the guard must not touch that pid again (it may be reused).
  const bool reaped = launch::monitor_sandbox(req, st.pid, fds, st.cgroup.get(), out, st.started, signals);
  if (reaped) st.guard->release();
  // A successful execve of the payload (spawn timed) means pid 1 applied the ruleset before it.
  out.landlock_enforced = out.landlock_abi > 0 && out.timings.spawn.count() > 0;
  // Kill stragglers and remove the cgroup now, inside the teardown timing, unless the caller
  // takes that on (pid 1 then still exists: the monitor ended on the payload's status).
  const bool deferred = !reaped && req.defer_teardown;
  if (!deferred) st.cgroup.reset();
  if (out.timings.run.count() > 0)
    out.timings.teardown = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - (st.started + out.timings.spawn + out.timings.run));
  RunOutcome result = std::move(out);
  if (deferred) req.defer_teardown(state);  // the State's members go in order: pid 1, cgroup, slot
  return result;
}

}  // namespace

RunOutcome run_sandbox(const LaunchRequest& req) {
  const auto st = std::make_shared<PreparedSandbox::State>();
  start(*st, req);
  return finish(st, req);
}

PreparedSandbox::PreparedSandbox() : s_(std::make_shared<State>()) {}
PreparedSandbox::~PreparedSandbox() = default;

std::unique_ptr<PreparedSandbox> PreparedSandbox::prepare(const LaunchRequest& base) {
  // base.on_work_dir only asks for /work to be passed: the run's own callback receives it.
  if (base.inputs || base.stdin_fd >= 0 || base.stdin_data || !base.script.empty())
    throw Error("a sandbox prepared ahead takes no script, inputs or stdin", "report this as a bug");
  std::unique_ptr<PreparedSandbox> p(new PreparedSandbox());
  start(*p->s_, base);
  return p;
}

RunOutcome PreparedSandbox::run(const LaunchRequest& req) {
  State& st = *s_;
  if (st.used) throw Error("a prepared sandbox runs once", "report this as a bug");
  // What shaped the sandbox before its release must be the run's own (the Executor builds both
  // from the same settings); the environment, argv and script come with the release.
  const bool same = req.run_id == st.run_id && req.seccomp == st.seccomp && req.spec.shape() == st.spec.shape();
  if (!same || (req.inputs && !req.inputs->empty()) || req.stdin_fd >= 0 || req.stdin_data ||
      (req.on_work_dir && !st.plan.pass_work_dir) ||
      !req.spec.run_binds.empty() || req.spec.network.mode != NetworkMode::none ||
      req.script.size() > st.plan.max_script)
    throw Error("the run does not fit the sandbox prepared for it (settings, inputs, stdin or script size)",
                "report this as a bug");
  st.used = true;
  // Its spawn is what the run waited for: from the release to the payload's execve. Its cgroup
  // was made ahead, so the run did not wait for that.
  st.started = std::chrono::steady_clock::now();
  st.out.timings.cgroup = {};
  st.out.prepared = true;
  return finish(s_, req);
}

}  // namespace sandboxrun
