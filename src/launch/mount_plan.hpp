// pid 1's filesystem setup as data (bubblewrap's SetupOp list): the parent turns the run's
// settings into a list of operations with plan_mounts(); pid 1 runs the list in order with
// run_mount_plan(), one system call (or two) an operation, no allocation. The order is
// bubblewrap's:
//   1. every mount private, so nothing propagates back to the host
//   2. the image on itself (non-recursive: no host submounts come along), or, as root, its
//      detached clone attached below a private tmpfs on /tmp
//   3. a fresh /proc, a minimal /dev, tmpfs /tmp, /run (this run's /etc files and binds), /work
//      with the inputs; the script comes later, with the release (release.cpp)
//   4. this run's /etc files bound read-only (etc_files.hpp)
//   5. the root remounted read-only, nosuid, nodev; pivot_root; the old root detached
//   6. the dangerous parts of /proc masked or made read-only
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "etc_files.hpp"
#include "sandboxrun/job_io.hpp"

namespace sandboxrun::launch {

struct ChildPlan;

struct MountOp {
  enum class Kind : uint8_t {
    mount,         // mount(source, target, fstype, flags, data)
    attach,        // move_mount(fd -> target): a detached tree cloned by the parent
    mkdir,         // mkdir(target, mode), then chown to the sandbox user when to_user
    create_file,   // an empty file, the target of a bind
    write_file,    // a new file with these bytes and exactly `mode`
    symlink,       // symlink(source) at target
    chdir,         // chdir(target)
    pivot_root,    // pivot_root(".", "."): the old root stacks under the new one
    detach,        // umount2(target, MNT_DETACH)
    pass_work_dir  // an O_PATH fd of target to the launcher over the control socket (--output)
  };
  Kind kind = Kind::mount;
  const char* stage = "";  // what failed, in the error report ("mount tmpfs", "bind /etc file")
  std::string source{}, target{}, fstype{}, data{};
  unsigned long flags = 0;
  mode_t mode = 0;
  int fd = -1;
  const char* bytes = nullptr;  // write_file: the content (data's when null), owned elsewhere
  size_t size = 0;
  bool to_user = false;   // mkdir, write_file: owned by the sandbox user (the program's)
  bool optional = false;  // a path this kernel may not have: ENOENT skips the operation
};

// What plan_mounts needs, all decided by the parent.
struct MountInputs {
  std::string rootfs{};        // where pid 1 sees the image: its host path, or kAttachedRoot
  int root_tree = -1;          // as root: the detached clone of the image to attach at rootfs
  uid_t uid = 1000;
  gid_t gid = 1000;
  uint64_t tmp_bytes = 0;      // /tmp and /dev/shm
  uint64_t work_bytes = 0;     // /work
  size_t run_bytes = 0;        // /run: the largest script, the /etc files and room to spare
  unsigned long root_remount_flags = 0;
  const EtcPlan* etc = nullptr;
  std::vector<std::pair<std::string, int>> run_binds{};  // name under /run, detached tree
  const std::vector<InputFile>* inputs = nullptr;      // written into /work
  bool pass_work_dir = false;
  int test_bind_tree = -1;     // SandboxSpec::test_extra_writable_bind, attached at /mnt
};

std::vector<MountOp> plan_mounts(const MountInputs& in);
// /run's tmpfs options; release.cpp remounts /run read-only with them once the script is in.
std::string run_tmpfs_options(size_t run_bytes);

// One line for a person or a golden test: "mount tmpfs /r/tmp [tmpfs nosuid,nodev] size=1,mode=1777".
std::string describe(const MountOp& op);

// pid 1: runs plan.mounts in order; false (reported through the error pipe) at the first failure.
bool run_mount_plan(const ChildPlan& plan) noexcept;

}  // namespace sandboxrun::launch
