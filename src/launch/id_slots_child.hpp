// The launcher's side of id slots (the public claim is in sandboxrun/id_slots.hpp).
#pragma once

#include <sys/types.h>

#include "sandboxrun/id_slots.hpp"

namespace sandboxrun::launch {

struct ChildPlan;

// Parent, before releasing the child: inside 0 and the sandbox user onto the slot's two ids.
void write_slot_id_maps(pid_t pid, const IdSlotInfo& slot, uid_t inside_uid, gid_t inside_gid);
// Child, right after release (raw syscalls only): become the namespace's root. No-op without a slot.
bool enter_id_slot(const ChildPlan& plan);

}  // namespace sandboxrun::launch
