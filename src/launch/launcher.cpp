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

namespace {

using launch::ChildPlan;

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
};

}  // namespace

std::string sandbox_script_name(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (out.empty() || out[0] == '.') out = "main.py";
  return out.substr(0, 128);
}

namespace {

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

// /work's tmpfs and what pid 1 writes into it before the release: the inputs (the program's),
// with every directory they need, parents first. The script comes with the release.
void add_work_files(const LaunchRequest& req, ChildPlan& p) {
  const auto& spec = req.spec;
  p.work_dir = p.rootfs + "/work";
  p.work_opts = "size=" + std::to_string(spec.limits.work_bytes) + ",mode=0755,uid=" + std::to_string(spec.uid) +
                ",gid=" + std::to_string(spec.gid);
  if (!req.inputs) return;
  std::set<std::string> dirs;
  for (const auto& f : *req.inputs) {
    for (auto slash = f.path.find('/'); slash != std::string::npos; slash = f.path.find('/', slash + 1))
      dirs.insert(f.path.substr(0, slash));
    p.work_files.push_back({p.work_dir + "/" + f.path, f.data.data(), f.data.size(), f.mode});
  }
  // std::set orders "a" before "a/b": parents come first.
  for (const auto& d : dirs) p.work_subdirs.push_back(p.work_dir + "/" + d);
  p.pass_work_dir = static_cast<bool>(req.on_work_dir);
}

void build_plan(const LaunchRequest& req, ChildPlan& p, std::string& release) {
  const auto& spec = req.spec;
  const std::string host_rootfs = std::filesystem::canonical(spec.rootfs).string();
  p.rootfs = host_rootfs;
  if (::geteuid() == 0) {
    // pid 1 lives in an id slot's user namespace and may not be able to reach host_rootfs.
    p.root_tree.reset(::open_tree(AT_FDCWD, host_rootfs.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW));
    if (!p.root_tree) throw_errno("cannot clone a mount of the image " + host_rootfs);
    p.rootfs = launch::kAttachedRoot;
  }
  p.proc_dir = p.rootfs + "/proc";
  p.dev_dir = p.rootfs + "/dev";
  p.tmp_dir = p.rootfs + "/tmp";
  p.run_dir = p.rootfs + "/run";
  p.sandbox_dir = p.run_dir + "/sandbox";
  const std::string name = sandbox_script_name(req.script_name);
  for (const char* node : {"null", "zero", "full", "random", "urandom"}) {
    p.dev_node_host.push_back(std::string("/dev/") + node);
    p.dev_node_target.push_back(p.dev_dir + "/" + node);
  }
  p.dev_pts = p.dev_dir + "/pts";
  p.dev_shm = p.dev_dir + "/shm";
  p.dev_tmpfs_opts = "size=64k,nr_inodes=64,mode=0755";
  p.tmp_opts = "size=" + std::to_string(spec.limits.tmp_bytes) + ",mode=1777";
  p.shm_opts = "size=" + std::to_string(spec.limits.tmp_bytes) + ",mode=1777";
  p.root_remount_flags = root_flags(host_rootfs);
  launch::plan_etc_files(spec, host_rootfs, p.rootfs, p.root_remount_flags, p.etc);
  p.max_script = req.script.size();
  p.run_opts = "size=" + std::to_string(p.max_script + p.etc.bytes() + (1 << 20)) + ",mode=0755";
  add_work_files(req, p);
  for (const auto& b : spec.run_binds) {
    if (b.name.empty() || b.name == "sandbox" || b.name == "sandboxrun" || b.name == "." || b.name == ".." || b.name.find('/') != std::string::npos)
      throw Error("bind name '" + b.name + "' is not one path component under /run", "report this as a bug");
    const std::string source = std::filesystem::canonical(b.source).string();
    UniqueFd tree(::open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW));
    if (!tree) throw_errno("cannot clone a mount of " + source + " to bind it at /run/" + b.name);
    // Never suid or devices; noexec and atime stay as on the host (wheels carry shared objects,
    // so a cache on a noexec filesystem cannot serve them).
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b.writable ? 0 : MOUNT_ATTR_RDONLY);
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
      throw_errno("cannot set the flags of the bind of " + source);
    p.bind_trees.push_back(std::move(tree));
    p.bind_target.push_back(p.run_dir + "/" + b.name);
  }
  p.proc_readonly = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"};
  p.proc_masked_files = {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kallsyms",
                         "/proc/latency_stats"};
  p.proc_masked_dirs = {"/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/firmware"};
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
    p.test_bind_target = p.rootfs + "/mnt";
  }

  std::vector<std::string> argv{spec.python, "-B", "/work/" + name};
  argv.insert(argv.end(), req.args.begin(), req.args.end());
  std::vector<std::string> envp;
  for (const auto& [k, v] : spec.env) envp.push_back(k + "=" + v);
  release = launch::encode_release(name, req.script, argv, envp);
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
                "build the default image with `sandboxrun image build-default`, or set `image:` in sandbox.yaml", errno);
  // /work is a mount point too; images rarely have one, so it is added once (an empty directory,
  // like the image's own /tmp), the first time the image runs.
  const std::string work = rootfs + "/work";
  if (::mkdir(work.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error("cannot create the mount point /work in image rootfs " + rootfs,
                "create an empty directory work/ in the image (or make the image store writable)", errno);
  // Mount points must be real directories: a symlink here would redirect our mounts.
  for (const char* dir : {"proc", "dev", "tmp", "run", "work"}) {
    std::string p = rootfs + "/" + dir;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw Error("image rootfs " + rootfs + " has no directory /" + dir + " (or it is a symlink)",
                  "the image needs /proc, /dev, /tmp, /run and /work directories as mount points");
  }
  std::string py = rootfs + python;
  if (::access(py.c_str(), X_OK) != 0 && ::faccessat(AT_FDCWD, py.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0)
    throw Error("image rootfs " + rootfs + " has no interpreter " + python,
                "use an image with python3 installed", errno);
}

RunOutcome run_sandbox(const LaunchRequest& req) {
  RunOutcome out;
  const auto& spec = req.spec;
  if (!req.seccomp) throw Error("launch request without a seccomp program", "compile spec.seccomp_profile first");
  validate_rootfs(spec.rootfs.string(), spec.python);
  // Always a user namespace: unprivileged, it maps the caller's own id; as root, a slot of the
  // reserved range, held until the sandbox is gone (declared before the cgroup, released after it).
  std::shared_ptr<const IdSlot> slot = req.id_slot;
  if (!slot && ::geteuid() == 0) slot = std::make_shared<const IdSlot>(IdSlot::claim(spec.id_ranges));
  if (slot) out.id_slot = slot->info();

  std::string degraded_reason;
  auto cgroup_started = std::chrono::steady_clock::now();
  std::unique_ptr<Cgroup> cgroup =
      req.cgroup_host && req.cgroup_host->settings() == spec.cgroup
          ? req.cgroup_host->create(req.run_id, spec.limits, &degraded_reason, &out.warnings)
          : create_cgroup(req.run_id, spec.limits, spec.cgroup, &degraded_reason, &out.warnings);
  out.timings.cgroup = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - cgroup_started);
  out.cgroup_backend = cgroup ? cgroup->backend() : "none (degraded)";
  if (cgroup) out.degradations = cgroup->degradations();
  else out.degradations.push_back("no cgroup: memory, pids and cpu limits are not enforced (" + degraded_reason + ")");

  ChildPlan plan;
  std::string release;
  build_plan(req, plan, release);
  out.landlock_abi = plan.landlock.abi;
  plan.id_slot = slot != nullptr;
  plan.netns_prepared = req.netns_fd >= 0;
  CapsGuard caps;
  if (!caps.caps) throw_errno("cap_init");
  plan.empty_caps = caps.caps;

  // The release channel is a socket, not a pipe: if pid 1 dies before it reads a release, the
  // launcher's send fails with EPIPE instead of raising SIGPIPE in the caller (a service).
  int sync_pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync_pair) != 0) throw_errno("socketpair for the release channel");
  Pipe sync{UniqueFd(sync_pair[0]), UniqueFd(sync_pair[1])};
  UniqueFd go_event(::eventfd(0, EFD_CLOEXEC));
  if (!go_event) throw_errno("eventfd for the first release");
  Pipe error = make_pipe();
  Pipe status = make_pipe();
  Pipe out_pipe = make_pipe();
  Pipe err_pipe = make_pipe();
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) throw_errno("open /dev/null");
  // The program's stdin: a pipe the monitor feeds from req.stdin_fd (never the launcher's own
  // fd, which may be a terminal) or req.stdin_data, or /dev/null.
  Pipe in_pipe;
  if (req.stdin_fd >= 0 || req.stdin_data) {
    in_pipe = make_pipe();
    if (::fcntl(in_pipe.write.get(), F_SETFL, O_NONBLOCK) != 0) throw_errno("make the stdin pipe non-blocking");
  }
  int sv[2] = {-1, -1};
  if ((plan.proxy_socket || plan.pass_work_dir) && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw_errno("socketpair for the control socket");
  UniqueFd control_read(sv[0]), control_write(sv[1]);
  // Denials reported, not just refused, when the profile allows it (SeccompProgram).
  int nv[2] = {-1, -1};
  out.denied.notify = !req.seccomp->notify_instructions.empty();
  if (out.denied.notify) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, nv) != 0) throw_errno("socketpair for the seccomp listener");
    plan.seccomp = req.seccomp->notify_fprog();
  }
  UniqueFd notify_read(nv[0]), notify_write(nv[1]);

  plan.go_event = go_event.get();
  plan.sync_read = sync.read.get();
  plan.error_write = error.write.get();
  plan.status_write = status.write.get();
  plan.control_write = control_write.get();
  plan.notify_write = notify_write.get();
  plan.stdin_fd = in_pipe.read ? in_pipe.read.get() : devnull.get();
  plan.stdout_write = out_pipe.write.get();
  plan.stderr_write = err_pipe.write.get();

  const uid_t outside_uid = ::geteuid();
  const gid_t outside_gid = ::getegid();
  auto started = std::chrono::steady_clock::now();
  launch::CloneResult child;
  {
    // pid 1 starts in the run's cgroup: no migration after the clone (see CloneIntoCgroup).
    CloneIntoCgroup into(cgroup.get());
    child = launch::clone_sandbox(launch::namespace_flags(), into.clone_into_fd(),
                                  slot ? static_cast<long>(slot->info().host_root) : -1, req.netns_fd);
    if (child.pid == 0) launch::child_main(plan);  // never returns
  }
  ChildGuard guard(child.pid);

  // Close the child's ends in the parent so EOF means "every writer is gone".
  sync.read.reset();
  error.write.reset();
  status.write.reset();
  out_pipe.write.reset();
  err_pipe.write.reset();
  control_write.reset();
  in_pipe.read.reset();
  notify_write.reset();

  if (slot) launch::write_slot_id_maps(child.pid, slot->info(), spec.uid, spec.gid);
  else launch::write_id_maps(child.pid, spec.uid, spec.gid, outside_uid, outside_gid);
  // Two releases: the eventfd lets pid 1 set itself up, the release (release.hpp) lets it start
  // the payload. Between them the caller's before_exec runs, overlapping the sandbox's setup. The
  // socket's write end stays open while we live: pid 1 reads EOF if the launcher dies before
  // either. A failed send means pid 1 is already gone: the monitor reports why (its error pipe).
  const uint64_t go = 1;
  if (::write(go_event.get(), &go, sizeof go) == sizeof go) {
    if (req.before_exec) req.before_exec();
    for (size_t sent = 0; sent < release.size();) {
      const ssize_t n = ::send(sync.write.get(), release.data() + sent, release.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  }

  launch::MonitorFds fds;
  fds.pidfd = std::move(child.pidfd);
  fds.stdout_read = std::move(out_pipe.read);
  fds.stderr_read = std::move(err_pipe.read);
  fds.status_read = std::move(status.read);
  fds.error_read = std::move(error.read);
  fds.control_read = std::move(control_read);
  fds.stdin_write = std::move(in_pipe.write);
  fds.notify_read = std::move(notify_read);
  // Once the monitor has reaped pid 1 the guard must not touch that pid again (it may be reused).
  if (launch::monitor_sandbox(req, child.pid, fds, cgroup.get(), out, started)) guard.release();
  // A successful execve of the payload (spawn timed) means pid 1 applied the ruleset before it.
  out.landlock_enforced = out.landlock_abi > 0 && out.timings.spawn.count() > 0;
  cgroup.reset();  // kill stragglers and remove the cgroup now, inside the teardown timing
  if (out.timings.run.count() > 0)
    out.timings.teardown = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - (started + out.timings.spawn + out.timings.run));
  return out;
}

}  // namespace sandboxrun
