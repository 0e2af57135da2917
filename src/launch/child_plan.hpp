// Everything the sandbox's pid 1 needs, prepared by the parent before clone(). Code in the child
// reads only this plan: no config parsing, no logging, no exceptions.
#pragma once

#include <linux/filter.h>
#include <sys/capability.h>
#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sandboxrun/fd.hpp"

#include "etc_files.hpp"
#include "landlock.hpp"
#include "mount_plan.hpp"

namespace sandboxrun::launch {

// Where pid 1 attaches a root launcher's clone of the image: below a private tmpfs on /tmp (any
// process can search /tmp; the tmpfs and the host's /tmp go with the old root at pivot_root).
inline constexpr const char* kAttachedRootBase = "/tmp";
inline constexpr const char* kAttachedRoot = "/tmp/sandboxrun-root";

// One report of pid 1's over the error pipe (one write, under PIPE_BUF): a failed setup step
// (fatal: pid 1 exits next), or a degradation (the run goes on without something, said in
// RunOutcome::degradations); EOF at the payload's execve.
struct ChildError {
  char stage[48];
  int err;
  char detail[200];
  int degraded;  // 0: the step failed; 1: a degradation, and more reports may follow
};

// Payload bytes of the control socket's messages, telling which fd a message carries.
constexpr char kProxySocketTag = 'P';
constexpr char kWorkDirTag = 'W';

struct ChildPlan {
  // Host-side paths (before pivot_root).
  std::string rootfs;
  // As root: a detached, non-recursive clone of the image (open_tree), attached by pid 1 at
  // `rootfs` below a private tmpfs on /tmp. pid 1 runs as an id slot's host uid, which cannot
  // search the host path of the image (a checkout in /root is 0700); the launcher can.
  UniqueFd root_tree;
  // RunBinds: host dir -> <rootfs>/run/NAME. The parent clones each source into a detached mount
  // (open_tree) with its flags already set, and pid 1 attaches it (move_mount): pid 1's ids in its
  // user namespace have no search permission on the host directories above the source (the
  // dependency cache is 0700), and a path opened before the clone is in another mount namespace.
  std::vector<UniqueFd> bind_trees;
  EtcPlan etc;                               // /etc/hosts, /etc/hostname, /etc/resolv.conf, ...
  std::string run_opts;                      // /run's tmpfs options (remounted read-only on release)
  bool pass_work_dir = false;                // send an fd of /work over control_write (--output)
  // Everything pid 1 does to the filesystem, in order (mount_plan.hpp).
  std::vector<MountOp> mounts;

  // Paths after pivot_root.
  std::string workdir;

  std::string hostname;
  uid_t uid = 1000;
  gid_t gid = 1000;
  bool id_slot = false;  // root launcher: ids map onto a slot, setgroups stays allowed
  // RLIMIT_NPROC of the sandbox user where the cgroup does not bound its processes (an
  // enclosing cgroup whose pids.max is the pod's, hidden by its cgroup namespace); 0: none.
  uint64_t max_processes = 0;
  bool proxy_socket = false;
  bool netns_prepared = false;  // cloned into a pooled namespace (NetnsPool): lo is up already
  LandlockPlan landlock;
  // SandboxSpec::test_extra_writable_bind: a writable clone of a host directory for /mnt.
  UniqueFd test_bind_tree;

  // fds (already open in the parent; inherited by the fork-like clone).
  int go_event = -1;     // eventfd the parent writes once ids and cgroup are in place
  int sync_read = -1;    // socket: the release (release.hpp), then kStartPayload; EOF if the parent died
  int error_write = -1;  // ChildError; O_CLOEXEC so a successful execve closes it
  int status_write = -1; // pid 1 writes the payload's wait status here
  int control_write = -1;// unix socket to pass fds (proxy listening socket, /work) to the parent
  int notify_write = -1; // unix socket to pass the seccomp listener to the parent; -1: no notify
  int stdin_fd = -1, stdout_write = -1, stderr_write = -1;

  cap_t empty_caps = nullptr;  // prepared with cap_init(): all five sets cleared
  sock_fprog seccomp{};
  // The largest script a release may carry: /run's tmpfs is sized for it (release.hpp).
  size_t max_script = 0;
  // The stack the payload runs on from its clone by pid 1 until its execve (it shares pid 1's
  // memory until then): prepared here, so that pid 1's own stack size does not matter.
  std::unique_ptr<char[]> payload_stack;
  size_t payload_stack_size = 0;
  char* wipe_begin = nullptr;
  char* wipe_end = nullptr;
};

// Child-side steps; each returns true or reports through the error pipe and returns false.
[[noreturn]] void child_main(const ChildPlan& plan);
bool setup_network(const ChildPlan& plan);
// Sets `lo` of the caller's network namespace up: 0, or the errno. No allocation (pid 1 uses it).
int bring_up_loopback() noexcept;
// Creates `name` in `dirfd` (never through a symlink, never over a file) with these bytes and
// exactly `mode`: the sandbox user's when `to_user`, else root's. No allocation (pid 1 uses it).
bool write_new_file(const ChildPlan& plan, int dirfd, const char* name, const char* data, size_t size, mode_t mode,
                    bool to_user) noexcept;
bool drop_privileges(const ChildPlan& plan);
void report_error(const ChildPlan& plan, const char* stage, int err, const char* detail) noexcept;
// What the run goes without (`what`, with the errno that took it away); not fatal.
void report_degradation(const ChildPlan& plan, const char* what, int err) noexcept;

}  // namespace sandboxrun::launch
