// The frames between a session's holder and its clients (session_holder.hpp): a 4-byte
// big-endian length, then JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace sandboxrun::holder {

// The largest frame either side takes: a put of input_limit's 64 MiB default in base64 fits.
constexpr size_t kMaxFrame = size_t{1} << 30;

// Writes one frame; false when the peer is gone.
bool send_frame(int fd, const nlohmann::json& j);
// Reads one frame: nullopt at EOF before it. Throws Error when it is cut short, too long or not
// JSON.
std::optional<nlohmann::json> recv_frame(int fd);

// The reply that stands for an Error.
nlohmann::json error_reply(const std::exception& e);

}  // namespace sandboxrun::holder
