// JSON-RPC messages as `sandboxrun mcp` reads them: the four kinds, ids as given, and the code
// each malformed message is answered with.
#include <gtest/gtest.h>

#include <string>

#include "mcp/message.hpp"

using namespace sandboxrun::mcp;

namespace {

Invalid invalid(const std::string& text, size_t max = 1 << 20) {
  const Message m = parse_message(text, max);
  EXPECT_TRUE(std::holds_alternative<Invalid>(m)) << text;
  return std::holds_alternative<Invalid>(m) ? std::get<Invalid>(m) : Invalid{};
}

TEST(McpMessage, RequestsNotificationsAndResponsesAreToldApart) {
  const Message req = parse_message(R"({"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":"x"}})", 4096);
  ASSERT_TRUE(std::holds_alternative<Request>(req));
  EXPECT_EQ(std::get<Request>(req).id, "a1");
  EXPECT_EQ(std::get<Request>(req).params["name"], "x");
  const Message num = parse_message(R"({"jsonrpc":"2.0","id":7,"method":"ping"})", 4096);
  ASSERT_TRUE(std::holds_alternative<Request>(num));
  EXPECT_EQ(std::get<Request>(num).id, 7);
  EXPECT_TRUE(std::get<Request>(num).params.is_object()) << "absent params read as {}";
  EXPECT_TRUE(std::holds_alternative<Notification>(parse_message(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", 4096)));
  const Message resp = parse_message(R"({"jsonrpc":"2.0","id":"q","result":{"action":"decline"}})", 4096);
  ASSERT_TRUE(std::holds_alternative<Response>(resp));
  EXPECT_EQ((*std::get<Response>(resp).result)["action"], "decline");
  const Message err = parse_message(R"({"jsonrpc":"2.0","id":"q","error":{"code":-1,"message":"no"}})", 4096);
  ASSERT_TRUE(std::holds_alternative<Response>(err));
  EXPECT_FALSE(std::get<Response>(err).result);
}

TEST(McpMessage, MalformedMessagesGetTheirJsonRpcCodes) {
  EXPECT_EQ(invalid("{not json").code, code::parse_error);
  EXPECT_EQ(invalid("\xff\xfe").code, code::parse_error);
  EXPECT_EQ(invalid(std::string(100, '[') + std::string(100, ']')).code, code::parse_error) << "too deep";
  EXPECT_EQ(invalid(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])").code, code::invalid_request) << "a batch";
  EXPECT_EQ(invalid("42").code, code::invalid_request);
  EXPECT_EQ(invalid(R"({"jsonrpc":"1.0","id":1,"method":"ping"})").id, 1) << "the id is kept for the answer";
  EXPECT_EQ(invalid(R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})").code, code::invalid_request);
  EXPECT_EQ(invalid(R"({"jsonrpc":"2.0","id":1,"method":""})").code, code::invalid_request);
  EXPECT_EQ(invalid(R"({"jsonrpc":"2.0","id":1,"method":"x","params":[1]})").code, code::invalid_params);
  EXPECT_EQ(invalid(R"({"jsonrpc":"2.0","id":1})").code, code::invalid_request) << "neither result nor error";
  EXPECT_EQ(invalid(R"({"jsonrpc":"2.0","id":1,"result":1,"error":{}})").code, code::invalid_request);
  EXPECT_EQ(invalid(std::string(5000, ' '), 4096).code, code::invalid_request) << "over the cap";
  // Found by the fuzzer: a field of the wrong type is an invalid request, never an exception.
  EXPECT_EQ(invalid(R"({"jsonrpc": {"t": {"reason": "reviewed"}}})").code, code::invalid_request);
  EXPECT_EQ(invalid(R"({"jsonrpc":2,"id":1,"method":"ping"})").id, 1);
}

TEST(McpMessage, FieldsAreReadWithoutTrustingTheirType) {
  const auto j = nlohmann::json::parse(R"({"s":"x","n":5,"o":{"a":1},"a":[1]})");
  EXPECT_EQ(text_field(j, "s"), "x");
  EXPECT_EQ(text_field(j, "n", "dflt"), "dflt");
  EXPECT_EQ(text_field(j, "missing", "dflt"), "dflt");
  EXPECT_EQ(text_field(nlohmann::json::array(), "s", "dflt"), "dflt");
  EXPECT_EQ(object_field(j, "o")["a"], 1);
  EXPECT_TRUE(object_field(j, "a").empty());
  EXPECT_TRUE(object_field(j, "s").is_object());
  EXPECT_TRUE(object_field(nlohmann::json(3), "o").is_object());
}

TEST(McpMessage, RepliesAreOneLineOfJson) {
  const std::string line = serialize(error_message(nullptr, code::parse_error, "bad\nline \xff"));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto back = nlohmann::json::parse(line);
  EXPECT_TRUE(back["id"].is_null());
  EXPECT_EQ(back["error"]["code"], code::parse_error);
  EXPECT_EQ(serialize(result_message(3, {{"ok", true}})), R"({"id":3,"jsonrpc":"2.0","result":{"ok":true}})");
}

}  // namespace
