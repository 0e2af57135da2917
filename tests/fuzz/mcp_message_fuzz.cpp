// Fuzzes the reader of MCP's JSON-RPC messages (src/mcp/message.cpp): whatever a client sends,
// it is one of the four kinds, and an error reply can always be written for it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mcp/message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sandboxrun::mcp;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const Message m = parse_message(input, 4096);
  if (const auto* r = std::get_if<Request>(&m)) {
    if (!r->params.is_object() || r->method.empty() || !(r->id.is_string() || r->id.is_number_integer()))
      __builtin_trap();
    (void)serialize(error_message(r->id, code::method_not_found, r->method));
  } else if (const auto* bad = std::get_if<Invalid>(&m)) {
    (void)serialize(error_message(bad->id, bad->code, bad->message));
  } else if (const auto* resp = std::get_if<Response>(&m)) {
    if (resp->result.has_value() == resp->error.has_value()) __builtin_trap();
  }
  return 0;
}
