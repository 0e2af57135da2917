// The dependency phase of a run: find the requirement set in the cache, or install it in a
// separate sandbox whose only network is the package index, then bind it into the run.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "sandboxrun/config.hpp"
#include "deps/deps.hpp"
#include "sandboxrun/seccomp.hpp"
#include "sandboxrun/result_records.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun::core {

// Phase 1's limits: pip resolving and unpacking a scientific stack needs more than an untrusted
// program gets, and is still bounded (documented in docs/deps.md).
inline constexpr double kDepsTimeoutS = 300;
inline constexpr uint64_t kDepsMemoryBytes = 1ull << 30;
inline constexpr uint64_t kDepsTmpBytes = 1ull << 30;
inline constexpr uint64_t kDepsPids = 256;

struct DepsInputs {
  const SandboxConfig& cfg;
  const HostResources& host;
  const SeccompProgram& seccomp;  // the untrusted level's: phase 1 runs downloaded code's installer
  std::string run_id;
  std::string image_digest;
  std::string requirements;        // the request's requirements text (may be empty)
  std::string requirements_origin; // its file name, for errors
  // Appends the `deps` event: the report, and the error when the phase failed.
  std::function<void(const DepsReport&, const std::optional<std::string>& error)> audit;
};

// Held while phase 2 runs: a shared lock that keeps the entry from being evicted under it, and
// the installed set to bind into the run (finalize_spec).
struct DepsHold {
  deps::KeyLock lock;
  std::optional<RunBind> site;
};

// With no requirements (config's and `spec`'s): does nothing and leaves `report` empty.
// Otherwise returns the installed set as DepsHold::site (bound read-only at /run/deps and put on
// PYTHONPATH by finalize_spec) and fills `report` (the result's `deps`); the `deps` audit event is
// appended either way. `spec` is the run's with its image applied (the set is installed for its
// interpreter). Throws Error, with pip's own reason, when the set cannot be installed (nothing is
// cached).
DepsHold provide_deps(const DepsInputs& in, const SandboxSpec& spec, std::optional<DepsReport>& report);

}  // namespace sandboxrun::core
