// sandbox.yaml's sessions.max and max_per_caller, checked where sessions are counted: an
// Executor's own (Session slots) and a sessions directory's holders (`session start`).
#pragma once

#include <cstddef>
#include <string>

#include "sandboxrun/config.hpp"

namespace sandboxrun {

// Throws Error (kind limits) naming the key, its file and the count when one more session —
// for `caller` ("" for none) — would pass a limit; `close_hint` says how to free one.
void check_session_limits(const SandboxConfig& cfg, size_t open, size_t open_for_caller, const std::string& caller,
                          const std::string& close_hint);

}  // namespace sandboxrun
