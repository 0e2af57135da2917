#include "mcp/message.hpp"

namespace sandboxrun::mcp {

namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;

bool valid_id(const json& id) { return id.is_string() || id.is_number_integer(); }

}  // namespace

Message parse_message(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes)
    return Invalid{nullptr, code::invalid_request,
                   "message of " + std::to_string(text.size()) + " bytes, over the limit of " + std::to_string(max_bytes)};
  bool too_deep = false;
  json j = json::parse(
      text,
      [&too_deep](int depth, json::parse_event_t, json&) {
        if (depth > kMaxDepth) too_deep = true;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep) return Invalid{nullptr, code::parse_error, "nesting deeper than " + std::to_string(kMaxDepth)};
  if (j.is_discarded()) return Invalid{nullptr, code::parse_error, "not JSON (or not UTF-8)"};
  if (j.is_array()) return Invalid{nullptr, code::invalid_request, "batches are not supported (MCP 2025-06-18 and later)"};
  if (!j.is_object()) return Invalid{nullptr, code::invalid_request, "a message is a JSON object"};
  Id id = nullptr;
  if (const auto it = j.find("id"); it != j.end()) {
    if (!valid_id(*it)) return Invalid{nullptr, code::invalid_request, "'id' must be a string or an integer"};
    id = *it;
  }
  if (text_field(j, "jsonrpc") != "2.0") return Invalid{id, code::invalid_request, "'jsonrpc' must be \"2.0\""};
  const auto method = j.find("method");
  if (method == j.end()) {
    const auto result = j.find("result");
    const auto error = j.find("error");
    if (id.is_null() || (result == j.end()) == (error == j.end()))
      return Invalid{id, code::invalid_request, "neither a request, a notification nor a response"};
    Response r{id, std::nullopt, std::nullopt};
    if (result != j.end()) r.result = *result;
    else if (error->is_object()) r.error = *error;
    else return Invalid{id, code::invalid_request, "'error' must be an object"};
    return r;
  }
  if (!method->is_string() || method->get_ref<const std::string&>().empty() ||
      method->get_ref<const std::string&>().size() > 256)
    return Invalid{id, code::invalid_request, "'method' must be a string of 1 to 256 bytes"};
  json params = json::object();
  if (const auto p = j.find("params"); p != j.end()) {
    if (!p->is_object()) return Invalid{id, code::invalid_params, "'params' must be an object"};
    params = *p;
  }
  if (j.contains("id")) return Request{id, method->get<std::string>(), std::move(params)};
  return Notification{method->get<std::string>(), std::move(params)};
}

std::string text_field(const json& obj, const char* key, std::string fallback) {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

json object_field(const json& obj, const char* key) {
  if (!obj.is_object()) return json::object();
  const auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : json::object();
}

json result_message(const Id& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json error_message(const Id& id, int code, const std::string& message, const json& data) {
  json e = {{"code", code}, {"message", message}};
  if (!data.is_null()) e["data"] = data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(e)}};
}

json notification_message(const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

json request_message(const Id& id, const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

std::string serialize(const json& message) { return message.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace sandboxrun::mcp
