// Everything the sandbox's pid 1 needs, prepared by the parent before clone(). Code in the child
// reads only this plan: no config parsing, no logging, no exceptions.
#pragma once

#include <linux/filter.h>
#include <sys/capability.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "etc_files.hpp"

namespace sandboxrun::launch {

// Sent by the child over the error pipe when a setup step fails.
struct ChildError {
  char stage[48];
  int err;
  char detail[200];
};

struct ChildPlan {
  // Host-side paths (before pivot_root).
  std::string rootfs;
  std::string proc_dir, dev_dir, tmp_dir, run_dir, sandbox_dir, script_path;
  std::vector<std::string> dev_node_host;    // "/dev/null", ...
  std::vector<std::string> dev_node_target;  // "<rootfs>/dev/null", ...
  std::string dev_pts, dev_shm;
  std::string dev_tmpfs_opts, tmp_opts, shm_opts, run_opts;
  const std::string* script = nullptr;       // bytes to copy into script_path
  std::vector<std::string> bind_source, bind_target;  // RunBinds: host dir -> <rootfs>/run/NAME
  std::vector<unsigned long> bind_flags;               // MS_* flags of each bind's remount
  EtcPlan etc;                               // /etc/hosts, /etc/hostname, /etc/resolv.conf

  // Paths after pivot_root.
  std::vector<std::string> proc_readonly;    // /proc/sys, /proc/sysrq-trigger, ...
  std::vector<std::string> proc_masked_files;
  std::vector<std::string> proc_masked_dirs;
  std::string workdir;

  std::string hostname;
  uid_t uid = 1000;
  gid_t gid = 1000;
  bool user_namespace = false;
  bool proxy_socket = false;
  unsigned long root_remount_flags = 0;  // MS_* flags for the read-only remount of the root

  // fds (already open in the parent; inherited by the fork-like clone).
  int sync_read = -1;    // parent writes one byte once ids and cgroup are in place
  int error_write = -1;  // ChildError; O_CLOEXEC so a successful execve closes it
  int status_write = -1; // pid 1 writes the payload's wait status here
  int control_write = -1;// unix socket to pass the proxy listening socket to the parent
  int stdin_fd = -1, stdout_write = -1, stderr_write = -1;

  cap_t empty_caps = nullptr;  // prepared with cap_init(): all five sets cleared
  sock_fprog seccomp{};
  std::vector<char*> argv;     // null-terminated
  std::vector<char*> envp;     // null-terminated
  std::vector<std::string> argv_storage, envp_storage;
  char* wipe_begin = nullptr;
  char* wipe_end = nullptr;
};

// Child-side steps; each returns true or reports through the error pipe and returns false.
[[noreturn]] void child_main(const ChildPlan& plan);
bool setup_mounts(const ChildPlan& plan);
bool setup_network(const ChildPlan& plan);
bool drop_privileges(const ChildPlan& plan);
void report_error(const ChildPlan& plan, const char* stage, int err, const char* detail) noexcept;

}  // namespace sandboxrun::launch
