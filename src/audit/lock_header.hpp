// The header line of <log>.lock (docs/audit.md, "Lock file"): the file the writers last found at
// the log path, and a generation that changes whenever a writer rotates, re-creates or finds
// replaced the file at the path. A lock file without it (empty: written before the header
// existed, or damaged) just makes the next writer look at the path and write it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sandboxrun::audit {

struct LockHeader {
  uint64_t gen = 0, dev = 0, ino = 0;
};
inline constexpr std::string_view kLockMagic = "sandboxrun-audit-lock 1 gen=";
inline constexpr size_t kLockHeaderLen = kLockMagic.size() + 16 + 5 + 16 + 5 + 16 + 1;
using LockBytes = std::array<char, kLockHeaderLen>;

LockBytes format_header(const LockHeader& h);
// False when `b` is not exactly a header.
bool parse_header(std::string_view b, LockHeader& h);
// A fresh generation's start: random, so that a lock file that was emptied and written again
// does not come back to a value some writer still remembers.
uint64_t random_generation();

}  // namespace sandboxrun::audit
