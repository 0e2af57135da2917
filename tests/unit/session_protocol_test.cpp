// The host's parser of the session driver's replies: what driver.py sends is read back exactly,
// and anything else a rewritten driver could send is refused, whole.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sandboxrun/error.hpp"
#include "session/protocol.hpp"

using namespace sandboxrun;
using namespace sandboxrun::session;
using nlohmann::json;

namespace {

json good() {
  return {{"id", 7},
          {"status", "error"},
          {"stdout", "a\n"},
          {"stderr", ""},
          {"stdout_truncated", false},
          {"stderr_truncated", true},
          {"result", nullptr},
          {"display", json::array({{{"text/plain", "<Figure>"}, {"image/png", "iVBORw0KGgo="}}})},
          {"error", {{"ename", "ZeroDivisionError"}, {"evalue", "division by zero"},
                     {"traceback", {"Traceback (most recent call last):\n", "  File \"<cell 7>\", line 2\n"}}}}};
}

std::string refused(const json& j, uint64_t id = 7, ReplyLimits limits = {}) {
  try {
    parse_reply(j.dump(), id, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::host);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SessionProtocol, ReadsWhatTheDriverSends) {
  const CellOutput out = parse_reply(good().dump(), 7, {});
  EXPECT_EQ(out.status, "error");
  EXPECT_EQ(out.stdout_data, "a\n");
  EXPECT_TRUE(out.stderr_truncated);
  EXPECT_FALSE(out.result);
  ASSERT_EQ(out.display.size(), 1u);
  EXPECT_EQ(out.display[0].at("image/png"), "iVBORw0KGgo=");
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->ename, "ZeroDivisionError");
  EXPECT_EQ(out.error->traceback.size(), 2u);
  // The record's JSON is the reply's shape, less the cell id.
  json expected = good();
  expected.erase("id");
  EXPECT_EQ(json(out), expected);
}

TEST(SessionProtocol, RefusesWhatTheDriverNeverSends) {
  auto with = [](const char* key, json v) {
    json j = good();
    j[key] = std::move(v);
    return j;
  };
  EXPECT_NE(refused(good(), 8), "") << "a reply to another cell";
  EXPECT_NE(refused(with("id", -7)), "");
  EXPECT_NE(refused(with("extra", 1)), "") << "an unknown key";
  json missing = good();
  missing.erase("stderr");
  EXPECT_NE(refused(missing), "");
  EXPECT_NE(refused(with("status", "ok")), "") << "an error with status ok";
  EXPECT_NE(refused(with("error", nullptr)), "") << "status error without one";
  EXPECT_NE(refused(with("stdout", 5)), "");
  EXPECT_NE(refused(with("stdout_truncated", "no")), "");
  EXPECT_NE(refused(with("display", json::array({{{"Text/Plain", "x"}}}))), "") << "not a MIME type";
  EXPECT_NE(refused(with("display", json::array({{{"image/png", "iVBORw=="}}}))).find("no text/plain"), std::string::npos);
  EXPECT_NE(refused(with("display", json::array({{{"text/plain", "x"}, {"image/png", "not base64!"}}}))), "");
  EXPECT_NE(refused(with("display", json::array({{{"text/plain", json::array({"x"})}}}))), "");
  EXPECT_NE(refused(with("result", "2")), "") << "a result that is no bundle";
  json tb = good();
  tb["error"]["traceback"] = json::array({1});
  EXPECT_NE(refused(tb), "");
  tb["error"]["frames"] = 1;
  EXPECT_NE(refused(tb), "");
}

TEST(SessionProtocol, BoundsEveryPartByTheSessionsLimits) {
  ReplyLimits small{.output_bytes = 10, .display_bytes = 20, .display_items = 2};
  json j = good();
  j["stdout"] = std::string(10 + 4096 + 1, 'x');
  EXPECT_NE(refused(j, 7, small).find("over"), std::string::npos);
  j = good();
  j["display"] = json::array({{{"text/plain", "a"}}, {{"text/plain", "b"}}, {{"text/plain", "c"}}});
  EXPECT_NE(refused(j, 7, small).find("3 display items"), std::string::npos);
  j = good();
  j["display"] = json::array({{{"text/plain", std::string(15, 'a')}}, {{"text/plain", std::string(15, 'b')}}});
  EXPECT_NE(refused(j, 7, small).find("display limit"), std::string::npos);
  j = good();
  j["error"]["traceback"] = json::array();
  for (int i = 0; i < 201; ++i) j["error"]["traceback"].push_back("line\n");
  EXPECT_NE(refused(j), "");
}

TEST(SessionProtocol, RefusesDeepNestingAndBytesThatAreNotUtf8) {
  std::string deep = R"({"id": 7, "status": "ok", "stdout": )";
  for (int i = 0; i < 100000; ++i) deep += "[";
  try {
    parse_reply(deep, 7, {});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nesting"), std::string::npos) << e.what();
  }
  std::string bad_utf8 = good().dump();
  bad_utf8.replace(bad_utf8.find("a\\n"), 1, "\xff");
  EXPECT_THROW(parse_reply(bad_utf8, 7, {}), Error);
  EXPECT_THROW(parse_reply("", 7, {}), Error);
  EXPECT_THROW(parse_reply("[]", 7, {}), Error);
}

TEST(SessionProtocol, FramesSplitAnywhereAndOversizedOnesAreRefusedBeforeTheyArrive) {
  const std::string a = encode_run(1, "x = 1\n"), b = encode_run(2, "x\n");
  FrameReader r(1 << 20);
  const std::string both = a + b;
  std::vector<std::string> bodies;
  for (char c : both) {  // one byte at a time
    r.feed(std::string_view(&c, 1));
    while (auto f = r.next()) bodies.push_back(*f);
  }
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(json::parse(bodies[0]), (json{{"op", "run"}, {"id", 1}, {"code", "x = 1\n"}, {"stdin", ""}}));
  EXPECT_EQ(r.buffered(), 0u);
  FrameReader small(16);
  small.feed(std::string("\x00\x00\x00\x11", 4));  // 17 bytes announced
  EXPECT_THROW(small.next(), Error);
}
