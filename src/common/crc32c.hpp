// CRC-32C (Castagnoli, iSCSI/ext4/btrfs) of a byte string: the check on cache entries, which
// the cache directory's ownership rules already protect from other users (cache_io.hpp). It
// only has to catch accidental damage (a short file after a crash, a flipped bit on disk), and
// runs on every start over the ~110 KB of compiled rules: SHA-256 took ~80 us there, the CPU's
// crc32 instruction takes ~15.
#pragma once

#include <cstdint>
#include <string_view>

namespace sandboxrun {

uint32_t crc32c(std::string_view data) noexcept;

namespace detail {
// Without the CPU's crc32 instruction, so tests can check both paths on one machine.
uint32_t crc32c_portable(std::string_view data) noexcept;
}  // namespace detail

}  // namespace sandboxrun
