// Child side: builds the sandbox's filesystem view and pivots into it (bubblewrap's order).
//   1. make every mount private, so nothing propagates back to the host
//   2. bind the image rootfs onto itself (non-recursive: no host submounts come along)
//   3. fresh /proc (pid namespace), minimal /dev, tmpfs /tmp, /run, tmpfs /work with the inputs
//      (work_dir.cpp); the script is copied into /work and /run/sandbox on the release
//      /etc/hosts, /etc/hostname and /etc/resolv.conf of this run bound read-only (etc_files.cpp)
//   4. remount the root read-only, nosuid, nodev
//   5. pivot_root and detach the old root
//   6. mask and write-protect the dangerous parts of /proc
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "child_plan.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

namespace {

bool fail(const ChildPlan& plan, const char* stage, const std::string& path) {
  report_error(plan, stage, errno, path.c_str());
  return false;
}

bool mount_tmpfs(const ChildPlan& plan, const std::string& target, unsigned long flags, const std::string& opts) {
  if (::mount("tmpfs", target.c_str(), "tmpfs", flags, opts.c_str()) != 0) return fail(plan, "mount tmpfs", target);
  return true;
}

// Binds a host path onto target, then applies flags in a second (remount) step, as the kernel
// ignores most flags on the initial bind.
bool bind(const ChildPlan& plan, const std::string& src, const std::string& target, unsigned long flags) {
  if (::mount(src.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) return fail(plan, "bind mount", target);
  if (::mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | flags, nullptr) != 0)
    return fail(plan, "remount bind", target);
  return true;
}

bool setup_dev(const ChildPlan& plan) {
  if (!mount_tmpfs(plan, plan.dev_dir, MS_NOSUID | MS_NOEXEC, plan.dev_tmpfs_opts)) return false;
  for (size_t i = 0; i < plan.dev_node_target.size(); ++i) {
    int fd = ::open(plan.dev_node_target[i].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) return fail(plan, "create device node", plan.dev_node_target[i]);
    ::close(fd);
    if (!bind(plan, plan.dev_node_host[i], plan.dev_node_target[i], MS_NOSUID | MS_NOEXEC)) return false;
  }
  static const char* links[][2] = {{"/proc/self/fd", "fd"},      {"/proc/self/fd/0", "stdin"},
                                   {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
                                   {"pts/ptmx", "ptmx"}};
  int devfd = ::open(plan.dev_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (devfd < 0) return fail(plan, "open /dev", plan.dev_dir);
  UniqueFd dev(devfd);
  for (const auto& l : links) {
    if (::symlinkat(l[0], dev.get(), l[1]) != 0) return fail(plan, "symlink in /dev", l[1]);
  }
  if (::mkdirat(dev.get(), "pts", 0755) != 0 || ::mkdirat(dev.get(), "shm", 01777) != 0)
    return fail(plan, "mkdir in /dev", plan.dev_dir);
  // A private devpts instance: ptys work, the host's terminals stay invisible.
  if (::mount("devpts", plan.dev_pts.c_str(), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") != 0)
    return fail(plan, "mount devpts", plan.dev_pts);
  if (!mount_tmpfs(plan, plan.dev_shm, MS_NOSUID | MS_NODEV | MS_NOEXEC, plan.shm_opts)) return false;
  if (::mount(nullptr, plan.dev_dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
              plan.dev_tmpfs_opts.c_str()) != 0)
    return fail(plan, "remount /dev read-only", plan.dev_dir);
  return true;
}

// /run: this run's /etc files and binds; the script comes with the release (place_script in
// release.cpp), which then makes /run read-only.
bool setup_run(const ChildPlan& plan) {
  if (!mount_tmpfs(plan, plan.run_dir, MS_NOSUID | MS_NODEV | MS_NOEXEC, plan.run_opts)) return false;
  if (::mkdir(plan.sandbox_dir.c_str(), 0755) != 0) return fail(plan, "mkdir", plan.sandbox_dir);
  if (!write_etc_files(plan)) return false;
  for (size_t i = 0; i < plan.bind_target.size(); ++i) {
    if (::mkdir(plan.bind_target[i].c_str(), 0755) != 0) return fail(plan, "mkdir", plan.bind_target[i]);
    if (::move_mount(plan.bind_trees[i].get(), "", AT_FDCWD, plan.bind_target[i].c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
      return fail(plan, "attach bind mount", plan.bind_target[i]);
  }
  return true;
}

bool protect_proc(const ChildPlan& plan) {
  for (const auto& p : plan.proc_readonly) {
    if (::mount(p.c_str(), p.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      if (errno == ENOENT) continue;
      return fail(plan, "bind /proc path", p);
    }
    if (::mount(nullptr, p.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                nullptr) != 0)
      return fail(plan, "make /proc path read-only", p);
  }
  for (const auto& p : plan.proc_masked_files) {
    if (::mount("/dev/null", p.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      if (errno == ENOENT) continue;
      return fail(plan, "mask /proc file", p);
    }
  }
  for (const auto& p : plan.proc_masked_dirs) {
    if (::mount("tmpfs", p.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555") != 0) {
      if (errno == ENOENT) continue;
      return fail(plan, "mask /proc directory", p);
    }
  }
  return true;
}

}  // namespace

bool setup_mounts(const ChildPlan& plan) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return fail(plan, "make mounts private", "/");
  if (plan.root_tree) {
    if (::mount("tmpfs", kAttachedRootBase, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=4,mode=0700") != 0)
      return fail(plan, "mount a tmpfs to attach the image below", kAttachedRootBase);
    if (::mkdir(kAttachedRoot, 0700) != 0) return fail(plan, "mkdir", kAttachedRoot);
    if (::move_mount(plan.root_tree.get(), "", AT_FDCWD, kAttachedRoot, MOVE_MOUNT_F_EMPTY_PATH) != 0)
      return fail(plan, "attach the image", kAttachedRoot);
  } else if (::mount(plan.rootfs.c_str(), plan.rootfs.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return fail(plan, "bind rootfs", plan.rootfs);
  }
  if (::mount("proc", plan.proc_dir.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return fail(plan, "mount proc", plan.proc_dir);
  if (!setup_dev(plan)) return false;
  if (!mount_tmpfs(plan, plan.tmp_dir, MS_NOSUID | MS_NODEV, plan.tmp_opts)) return false;
  if (!setup_run(plan)) return false;
  if (plan.test_bind_tree &&
      ::move_mount(plan.test_bind_tree.get(), "", AT_FDCWD, plan.test_bind_target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    return fail(plan, "attach the test bind", plan.test_bind_target);
  if (!setup_work(plan)) return false;
  if (!mount_etc_files(plan)) return false;
  if (::mount(nullptr, plan.rootfs.c_str(), nullptr, MS_BIND | MS_REMOUNT | plan.root_remount_flags, nullptr) != 0)
    return fail(plan, "remount rootfs read-only", plan.rootfs);

  if (::chdir(plan.rootfs.c_str()) != 0) return fail(plan, "chdir", plan.rootfs);
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return fail(plan, "pivot_root", plan.rootfs);
  // The old root is stacked under the new one at "."; detach it so no host path stays reachable.
  if (::umount2(".", MNT_DETACH) != 0) return fail(plan, "detach old root", "/");
  if (::chdir("/") != 0) return fail(plan, "chdir", "/");
  return protect_proc(plan);
}

}  // namespace sandboxrun::launch
