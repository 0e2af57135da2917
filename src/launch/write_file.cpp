// Child side: a new file with given bytes, for the --input files in /work (mount_plan.cpp), this
// run's /etc files and the script on its release (release.cpp). The bytes were read on the host
// before clone(); here they are only written (raw system calls, no allocation).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "child_plan.hpp"
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

}  // namespace sandboxrun::launch
