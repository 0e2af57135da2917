// Parsing of security.yaml's `override:` section (the policy itself: sandboxrun/override_policy.hpp).
#pragma once

#include <yaml-cpp/yaml.h>

#include "common/yaml_strict.hpp"
#include "sandboxrun/override_policy.hpp"

namespace sandboxrun {

// Strict: unknown keys, a length out of range, a malformed id or a user or group that does not
// exist are errors naming the file, the line and the key.
OverridePolicy parse_override_policy(const StrictYaml& y, const YAML::Node& node);

}  // namespace sandboxrun
