// SHA-256 of a byte string as lower-case hex (OpenSSL EVP), for digests of configs and code.
#pragma once

#include <string>
#include <string_view>

namespace sandboxrun {

// Throws Error if OpenSSL fails (it does not for SHA-256 in practice).
std::string sha256_hex(std::string_view data);

}  // namespace sandboxrun
