#pragma once

#include <sys/types.h>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

struct CloneResult {
  pid_t pid = -1;  // 0 in the child
  UniqueFd pidfd;  // parent only; may be empty on old kernels
  // With an owner_uid: the child's uid_map and gid_map, opened as the namespace's owner (empty
  // when that failed: write_slot_id_maps then opens them itself and says why it cannot).
  UniqueFd uid_map, gid_map;
};

unsigned long namespace_flags();
// Fork-like clone into new namespaces (and straight into the cgroup when cgroup_fd >= 0).
// With owner_uid >= 0 (a root launcher's id slot), the calling thread takes that uid and gid as
// its effective ids for the clone alone, so that the new user namespace belongs to it: the
// kernel charges per-user counts made inside (ucounts: inotify instances, fanotify groups, user
// namespaces, RLIMIT_NPROC and RLIMIT_MSGQUEUE) at the host level to the namespace's owner, and
// an owner per slot keeps sandboxes from sharing one budget with each other and with root.
// With netns_fd >= 0 (a namespace from NetnsPool), the child starts in that network namespace
// instead of a new one: the calling thread enters it for the clone alone.
// The kernel lets a map be written only by an opener with CAP_SYS_ADMIN over the new namespace:
// the owner has it there, where a launcher without CAP_SYS_ADMIN on the host (root in a
// container with its default capabilities) would not; so the maps are opened before the switch
// back (CloneResult::uid_map). Throws Error with what the host restricts.
CloneResult clone_sandbox(unsigned long flags, int cgroup_fd, long owner_uid = -1, int netns_fd = -1);
// Maps one id each: the sandbox's uid/gid to the caller's (unprivileged launcher).
void write_id_maps(pid_t pid, uid_t inside_uid, gid_t inside_gid, uid_t outside_uid, gid_t outside_gid);

}  // namespace sandboxrun::launch
