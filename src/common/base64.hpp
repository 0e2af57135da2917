// Standard base64 (RFC 4648, with padding) through libcrypto: binary program output in a
// result's JSON, session files and display items.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sandboxrun {

std::string base64_encode(std::string_view data);
// nullopt unless `text` is base64 with padding and nothing else (no whitespace).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace sandboxrun
