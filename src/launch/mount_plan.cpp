#include "mount_plan.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <set>

#include "child_plan.hpp"
#include "fd_passing.hpp"

namespace sandboxrun::launch {

namespace {

using Kind = MountOp::Kind;

constexpr unsigned long kProcReadonly = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
constexpr const char* kDevTmpfs = "size=64k,nr_inodes=64,mode=0755";

// Builds the list; each helper appends the operations of one part of the sandbox.
class Planner {
 public:
  explicit Planner(const MountInputs& in) : in_(in), root_(in.rootfs) {}

  std::vector<MountOp> build() {
    mount("make mounts private", "", "/", "", MS_REC | MS_PRIVATE);
    image();
    mount("mount proc", "proc", root_ + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
    dev();
    tmpfs(root_ + "/tmp", MS_NOSUID | MS_NODEV, "size=" + std::to_string(in_.tmp_bytes) + ",mode=1777");
    run();
    if (in_.test_bind_tree >= 0) attach("attach the test bind", in_.test_bind_tree, root_ + "/mnt");
    work();
    etc_binds();
    mount("remount rootfs read-only", "", root_, "", MS_BIND | MS_REMOUNT | in_.root_remount_flags);
    ops_.push_back({.kind = Kind::chdir, .stage = "chdir", .target = root_});
    ops_.push_back({.kind = Kind::pivot_root, .stage = "pivot_root", .target = root_});
    ops_.push_back({.kind = Kind::detach, .stage = "detach old root", .target = "."});
    ops_.push_back({.kind = Kind::chdir, .stage = "chdir", .target = "/"});
    proc();
    return std::move(ops_);
  }

 private:
  void mount(const char* stage, std::string source, std::string target, std::string fstype, unsigned long flags,
             std::string data = {}, bool optional = false) {
    ops_.push_back({.kind = Kind::mount, .stage = stage, .source = std::move(source), .target = std::move(target),
                    .fstype = std::move(fstype), .data = std::move(data), .flags = flags, .optional = optional});
  }
  void tmpfs(const std::string& target, unsigned long flags, std::string opts, const char* stage = "mount tmpfs") {
    mount(stage, "tmpfs", target, "tmpfs", flags, std::move(opts));
  }
  // A bind, then its flags in a remount: the kernel ignores most flags on the bind itself.
  void bind(const char* stage, const char* restage, const std::string& source, const std::string& target,
            unsigned long flags) {
    mount(stage, source, target, "", MS_BIND);
    mount(restage, "", target, "", MS_BIND | MS_REMOUNT | flags);
  }
  void mkdir(const std::string& target, mode_t mode, bool to_user = false, const char* stage = "mkdir") {
    ops_.push_back({.kind = Kind::mkdir, .stage = stage, .target = target, .mode = mode, .to_user = to_user});
  }
  void attach(const char* stage, int fd, const std::string& target) {
    ops_.push_back({.kind = Kind::attach, .stage = stage, .target = target, .fd = fd});
  }
  void create_file(const char* stage, const std::string& target, mode_t mode) {
    ops_.push_back({.kind = Kind::create_file, .stage = stage, .target = target, .mode = mode});
  }
  void symlink(const char* stage, std::string link_target, std::string at) {
    ops_.push_back({.kind = Kind::symlink, .stage = stage, .source = std::move(link_target), .target = std::move(at)});
  }

  // pid 1 of a root launcher runs as an id slot's host uid, which cannot search the host path
  // of the image (a checkout in /root is 0700); the launcher cloned it (open_tree) for pid 1.
  void image() {
    if (in_.root_tree < 0) {
      mount("bind rootfs", root_, root_, "", MS_BIND);
      return;
    }
    tmpfs(kAttachedRootBase, MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=4,mode=0700",
          "mount a tmpfs to attach the image below");
    mkdir(kAttachedRoot, 0700);
    attach("attach the image", in_.root_tree, kAttachedRoot);
  }

  void dev() {
    const std::string dev = root_ + "/dev";
    tmpfs(dev, MS_NOSUID | MS_NOEXEC, kDevTmpfs);
    for (const char* node : {"null", "zero", "full", "random", "urandom"}) {
      create_file("create device node", dev + "/" + node, 0666);
      bind("bind mount", "remount bind", std::string("/dev/") + node, dev + "/" + node, MS_NOSUID | MS_NOEXEC);
    }
    for (const auto& [target, name] : {std::pair{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
                                       {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
                                       {"pts/ptmx", "ptmx"}})
      symlink("symlink in /dev", target, dev + "/" + name);
    mkdir(dev + "/pts", 0755, false, "mkdir in /dev");
    mkdir(dev + "/shm", 01777, false, "mkdir in /dev");
    // A private devpts instance: ptys work, the host's terminals stay invisible.
    mount("mount devpts", "devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
    tmpfs(dev + "/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=" + std::to_string(in_.tmp_bytes) + ",mode=1777");
    mount("remount /dev read-only", "", dev, "", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, kDevTmpfs);
  }

  // /run: this run's /etc files and binds; the script comes with the release, which then makes
  // /run read-only.
  void run() {
    const std::string run = root_ + "/run";
    tmpfs(run, MS_NOSUID | MS_NODEV | MS_NOEXEC, run_tmpfs_options(in_.run_bytes));
    mkdir(run + "/sandbox", 0755);
    if (in_.etc) {
      const EtcPlan& etc = *in_.etc;
      mkdir(etc.dir, 0755);
      for (size_t i = 0; i < etc.file_path.size(); ++i)
        ops_.push_back({.kind = Kind::write_file, .stage = "write /etc file", .target = etc.file_path[i],
                        .data = etc.file_content[i], .mode = 0444});
      if (etc.shadow) mkdir(etc.image_etc_copy, 0755);
    }
    for (const auto& [name, fd] : in_.run_binds) {
      mkdir(run + "/" + name, 0755);
      attach("attach bind mount", fd, run + "/" + name);
    }
  }

  // /work: a tmpfs owned by the program, with the inputs (theirs too: the program may change them).
  void work() {
    const std::string work = root_ + "/work";
    tmpfs(work, MS_NOSUID | MS_NODEV,
          "size=" + std::to_string(in_.work_bytes) + ",mode=0755,uid=" + std::to_string(in_.uid) +
              ",gid=" + std::to_string(in_.gid));
    if (in_.inputs) {
      std::set<std::string> dirs;  // ordered: "a" before "a/b", parents first
      for (const auto& f : *in_.inputs)
        for (auto slash = f.path.find('/'); slash != std::string::npos; slash = f.path.find('/', slash + 1))
          dirs.insert(f.path.substr(0, slash));
      for (const auto& d : dirs) mkdir(work + "/" + d, 0755, true, "mkdir in /work");
      for (const auto& f : *in_.inputs)
        ops_.push_back({.kind = Kind::write_file, .stage = "write file", .target = work + "/" + f.path,
                        .mode = f.mode, .bytes = f.data.data(), .size = f.data.size(), .to_user = true});
    }
    if (in_.pass_work_dir) ops_.push_back({.kind = Kind::pass_work_dir, .stage = "pass /work to the launcher", .target = work});
  }

  // Where the image lacks one of the managed files, /etc is shadowed (etc_files.hpp).
  void etc_binds() {
    if (!in_.etc) return;
    const EtcPlan& etc = *in_.etc;
    constexpr unsigned long ro = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    if (etc.shadow) {
      bind("bind /etc file", "remount /etc file read-only", etc.image_etc, etc.image_etc_copy, etc.image_remount_flags);
      tmpfs(etc.image_etc, MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=0755", "mount tmpfs over /etc");
      for (size_t i = 0; i < etc.link_path.size(); ++i) symlink("symlink in /etc", etc.link_target[i], etc.link_path[i]);
      for (const auto& t : etc.target) create_file("create mount target", t, 0444);
      mount("remount /etc read-only", "", etc.image_etc, "", MS_REMOUNT | ro, "size=1m,mode=0755");
    }
    for (size_t i = 0; i < etc.target.size(); ++i)
      bind("bind /etc file", "remount /etc file read-only", etc.file_path[i], etc.target[i], ro);
  }

  // After pivot_root: the parts of /proc a container must not write or read (Docker's lists). A
  // kernel may lack any of them.
  void proc() {
    for (const char* p : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"}) {
      mount("bind /proc path", p, p, "", MS_BIND | MS_REC, {}, true);
      mount("make /proc path read-only", "", p, "", kProcReadonly, {}, true);
    }
    for (const char* p : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kallsyms",
                          "/proc/latency_stats"})
      mount("mask /proc file", "/dev/null", p, "", MS_BIND, {}, true);
    for (const char* p : {"/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/firmware"})
      mount("mask /proc directory", "tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=0,mode=0555", true);
  }

  const MountInputs& in_;
  const std::string root_;
  std::vector<MountOp> ops_;
};

const char* c_str_or_null(const std::string& s) { return s.empty() ? nullptr : s.c_str(); }

bool run_op(const ChildPlan& plan, const MountOp& op) noexcept {
  int rc = 0;
  switch (op.kind) {
    case Kind::mount:
      rc = ::mount(c_str_or_null(op.source), op.target.c_str(), c_str_or_null(op.fstype), op.flags,
                   c_str_or_null(op.data));
      break;
    case Kind::attach:
      rc = ::move_mount(op.fd, "", AT_FDCWD, op.target.c_str(), MOVE_MOUNT_F_EMPTY_PATH);
      break;
    case Kind::mkdir:
      rc = ::mkdir(op.target.c_str(), op.mode);
      if (rc == 0 && op.to_user) rc = ::chown(op.target.c_str(), plan.uid, plan.gid);
      break;
    case Kind::create_file: {
      const int fd = ::open(op.target.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, op.mode);
      if (fd >= 0) ::close(fd);
      rc = fd < 0 ? -1 : 0;
      break;
    }
    case Kind::write_file:
      // Reports its own failure: create or write.
      return op.bytes ? write_new_file(plan, AT_FDCWD, op.target.c_str(), op.bytes, op.size, op.mode, op.to_user)
                      : write_new_file(plan, AT_FDCWD, op.target.c_str(), op.data.data(), op.data.size(), op.mode,
                                       op.to_user);
    case Kind::symlink:
      rc = ::symlink(op.source.c_str(), op.target.c_str());
      break;
    case Kind::chdir:
      rc = ::chdir(op.target.c_str());
      break;
    case Kind::pivot_root:
      rc = static_cast<int>(::syscall(SYS_pivot_root, ".", "."));
      break;
    case Kind::detach:
      rc = ::umount2(op.target.c_str(), MNT_DETACH);
      break;
    case Kind::pass_work_dir: {
      // The fd keeps /work's tmpfs alive for the launcher after the sandbox's mounts are gone.
      const int fd = ::open(op.target.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        rc = -1;
        break;
      }
      const bool sent = send_fd(plan.control_write, fd, kWorkDirTag);
      const int saved = errno;
      ::close(fd);
      errno = saved;
      rc = sent ? 0 : -1;
      break;
    }
  }
  if (rc == 0) return true;
  if (op.optional && errno == ENOENT) return true;
  report_error(plan, op.stage, errno, op.target.c_str());
  return false;
}

std::string flag_names(unsigned long flags) {
  static constexpr std::pair<unsigned long, const char*> kNames[] = {
      {MS_RDONLY, "ro"},     {MS_NOSUID, "nosuid"},   {MS_NODEV, "nodev"}, {MS_NOEXEC, "noexec"},
      {MS_REMOUNT, "remount"}, {MS_BIND, "bind"},     {MS_REC, "rec"},     {MS_PRIVATE, "private"},
      {MS_NOATIME, "noatime"}, {MS_NODIRATIME, "nodiratime"}, {MS_RELATIME, "relatime"}};
  std::string out;
  for (const auto& [bit, name] : kNames)
    if (flags & bit) {
      out += (out.empty() ? "" : ",") + std::string(name);
      flags &= ~bit;
    }
  if (flags) out += (out.empty() ? "" : ",") + std::to_string(flags);
  return out;
}

}  // namespace

std::vector<MountOp> plan_mounts(const MountInputs& in) { return Planner(in).build(); }

std::string run_tmpfs_options(size_t run_bytes) { return "size=" + std::to_string(run_bytes) + ",mode=0755"; }

std::string describe(const MountOp& op) {
  auto mode = [](mode_t m) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m));
    return std::string(buf);
  };
  std::string s;
  switch (op.kind) {
    case Kind::mount:
      s = "mount " + (op.source.empty() ? std::string("-") : op.source) + " " + op.target + " [" +
          (op.fstype.empty() ? std::string("-") : op.fstype) + " " + flag_names(op.flags) + "]" +
          (op.data.empty() ? "" : " " + op.data);
      break;
    case Kind::attach: s = "attach fd " + std::to_string(op.fd) + " " + op.target; break;
    case Kind::mkdir: s = "mkdir " + op.target + " " + mode(op.mode); break;
    case Kind::create_file: s = "create " + op.target + " " + mode(op.mode); break;
    case Kind::write_file:
      s = "write " + op.target + " " + mode(op.mode) + " " + std::to_string(op.bytes ? op.size : op.data.size()) + " bytes";
      break;
    case Kind::symlink: s = "symlink " + op.target + " -> " + op.source; break;
    case Kind::chdir: s = "chdir " + op.target; break;
    case Kind::pivot_root: s = "pivot_root"; break;
    case Kind::detach: s = "detach " + op.target; break;
    case Kind::pass_work_dir: s = "pass " + op.target; break;
  }
  if (op.to_user) s += " (user)";
  if (op.optional) s += " (if present)";
  return s;
}

bool run_mount_plan(const ChildPlan& plan) noexcept {
  for (const MountOp& op : plan.mounts)
    if (!run_op(plan, op)) return false;
  return true;
}

}  // namespace sandboxrun::launch
