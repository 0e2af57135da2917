// SHA-256 of an in-memory byte string, for digests of configs, code, caches and manifests, and
// of an open file (streamed, OpenSSL). Image blobs and the audit chain's HMAC use OpenSSL directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sandboxrun {

// The 32 raw bytes of the digest.
std::string sha256_raw(std::string_view data);
// The digest as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

// The digest of what is left to read from `fd`, as hex; `shown` names the file in errors;
// `bytes`, when given, grows by the bytes read.
std::string sha256_fd_hex(int fd, const std::string& shown, uint64_t* bytes = nullptr);

namespace detail {
// sha256_raw without the CPU's SHA instructions, so tests can check both paths on one machine.
std::string sha256_raw_portable(std::string_view data);
}  // namespace detail

}  // namespace sandboxrun
