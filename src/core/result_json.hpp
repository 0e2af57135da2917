// JSON forms of a run's typed values, shared by the `--json` result and the audit records.
#pragma once

#include <nlohmann/json.hpp>

#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/id_slots.hpp"
#include "sandboxrun/launch.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun::core {

nlohmann::json limits_to_json(const SandboxSpec& spec);
nlohmann::json resources_to_json(const CgroupUsage& u);
nlohmann::json id_slot_to_json(const IdSlotInfo& slot);
// `denied` of the result and the audit record: the seccomp denials, the kill, and the proxy's
// refused connections (from the run's `network` object). Null when nothing was denied.
// Refused connections listed in `denied` (and audited one by one); the rest are counted.
inline constexpr size_t kMaxRefusedListed = 100;
nlohmann::json denied_to_json(const DeniedReport& d, const nlohmann::json& network);
// One line for a person at a terminal ("denied: bpf x3, ..."); empty when nothing was denied.
std::string denied_summary(const nlohmann::json& denied);

}  // namespace sandboxrun::core
