#pragma once

#include <sys/types.h>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

struct CloneResult {
  pid_t pid = -1;  // 0 in the child
  UniqueFd pidfd;  // parent only; may be empty on old kernels
  bool clone_into_cgroup = false;
};

unsigned long namespace_flags();
// Fork-like clone into new namespaces (and straight into the cgroup when cgroup_fd >= 0).
// Throws Error with what the host restricts.
CloneResult clone_sandbox(unsigned long flags, int cgroup_fd);
// Maps one id each: the sandbox's uid/gid to the caller's (unprivileged launcher).
void write_id_maps(pid_t pid, uid_t inside_uid, gid_t inside_gid, uid_t outside_uid, gid_t outside_gid);

}  // namespace sandboxrun::launch
