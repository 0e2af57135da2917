// JSON forms of a run's typed values, shared by the `--json` result and the audit records.
#pragma once

#include <nlohmann/json.hpp>

#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/id_slots.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun::core {

nlohmann::json limits_to_json(const SandboxSpec& spec);
nlohmann::json resources_to_json(const CgroupUsage& u);
nlohmann::json id_slot_to_json(const IdSlotInfo& slot);

}  // namespace sandboxrun::core
