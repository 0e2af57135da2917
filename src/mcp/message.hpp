// JSON-RPC 2.0 messages as MCP carries them (one per line on stdio, one per POST over HTTP):
// parsed strictly and bounded before anything acts on them. Everything here comes from the
// client, which is an agent's host: trusted to speak for its user, never to be well-formed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

namespace sandboxrun::mcp {

// JSON-RPC error codes.
namespace code {
inline constexpr int parse_error = -32700;
inline constexpr int invalid_request = -32600;
inline constexpr int method_not_found = -32601;
inline constexpr int invalid_params = -32602;
inline constexpr int internal_error = -32603;
inline constexpr int request_cancelled = -32800;  // as the MCP SDKs use it
}  // namespace code

// A request id: a string or an integer, kept as the JSON it came as.
using Id = nlohmann::json;

struct Request {
  Id id;
  std::string method;
  nlohmann::json params;  // an object (empty when absent)
};
struct Notification {
  std::string method;
  nlohmann::json params;
};
// A client's answer to a request of ours (elicitation/create).
struct Response {
  Id id;
  std::optional<nlohmann::json> result;
  std::optional<nlohmann::json> error;
};
// Not a message we can act on: `id` when one could be read (null otherwise), the code and why.
struct Invalid {
  Id id;
  int code = code::invalid_request;
  std::string message;
};

using Message = std::variant<Request, Notification, Response, Invalid>;

// Parses one message of at most `max_bytes` (the caller cut longer ones before: their bytes
// were never buffered). Nesting deeper than 64 levels is refused while parsing. Batches (a JSON
// array) are refused: MCP dropped them in 2025-06-18.
Message parse_message(std::string_view text, size_t max_bytes);

nlohmann::json result_message(const Id& id, nlohmann::json result);
nlohmann::json error_message(const Id& id, int code, const std::string& message,
                             const nlohmann::json& data = nullptr);
nlohmann::json notification_message(const std::string& method, nlohmann::json params);
nlohmann::json request_message(const Id& id, const std::string& method, nlohmann::json params);

// A client's field read without trusting its type (nlohmann's value() throws on a mismatch):
// `fallback` when `obj` is not an object, lacks `key`, or holds something else there.
std::string text_field(const nlohmann::json& obj, const char* key, std::string fallback = {});
nlohmann::json object_field(const nlohmann::json& obj, const char* key);  // {} unless an object

// One line of JSON (invalid UTF-8 replaced), without the newline.
std::string serialize(const nlohmann::json& message);

}  // namespace sandboxrun::mcp
