// Host ids that belong to no one. As root, every sandbox gets a user namespace whose ids map onto
// one slot of a reserved, unprivileged host id range (IdRanges in sandbox.yaml `id_ranges`):
// inside 0 (the sandbox's pid 1, for its setup) -> the slot's first id, the sandbox user -> the
// next. Each live run holds its own slot, so no two sandboxes share a host uid, and per-user
// kernel accounting (RLIMIT_NPROC, inotify, pipe buffers, mqueues) never mixes runs or reaches a
// host account.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sandboxrun/fd.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun {

struct IdSlotInfo {
  uint32_t slot = 0;
  uid_t host_root = 0;  // host uid and gid of the sandbox's uid/gid 0
  uid_t host_user = 0;  // host uid and gid of the sandbox user
};

// Where the slot locks live: one file per slot, flock'ed by the run that holds it.
const std::filesystem::path& default_slot_dir();

// One claimed slot, held while this object lives. The claim is an flock on the slot's file: the
// kernel drops it when the holder's last descriptor closes, so a launcher killed with SIGKILL
// frees its slot without any cleanup, and no stale claim can outlive its process.
class IdSlot {
 public:
  // Claims a free slot of `ranges`, scanning from a random one. Throws Error when every slot is
  // taken, or when `dir` (or a parent) is a symlink or writable by someone else.
  static IdSlot claim(const IdRanges& ranges, const std::filesystem::path& dir = default_slot_dir());
  const IdSlotInfo& info() const noexcept { return info_; }

 private:
  IdSlot(UniqueFd lock, IdSlotInfo info) : lock_(std::move(lock)), info_(info) {}
  UniqueFd lock_;
  IdSlotInfo info_;
};

// Host accounts (passwd and group entries) whose ids fall inside the range, as "name (uid N)":
// such an account would share ids with sandboxes. Empty when the range belongs to no one.
std::vector<std::string> accounts_in_range(const IdRanges& ranges);
// Throws Error (config, with the fix) when this process cannot use the range: ids its user
// namespace does not map (a user-namespaced pod's), or below 65536 ids an account owns.
void check_id_range(const IdRanges& ranges);

}  // namespace sandboxrun
