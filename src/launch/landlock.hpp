// Landlock, the second wall: even if a mount were left writable by mistake, the sandbox may
// write only where it is meant to. Prepared in the parent, applied by the sandbox's pid 1
// after pivot_root (with raw syscalls only), inherited by the payload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sandboxrun/spec.hpp"

namespace sandboxrun::launch {

struct ChildPlan;

struct LandlockPlan {
  int abi = 0;                    // 0: not applied
  uint64_t handled_fs = 0;        // every filesystem right this ABI knows: denied unless granted
  uint64_t handled_net = 0;
  uint64_t scoped = 0;
  uint64_t read_access = 0;       // granted on the whole image
  uint64_t write_access = 0;      // granted beneath writable_dirs
  uint64_t device_access = 0;     // granted on device_files
  std::vector<std::string> writable_dirs;  // paths after pivot_root; absent ones are skipped
  std::vector<std::string> device_files;
  std::vector<uint16_t> connect_ports;     // TCP ports the sandbox may connect to (when handled)
};

// The highest Landlock ABI of the running kernel; 0 when it has none (or it is disabled).
int landlock_abi() noexcept;

// Fills `plan` for the spec. Throws Error (exit 125) when spec.landlock is required and the
// kernel has no Landlock.
void prepare_landlock(const SandboxSpec& spec, LandlockPlan& plan);

// Child side, after pivot_root: builds the ruleset and restricts the calling process. Returns
// false after reporting through the error pipe.
bool apply_landlock(const ChildPlan& plan);

}  // namespace sandboxrun::launch
