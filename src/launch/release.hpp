// The release: what the launcher sends pid 1 once the run is known. It carries what only the
// run knows: the script's name and bytes, argv and the environment. So pid 1 can be cloned and
// set up before the run is known (a sandbox prepared ahead). The payload starts only on the
// kStartPayload byte that follows once its run_start record is durable. pid 1 reads the release
// into a mapping of its own: raw system calls, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "child_plan.hpp"

namespace sandboxrun::launch {

// The byte after a release that lets pid 1 start the payload: the launcher sends it once
// before_exec returned. pid 1 sets up what the release allows meanwhile.
inline constexpr char kStartPayload = 'X';

// After the byte 'E': sizes of the parts that follow, in this order.
struct ReleaseHeader {
  uint32_t name_len;     // the script's file name in /work and /run/sandbox, no NUL
  uint32_t script_len;   // its bytes
  uint32_t argc, envc;   // strings, each NUL-terminated, argv's then envp's
  uint32_t strings_len;  // their bytes, NULs included
};

// Bounds pid 1 enforces on a release (a corrupt one is refused, never mapped in full).
inline constexpr uint32_t kMaxReleaseStrings = 65536;
inline constexpr uint32_t kMaxReleaseStringBytes = 16u << 20;

// Parent: the release's bytes.
std::string encode_release(std::string_view name, std::string_view script, const std::vector<std::string>& argv,
                           const std::vector<std::string>& envp);

// pid 1's view of a release read into its own mapping.
struct Release {
  const char* name = nullptr;  // NUL-terminated
  const char* script = nullptr;
  size_t script_len = 0;
  char** argv = nullptr;  // null-terminated arrays
  char** envp = nullptr;
};

// pid 1: waits for the release. false: the launcher went away (EOF), or the release was bad or
// too large for plan.max_script (reported on the error pipe).
bool read_release(const ChildPlan& plan, Release& out) noexcept;
// pid 1, still privileged: writes the script to /work and /run/sandbox (root's, read-only), then
// remounts /run read-only.
bool place_script(const ChildPlan& plan, const Release& rel) noexcept;

}  // namespace sandboxrun::launch
