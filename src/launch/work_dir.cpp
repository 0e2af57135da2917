// Child side: the run's /work, a size-limited tmpfs holding the --input files (and the script,
// written on the release: release.cpp).
// The bytes were read on the host before clone(); here they are only written (raw syscalls over
// the parent's prepared list, no allocation). With --output, pid 1 passes the launcher an fd of
// this tmpfs: the fd keeps the mount alive after the sandbox's mount namespace is gone.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "child_plan.hpp"
#include "fd_passing.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

bool write_new_file(const ChildPlan& plan, int dirfd, const char* name, const char* data, size_t size, mode_t mode,
                    bool to_user) noexcept {
  const int fd = ::openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    report_error(plan, "create file", errno, name);
    return false;
  }
  bool ok = write_all(fd, data, size);
  if (ok && to_user) ok = ::fchown(fd, plan.uid, plan.gid) == 0;
  if (ok) ok = ::fchmod(fd, mode) == 0;  // exact mode, whatever the umask
  const int saved = errno;
  ::close(fd);
  if (!ok) report_error(plan, "write file", saved, name);
  return ok;
}

bool setup_work(const ChildPlan& plan) {
  if (::mount("tmpfs", plan.work_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, plan.work_opts.c_str()) != 0) {
    report_error(plan, "mount tmpfs", errno, plan.work_dir.c_str());
    return false;
  }
  for (const auto& d : plan.work_subdirs) {
    if (::mkdir(d.c_str(), 0755) != 0 || ::chown(d.c_str(), plan.uid, plan.gid) != 0) {
      report_error(plan, "mkdir in /work", errno, d.c_str());
      return false;
    }
  }
  // Inputs belong to the program: it may change them.
  for (const auto& f : plan.work_files)
    if (!write_new_file(plan, AT_FDCWD, f.path.c_str(), f.data, f.size, f.mode, true)) return false;
  if (!plan.pass_work_dir) return true;
  int fd = ::open(plan.work_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    report_error(plan, "open /work", errno, plan.work_dir.c_str());
    return false;
  }
  bool ok = send_fd(plan.control_write, fd, kWorkDirTag);
  int saved = errno;
  ::close(fd);
  if (!ok) report_error(plan, "pass /work to the launcher", saved, "control socket");
  return ok;
}

}  // namespace sandboxrun::launch
