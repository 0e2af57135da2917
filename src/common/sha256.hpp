// SHA-256 of an in-memory byte string, for digests of configs, code, caches and manifests.
// Streaming and keyed hashes (image blobs, the audit chain's HMAC) use OpenSSL directly.
#pragma once

#include <string>
#include <string_view>

namespace sandboxrun {

// The 32 raw bytes of the digest.
std::string sha256_raw(std::string_view data);
// The digest as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

namespace detail {
// sha256_raw without the CPU's SHA instructions, so tests can check both paths on one machine.
std::string sha256_raw_portable(std::string_view data);
}  // namespace detail

}  // namespace sandboxrun
