// The launcher's side of id slots (the public claim is in sandboxrun/id_slots.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "sandboxrun/fd.hpp"
#include "sandboxrun/id_slots.hpp"

namespace sandboxrun::launch {

struct ChildPlan;

// Parent, before releasing the child: inside 0 and the sandbox user onto the slot's two ids,
// through the map files opened at the clone (CloneResult), else opened here.
void write_slot_id_maps(pid_t pid, const IdSlotInfo& slot, uid_t inside_uid, gid_t inside_gid,
                        const UniqueFd& uid_map, const UniqueFd& gid_map);
// Whether the ids [lo, hi) are all inside ones of an id map's text (/proc/self/uid_map).
bool ids_mapped(std::string_view map, uint64_t lo, uint64_t hi);
// Child, right after release (raw syscalls only): become the namespace's root. No-op without a slot.
bool enter_id_slot(const ChildPlan& plan);

}  // namespace sandboxrun::launch
