#include <gtest/gtest.h>

#include "net/net_parse.hpp"

namespace sandboxrun::net {
namespace {

RequestHead head_of(std::string_view text) {
  auto p = parse_request_head(text);
  EXPECT_EQ(p.status, ParseStatus::complete) << p.error;
  return p.head;
}

TEST(NetHttpHead, ParsesAProxyGet) {
  const std::string text =
      "GET http://pypi.test:8080/simple/?x=1 HTTP/1.1\r\nHost: pypi.test:8080\r\nAccept:  */* \r\n\r\nBODY";
  const auto p = parse_request_head(text);
  ASSERT_EQ(p.status, ParseStatus::complete) << p.error;
  EXPECT_EQ(p.head.method, "GET");
  EXPECT_EQ(p.head.target, "http://pypi.test:8080/simple/?x=1");
  EXPECT_EQ(p.head.version, "HTTP/1.1");
  ASSERT_EQ(p.head.headers.size(), 2u);
  EXPECT_EQ(p.head.headers[1].value, "*/*");
  EXPECT_EQ(p.head.size, text.size() - 4);
  EXPECT_EQ(p.head.values("HOST").size(), 1u);
}

TEST(NetHttpHead, IncompleteUntilTheEmptyLine) {
  EXPECT_EQ(parse_request_head("").status, ParseStatus::incomplete);
  EXPECT_EQ(parse_request_head("GET http://a.test/ HTTP/1.1\r\nHost: a").status, ParseStatus::incomplete);
  EXPECT_EQ(parse_request_head("GET http://a.test/ HTTP/1.1\r\n\r").status, ParseStatus::incomplete);
}

TEST(NetHttpHead, RefusesMalformedHeads) {
  for (const char* bad : {
           "GET  http://a.test/ HTTP/1.1\r\n\r\n",           // double space
           "GET http://a.test/ HTTP/2.0\r\n\r\n",            // version
           "GET http://a.test/ HTTP/1.1 x\r\n\r\n",          // extra field
           "G(T http://a.test/ HTTP/1.1\r\n\r\n",            // method not a token
           "GET http://a.test/\x01 HTTP/1.1\r\n\r\n",        // control in target
           "GET http://a.test/ HTTP/1.1\r\nHost : a\r\n\r\n",  // space before colon
           "GET http://a.test/ HTTP/1.1\r\nNoColon\r\n\r\n",
           "GET http://a.test/ HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
           "GET http://a.test/ HTTP/1.1\r\nA: b\nC: d\r\n\r\n",  // bare LF
           "GET http://a.test/ HTTP/1.1\r\nA: b\rC: d\r\n\r\n",  // bare CR
           "GET http://a.test/ HTTP/1.1\r\nA: b\x7f\r\n\r\n",
           "\r\n\r\n",
       })
    EXPECT_EQ(parse_request_head(bad).status, ParseStatus::invalid) << bad;
  // Garbage is refused as soon as its first line is complete.
  EXPECT_EQ(parse_request_head("\x16\x03\x01 nope\r\n").status, ParseStatus::invalid);
}

TEST(NetHttpHead, BoundsSizeAndHeaderCount) {
  std::string big = "GET http://a.test/ HTTP/1.1\r\nX: " + std::string(kMaxRequestHead, 'a');
  EXPECT_EQ(parse_request_head(big).status, ParseStatus::too_large);
  EXPECT_EQ(parse_request_head(big + "\r\n\r\n").status, ParseStatus::too_large);
  std::string many = "GET http://a.test/ HTTP/1.1\r\n";
  for (size_t i = 0; i <= kMaxHeaders; ++i) many += "X: y\r\n";
  EXPECT_EQ(parse_request_head(many + "\r\n").status, ParseStatus::invalid);
}

TEST(NetProxyRequest, Connect) {
  const auto c = interpret_request(head_of("CONNECT Files.PyPI.org:443 HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(c.request) << c.error;
  EXPECT_EQ(c.request->kind, ProxyRequest::Kind::connect);
  EXPECT_EQ(c.request->host.text, "files.pypi.org");
  EXPECT_EQ(c.request->port, 443);
  const auto v6 = interpret_request(head_of("CONNECT [::1]:443 HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(v6.request) << v6.error;
  EXPECT_EQ(v6.request->host.text, "::1");
  for (const char* bad : {"CONNECT pypi.org HTTP/1.1\r\n\r\n", "CONNECT pypi.org:0 HTTP/1.1\r\n\r\n",
                          "CONNECT pypi.org:65536 HTTP/1.1\r\n\r\n", "CONNECT pypi.org:+443 HTTP/1.1\r\n\r\n",
                          "CONNECT u@pypi.org:443 HTTP/1.1\r\n\r\n", "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
                          "CONNECT [::1]x:443 HTTP/1.1\r\n\r\n"}) {
    const auto r = interpret_request(head_of(bad));
    EXPECT_FALSE(r.request) << bad;
    EXPECT_EQ(r.status, 400) << bad;
  }
}

TEST(NetProxyRequest, AbsoluteHttp) {
  const auto c = interpret_request(head_of("POST http://PyPI.test:8080?q=1 HTTP/1.1\r\nHost: pypi.test.:8080\r\n"
                                           "Content-Length: 5\r\n\r\n"));
  ASSERT_TRUE(c.request) << c.error;
  EXPECT_EQ(c.request->kind, ProxyRequest::Kind::http);
  EXPECT_EQ(c.request->path, "/?q=1");
  EXPECT_EQ(c.request->authority, "pypi.test:8080");
  EXPECT_EQ(c.request->content_length, 5u);
  const auto no_host = interpret_request(head_of("GET http://pypi.test HTTP/1.0\r\n\r\n"));
  ASSERT_TRUE(no_host.request);
  EXPECT_EQ(no_host.request->port, 80);
  EXPECT_EQ(no_host.request->path, "/");
}

TEST(NetProxyRequest, RefusesWhatItCannotCheck) {
  const std::pair<const char*, int> cases[] = {
      {"GET / HTTP/1.1\r\nHost: pypi.test\r\n\r\n", 400},                                 // origin-form
      {"GET https://pypi.test/ HTTP/1.1\r\n\r\n", 400},                                    // use CONNECT
      {"GET ftp://pypi.test/ HTTP/1.1\r\n\r\n", 400},
      {"GET http://pypi.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400},                  // Host mismatch
      {"GET http://pypi.test/ HTTP/1.1\r\nHost: pypi.test:81\r\n\r\n", 400},
      {"GET http://pypi.test/ HTTP/1.1\r\nHost: pypi.test\r\nHost: pypi.test\r\n\r\n", 400},
      {"GET http://user@pypi.test/ HTTP/1.1\r\n\r\n", 400},
      {"GET http://pypi.test/#x HTTP/1.1\r\n\r\n", 400},
      {"GET http:///x HTTP/1.1\r\n\r\n", 400},
      {"POST http://pypi.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"POST http://pypi.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST http://pypi.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"GET http://2130706433/ HTTP/1.1\r\n\r\n", 403},                                    // numeric form
      {"GET http://0x7f.1/ HTTP/1.1\r\n\r\n", 403},
  };
  for (const auto& [text, status] : cases) {
    const auto r = interpret_request(head_of(text));
    EXPECT_FALSE(r.request) << text;
    EXPECT_EQ(r.status, status) << text << " -> " << r.error;
    EXPECT_FALSE(r.error.empty());
  }
}

TEST(NetProxyRequest, UpstreamHeadIsOriginFormAndCloses) {
  const auto head = head_of(
      "GET http://pypi.test:8080/simple/ HTTP/1.1\r\nHost: pypi.test:8080\r\nUser-Agent: pip\r\n"
      "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Secret\r\n"
      "X-Secret: 1\r\nKeep-Alive: 5\r\n\r\n");
  const auto c = interpret_request(head);
  ASSERT_TRUE(c.request);
  EXPECT_EQ(upstream_head(head, *c.request),
            "GET /simple/ HTTP/1.1\r\nHost: pypi.test:8080\r\nUser-Agent: pip\r\nConnection: close\r\n\r\n");
}

}  // namespace
}  // namespace sandboxrun::net
