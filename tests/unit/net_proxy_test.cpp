// The SNI parser, and the egress proxy end to end on 127.0.0.1 only: the test makes the listening
// socket the launcher would pass in, a small HTTP server and a byte-echo "TLS" server, and maps
// test names to 127.0.0.1 with extra_hosts, so nothing leaves this machine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "net/egress_proxy.hpp"
#include "sandboxrun/error.hpp"
#include "net/net_parse.hpp"

namespace sandboxrun::net {
namespace {

using namespace std::chrono_literals;

// ---- A hand-made TLS ClientHello -------------------------------------------------------------

std::string u16(size_t v) { return {static_cast<char>(v >> 8 & 0xff), static_cast<char>(v & 0xff)}; }
std::string u24(size_t v) { return static_cast<char>(v >> 16 & 0xff) + u16(v & 0xffff); }

std::string extension(uint16_t type, const std::string& data) { return u16(type) + u16(data.size()) + data; }

std::string sni_extension(const std::string& name) {
  const std::string entry = std::string(1, '\0') + u16(name.size()) + name;
  return extension(0, u16(entry.size()) + entry);
}

// A ClientHello handshake message with TLS 1.3-looking extensions around `extra`.
std::string hello_message(const std::string& extra) {
  std::string body = "\x03\x03" + std::string(32, 'r') + std::string(1, '\0') + u16(2) + "\x13\x01" + std::string("\x01\x00", 2);
  const std::string exts = extension(43, "\x02\x03\x04") + extra + extension(51, u16(0));
  body += u16(exts.size()) + exts;
  return "\x01" + u24(body.size()) + body;
}

// Wraps a handshake message into TLS records of at most `fragment` bytes each.
std::string records(const std::string& hs, size_t fragment = 16384) {
  std::string out;
  for (size_t i = 0; i < hs.size(); i += fragment) {
    const auto chunk = hs.substr(i, fragment);
    out += "\x16\x03\x01" + u16(chunk.size()) + chunk;
  }
  return out;
}

std::string client_hello(const std::string& sni) { return records(hello_message(sni.empty() ? "" : sni_extension(sni))); }

TEST(NetSni, FindsTheServerName) {
  const auto hello = client_hello("files.pypi.org");
  const auto r = parse_client_hello_sni(hello + "trailing application bytes");
  ASSERT_EQ(r.status, SniStatus::found) << r.error;
  EXPECT_EQ(r.server_name, "files.pypi.org");
}

TEST(NetSni, EveryPrefixIsIncomplete) {
  const auto hello = client_hello("pypi.org");
  for (size_t n = 0; n < hello.size(); ++n)
    ASSERT_EQ(parse_client_hello_sni(std::string_view(hello).substr(0, n)).status, SniStatus::incomplete) << n;
}

TEST(NetSni, ReassemblesFragmentedRecords) {
  const auto r = parse_client_hello_sni(records(hello_message(sni_extension("pypi.org")), 7));
  ASSERT_EQ(r.status, SniStatus::found) << r.error;
  EXPECT_EQ(r.server_name, "pypi.org");
}

TEST(NetSni, AbsentNotTlsMalformedAndEch) {
  EXPECT_EQ(parse_client_hello_sni(client_hello("")).status, SniStatus::absent);
  EXPECT_EQ(parse_client_hello_sni("GET / HTTP/1.1\r\n\r\n").status, SniStatus::not_tls);
  EXPECT_EQ(parse_client_hello_sni("\x17").status, SniStatus::not_tls);
  // Duplicate extension, two host names, a length running past its vector.
  EXPECT_EQ(parse_client_hello_sni(records(hello_message(sni_extension("a.test") + sni_extension("b.test")))).status,
            SniStatus::malformed);
  const std::string two = std::string(1, '\0') + u16(6) + "a.test" + std::string(1, '\0') + u16(6) + "b.test";
  EXPECT_EQ(parse_client_hello_sni(records(hello_message(extension(0, u16(two.size()) + two)))).status,
            SniStatus::malformed);
  auto broken = hello_message(sni_extension("pypi.org"));
  broken[4 + 2 + 32] = 40;  // session id length 40 > 32
  EXPECT_EQ(parse_client_hello_sni(records(broken)).status, SniStatus::malformed);
  // A ServerHello (type 2) is not what a client opens with.
  auto server_hello = hello_message("");
  server_hello[0] = 2;
  EXPECT_EQ(parse_client_hello_sni(records(server_hello)).status, SniStatus::malformed);
  EXPECT_EQ(parse_client_hello_sni(records(hello_message(sni_extension("pypi.org") + extension(0xfe0d, "x")))).status,
            SniStatus::ech);
}

// ---- Loopback servers and a client ------------------------------------------------------------

UniqueFd listen_loopback(uint16_t& port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("socket");
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sin;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), len) != 0 || listen(fd.get(), 64) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len) != 0)
    throw_errno("bind/listen on 127.0.0.1");
  port = ntohs(sin.sin_port);
  return fd;
}

void set_timeouts(int fd, std::chrono::seconds s) {
  timeval tv{static_cast<time_t>(s.count()), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Serves each accepted connection with `handler` on its own thread, until destroyed.
class Server {
 public:
  explicit Server(std::function<void(int)> handler) : handler_(std::move(handler)), fd_(listen_loopback(port_)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
    for (auto& t : conns_) t.join();
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void loop() {
    while (!stop_) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int c = accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++accepted_;
      set_timeouts(c, 10s);
      conns_.emplace_back([this, c] {
        handler_(c);
        close(c);
      });
    }
  }

  std::function<void(int)> handler_;
  uint16_t port_ = 0;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<std::thread> conns_;
  std::thread thread_;
};

std::string read_head(int fd) {
  std::string s;
  char c;
  while (s.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) s.push_back(c);
  return s;
}

std::string read_all(int fd) {
  std::string s;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// An HTTP origin: records the request head it got and answers with a body of `body_size` bytes.
struct HttpOrigin {
  explicit HttpOrigin(size_t body_size = 5)
      : server([this, body_size](int fd) {
          auto head = read_head(fd);
          {
            std::lock_guard lock(mu);
            requests.push_back(head);
          }
          const auto cl = head.find("Content-Length: ");
          if (cl != std::string::npos) {
            const size_t want = std::stoul(head.substr(cl + 16));
            std::string body;
            char c;
            while (body.size() < want && recv(fd, &c, 1, 0) == 1) body.push_back(c);
            std::lock_guard lock(mu);
            bodies.push_back(body);
          }
          const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_size) +
                                       "\r\nConnection: close\r\n\r\n";
          send(fd, response.data(), response.size(), MSG_NOSIGNAL);
          const std::string chunk(64 * 1024, 'x');
          for (size_t sent = 0; sent < body_size;) {
            const ssize_t n = send(fd, chunk.data(), std::min(chunk.size(), body_size - sent), MSG_NOSIGNAL);
            if (n <= 0) break;
            sent += static_cast<size_t>(n);
          }
        }) {}
  std::string request(size_t i) {
    std::lock_guard lock(mu);
    return i < requests.size() ? requests[i] : "";
  }
  std::mutex mu;
  std::vector<std::string> requests;
  std::vector<std::string> bodies;
  Server server;
};

// Echoes every byte back (stands in for a TLS server), keeps what it got, and answers the
// client's half-close with "bye".
struct EchoOrigin {
  EchoOrigin()
      : server([this](int fd) {
          char buf[4096];
          ssize_t n;
          while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
            {
              std::lock_guard lock(mu);
              received.append(buf, static_cast<size_t>(n));
            }
            send(fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
          }
          if (n == 0) send(fd, "bye", 3, MSG_NOSIGNAL);
        }) {}
  std::string got() {
    std::lock_guard lock(mu);
    return received;
  }
  std::mutex mu;
  std::string received;
  Server server;
};

UniqueFd connect_to(uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons(port);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) throw_errno("connect to the proxy");
  set_timeouts(fd.get(), 10s);
  return fd;
}

void send_all(int fd, const std::string& s) { ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

// ---- The proxy --------------------------------------------------------------------------------

NetworkSettings settings(std::vector<std::string> allowlist, std::map<std::string, std::string> extra_hosts = {}) {
  NetworkSettings s;
  s.mode = NetworkMode::allowlist;
  s.allowlist = std::move(allowlist);
  s.extra_hosts = std::move(extra_hosts);
  return s;
}

struct Proxy {
  explicit Proxy(const NetworkSettings& s) : proxy(listen_loopback(port), s) { proxy.start(); }

  // One request on a fresh connection; returns all the proxy sent back.
  std::string exchange(const std::string& request) {
    auto fd = connect_to(port);
    send_all(fd.get(), request);
    return read_all(fd.get());
  }

  // Records land when a connection ends, a moment after the client saw it close.
  std::vector<ConnectionRecord> wait_records(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (proxy.records().size() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    auto r = proxy.records();
    EXPECT_EQ(r.size(), n);
    r.resize(std::max(r.size(), n));  // a missing record fails the checks on it, not the process
    return r;
  }

  uint16_t port = 0;
  EgressProxy proxy;
};

std::string get(const std::string& host, uint16_t port, const std::string& path = "/simple/") {
  const std::string authority = host + ":" + std::to_string(port);
  return "GET http://" + authority + path + " HTTP/1.1\r\nHost: " + authority + "\r\nProxy-Connection: keep-alive\r\n\r\n";
}

std::string connect_request(const std::string& host, uint16_t port) {
  return "CONNECT " + host + ":" + std::to_string(port) + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
}

constexpr char kEstablished[] = "HTTP/1.1 200 Connection established\r\n\r\n";

void expect_denied(const ConnectionRecord& r, const std::string& reason_part) {
  EXPECT_EQ(r.verdict, Verdict::denied);
  EXPECT_NE(r.reason.find(reason_part), std::string::npos) << r.reason;
  EXPECT_EQ(r.bytes_up, 0u);
  EXPECT_EQ(r.bytes_down, 0u);
}

TEST(NetProxy, AllowedGetIsForwardedAndCounted) {
  HttpOrigin origin(1000);
  Proxy p(settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}}));
  const auto response = p.exchange(get("PyPI.test", origin.server.port()));
  ASSERT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << response;
  EXPECT_EQ(response.size() - response.find("\r\n\r\n") - 4, 1000u);

  const auto sent = origin.request(0);
  EXPECT_EQ(sent.rfind("GET /simple/ HTTP/1.1\r\nHost: pypi.test:" + std::to_string(origin.server.port()) + "\r\n", 0), 0u)
      << sent;
  EXPECT_NE(sent.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(sent.find("Proxy-Connection"), std::string::npos);

  const auto recs = p.wait_records(1);
  EXPECT_EQ(recs[0].verdict, Verdict::allowed);
  EXPECT_EQ(recs[0].host, "pypi.test");
  EXPECT_EQ(recs[0].port, origin.server.port());
  EXPECT_EQ(recs[0].address, "127.0.0.1");
  EXPECT_EQ(recs[0].reason, "");
  EXPECT_EQ(recs[0].bytes_up, sent.size());
  EXPECT_EQ(recs[0].bytes_down, response.size());
  const auto c = p.proxy.counters();
  EXPECT_EQ(c.allowed, 1u);
  EXPECT_EQ(c.denied, 0u);
  EXPECT_EQ(c.bytes_down, response.size());
  EXPECT_EQ(c.bytes_up, sent.size());
}

TEST(NetProxy, ForwardsTheRequestBodyByContentLength) {
  HttpOrigin origin;
  Proxy p(settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}}));
  const std::string authority = "pypi.test:" + std::to_string(origin.server.port());
  auto fd = connect_to(p.port);
  send_all(fd.get(), "POST http://" + authority + "/upload HTTP/1.1\r\nHost: " + authority +
                         "\r\nContent-Length: 11\r\n\r\nhello");
  std::this_thread::sleep_for(50ms);  // the rest arrives while relaying: only 6 more bytes belong to the body
  send_all(fd.get(), " world and more that is not forwarded");
  const auto response = read_all(fd.get());
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK", 0), 0u) << response;
  const auto rec = p.wait_records(1)[0];
  EXPECT_EQ(rec.bytes_up, origin.request(0).size() + 11);
  std::lock_guard lock(origin.mu);
  ASSERT_EQ(origin.bodies.size(), 1u);
  EXPECT_EQ(origin.bodies[0], "hello world");
}

TEST(NetProxy, ConnectTunnelsWhenSniMatches) {
  EchoOrigin origin;
  Proxy p(settings({"*.pypi.test"}, {{"files.pypi.test", "127.0.0.1"}}));
  auto fd = connect_to(p.port);
  send_all(fd.get(), connect_request("files.pypi.test", origin.server.port()));
  std::string answer(sizeof kEstablished - 1, '\0');
  ASSERT_EQ(recv(fd.get(), answer.data(), answer.size(), MSG_WAITALL), static_cast<ssize_t>(answer.size()));
  EXPECT_EQ(answer, kEstablished);
  const auto hello = client_hello("files.pypi.test");
  send_all(fd.get(), hello + "ping");
  std::string echoed(hello.size() + 4, '\0');
  ASSERT_EQ(recv(fd.get(), echoed.data(), echoed.size(), MSG_WAITALL), static_cast<ssize_t>(echoed.size()));
  EXPECT_EQ(echoed, hello + "ping");
  shutdown(fd.get(), SHUT_WR);
  EXPECT_EQ(read_all(fd.get()), "bye");  // the half-close reached the origin, which still answered
  const auto recs = p.wait_records(1);
  EXPECT_EQ(recs[0].verdict, Verdict::allowed);
  EXPECT_EQ(recs[0].host, "files.pypi.test");
  EXPECT_EQ(recs[0].bytes_up, hello.size() + 4);
  EXPECT_EQ(recs[0].bytes_down, hello.size() + 4 + 3);
}

TEST(NetProxy, DeniesNamesNotInTheAllowlist) {
  HttpOrigin origin;
  Proxy p(settings({"*.pypi.org"}, {{"files.pypi.org", "127.0.0.1"}, {"evil-pypi.org", "127.0.0.1"},
                                    {"pypi.org", "127.0.0.1"}}));
  const auto port = origin.server.port();
  EXPECT_EQ(p.exchange(get("files.pypi.org", port)).rfind("HTTP/1.1 200", 0), 0u);
  p.wait_records(1);  // allowed connections are recorded when they end, after the client saw EOF
  for (const char* host : {"evil-pypi.org", "pypi.org", "other.test"}) {
    const auto response = p.exchange(get(host, port));
    EXPECT_EQ(response.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << response;
    EXPECT_NE(response.find("not in the network allowlist"), std::string::npos) << response;
  }
  const auto recs = p.wait_records(4);
  EXPECT_EQ(recs[0].verdict, Verdict::allowed);
  for (size_t i = 1; i < 4; ++i) expect_denied(recs[i], "not in the network allowlist");
  EXPECT_EQ(recs[1].host, "evil-pypi.org");
  EXPECT_EQ(origin.server.accepted(), 1);
  EXPECT_EQ(p.proxy.counters().denied, 3u);
}

TEST(NetProxy, DeniesIpLiteralsUnlessListed) {
  EchoOrigin origin;
  const auto port = origin.server.port();
  Proxy p(settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}}));
  for (const std::string host : {"127.0.0.1", "[::1]", "2130706433", "0x7f.1", "127.1"}) {
    const auto response = p.exchange(connect_request(host, port));
    EXPECT_EQ(response.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << host << ": " << response;
  }
  const auto recs = p.wait_records(5);
  expect_denied(recs[0], "'127.0.0.1' is not in the network allowlist");
  expect_denied(recs[1], "'::1' is not in the network allowlist");
  expect_denied(recs[2], "numeric address form");
  expect_denied(recs[3], "numeric address form");
  EXPECT_EQ(recs[3].host, "0x7f.1");
  expect_denied(recs[4], "numeric address form");
  EXPECT_EQ(origin.server.accepted(), 0);

  // Listed, a literal is reachable, and needs no SNI (clients send none for an address).
  Proxy listed(settings({"127.0.0.1"}));
  auto fd = connect_to(listed.port);
  send_all(fd.get(), connect_request("127.0.0.1", port));
  const auto hello = client_hello("");
  send_all(fd.get(), hello);
  std::string got(sizeof kEstablished - 1 + hello.size(), '\0');
  ASSERT_EQ(recv(fd.get(), got.data(), got.size(), MSG_WAITALL), static_cast<ssize_t>(got.size()));
  EXPECT_EQ(got, kEstablished + hello);
}

TEST(NetProxy, ResolvedLoopbackNeedsAllowNetworks) {
  // "localhost" resolves (through /etc/hosts) to loopback: refused unless allow_networks covers it.
  HttpOrigin origin;
  const auto port = origin.server.port();
  Proxy strict(settings({"localhost"}));
  const auto denied = strict.exchange(get("localhost", port));
  EXPECT_EQ(denied.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << denied;
  expect_denied(strict.wait_records(1)[0], "is loopback and not in allow_networks");
  EXPECT_EQ(origin.server.accepted(), 0);

  auto s = settings({"localhost"});
  s.allow_networks = {"127.0.0.0/8", "::1/128"};
  Proxy open(s);
  EXPECT_EQ(open.exchange(get("localhost", port)).rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(open.wait_records(1)[0].verdict, Verdict::allowed);
}

class NetProxyTunnel : public ::testing::Test {
 protected:
  // Opens a CONNECT tunnel to files.pypi.test, sends `first_bytes`, returns what came back.
  std::string tunnel(const std::string& first_bytes) {
    auto fd = connect_to(p.port);
    send_all(fd.get(), connect_request("files.pypi.test", origin.server.port()) + first_bytes);
    return read_all(fd.get());
  }
  EchoOrigin origin;
  Proxy p{settings({"files.pypi.test"}, {{"files.pypi.test", "127.0.0.1"}})};
};

TEST_F(NetProxyTunnel, RefusesSniMismatch) {
  EXPECT_EQ(tunnel(client_hello("www.google.com")), kEstablished);
  expect_denied(p.wait_records(1)[0], "SNI 'www.google.com' does not match CONNECT host 'files.pypi.test'");
  EXPECT_EQ(origin.got(), "");
}

TEST_F(NetProxyTunnel, RecordsQuoteHostileBytesAsPrintableAscii) {
  EXPECT_EQ(tunnel(client_hello("evil\x01\xff\\.test")), kEstablished);
  const auto rec = p.wait_records(1)[0];
  expect_denied(rec, "SNI 'evil\\x01\\xff\\x5c.test' does not match");
  for (char c : rec.reason) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << rec.reason;
}

TEST_F(NetProxyTunnel, RefusesMissingSni) {
  EXPECT_EQ(tunnel(client_hello("")), kEstablished);
  expect_denied(p.wait_records(1)[0], "without SNI");
  EXPECT_EQ(origin.got(), "");
}

TEST_F(NetProxyTunnel, RefusesNonTlsAndEch) {
  EXPECT_EQ(tunnel("GET / HTTP/1.1\r\nHost: files.pypi.test\r\n\r\n"), kEstablished);
  EXPECT_EQ(tunnel(records(hello_message(sni_extension("files.pypi.test") + extension(0xfe0d, "inner")))), kEstablished);
  const auto recs = p.wait_records(2);
  expect_denied(recs[0], "did not start with a TLS ClientHello");
  expect_denied(recs[1], "Encrypted ClientHello");
  EXPECT_EQ(origin.got(), "");
}

TEST(NetProxy, UnreachableDestinationGets502) {
  uint16_t closed_port = 0;
  listen_loopback(closed_port);  // bound and closed again: nothing listens there now
  Proxy p(settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}}));
  const auto response = p.exchange(get("pypi.test", closed_port));
  EXPECT_EQ(response.rfind("HTTP/1.1 502 Bad Gateway\r\n", 0), 0u) << response;
  const auto rec = p.wait_records(1)[0];
  EXPECT_EQ(rec.verdict, Verdict::allowed);  // the policy allowed it; the network did not
  EXPECT_NE(rec.reason.find("connect to 127.0.0.1:" + std::to_string(closed_port) + " failed"), std::string::npos)
      << rec.reason;
  EXPECT_EQ(rec.address, "");
}

TEST(NetProxy, MalformedRequestsGet400) {
  Proxy p(settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}}));
  const auto r1 = p.exchange("GET http://pypi.test/ HTTP/1.1\r\nBad Header: x\r\n\r\n");
  EXPECT_EQ(r1.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << r1;
  const auto r2 = p.exchange("GET /simple/ HTTP/1.1\r\nHost: pypi.test\r\n\r\n");
  EXPECT_EQ(r2.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << r2;
  const auto r3 = p.exchange("GET http://pypi.test/ HTTP/1.1\r\nX: " + std::string(kMaxRequestHead, 'a'));
  EXPECT_EQ(r3.rfind("HTTP/1.1 431 ", 0), 0u) << r3.substr(0, 100);
  const auto recs = p.wait_records(3);
  expect_denied(recs[0], "malformed request");
  expect_denied(recs[1], "not a proxy request");
  expect_denied(recs[2], "request head larger than");
}

TEST(NetProxy, ConnectionLimit) {
  auto s = settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}});
  s.max_connections = 2;
  Proxy p(s);
  auto a = connect_to(p.port);
  auto b = connect_to(p.port);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (p.proxy.counters().active < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  const auto response = p.exchange(get("pypi.test", 1));
  EXPECT_EQ(response.rfind("HTTP/1.1 503 ", 0), 0u) << response;
  expect_denied(p.wait_records(1)[0], "connection limit (2) reached");
  a.reset();
  b.reset();
  p.wait_records(3);  // the two idle ones end as "client closed"
}

TEST(NetProxy, ByteLimitCutsTheRunOff) {
  HttpOrigin origin(1 << 20);
  auto s = settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}});
  s.max_bytes = 100'000;
  Proxy p(s);
  const auto response = p.exchange(get("pypi.test", origin.server.port()));
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_LT(response.size(), 100'000u);
  const auto first = p.wait_records(1)[0];
  EXPECT_EQ(first.verdict, Verdict::allowed);
  EXPECT_EQ(first.reason, "byte limit reached");
  EXPECT_LE(first.bytes_up + first.bytes_down, 100'000u);
  const auto next = p.exchange(get("pypi.test", origin.server.port()));
  EXPECT_EQ(next.rfind("HTTP/1.1 403 ", 0), 0u) << next;
  expect_denied(p.wait_records(2)[1], "byte limit reached");
}

TEST(NetProxy, IdleTimeoutClosesATunnel) {
  EchoOrigin origin;
  auto s = settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}});
  s.idle_timeout_s = 1;
  Proxy p(s);
  auto fd = connect_to(p.port);
  send_all(fd.get(), connect_request("pypi.test", origin.server.port()) + client_hello("pypi.test"));
  const auto start = std::chrono::steady_clock::now();
  const auto got = read_all(fd.get());  // returns when the proxy closes
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_EQ(got.rfind(kEstablished, 0), 0u);
  const auto rec = p.wait_records(1)[0];
  EXPECT_EQ(rec.verdict, Verdict::allowed);
  EXPECT_EQ(rec.reason, "idle timeout");
}

TEST(NetProxy, StopEndsOpenConnectionsPromptly) {
  EchoOrigin origin;
  Proxy p(settings({"pypi.test"}, {{"pypi.test", "127.0.0.1"}}));
  auto tunnel = connect_to(p.port);
  send_all(tunnel.get(), connect_request("pypi.test", origin.server.port()) + client_hello("pypi.test"));
  auto idle = connect_to(p.port);  // never sends a request
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (origin.got().empty() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  // Both accepted (the idle one may still wait in the listen queue on a loaded machine).
  while (p.proxy.counters().active < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  const auto start = std::chrono::steady_clock::now();
  p.proxy.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  const auto recs = p.proxy.records();
  ASSERT_EQ(recs.size(), 2u);
  for (const auto& r : recs) EXPECT_EQ(r.reason, "proxy stopped");
  EXPECT_EQ(p.proxy.counters().active, 0u);
}

TEST(NetProxy, InvalidSettingsFailClosed) {
  auto make = [](const NetworkSettings& s) {
    uint16_t port = 0;
    EgressProxy proxy(listen_loopback(port), s);
  };
  EXPECT_NO_THROW(make(settings({"pypi.org"})));
  NetworkSettings none;
  EXPECT_THROW(make(none), Error);
  EXPECT_THROW(make(settings({"*"})), Error);
  EXPECT_THROW(make(settings({"pypi.org"}, {{"pypi.test", "not-an-ip"}})), Error);
  EXPECT_THROW(make(settings({"pypi.org"}, {{"10.0.0.1", "10.0.0.1"}})), Error);
  auto bad_net = settings({"pypi.org"});
  bad_net.allow_networks = {"10.0.0.1/8"};
  EXPECT_THROW(make(bad_net), Error);
  auto zero = settings({"pypi.org"});
  zero.max_connections = 0;
  EXPECT_THROW(make(zero), Error);
  zero = settings({"pypi.org"});
  zero.max_bytes = 0;
  EXPECT_THROW(make(zero), Error);
  zero = settings({"pypi.org"});
  zero.idle_timeout_s = 0;
  EXPECT_THROW(make(zero), Error);
  // Not a listening socket.
  UniqueFd plain(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_THROW(EgressProxy(std::move(plain), settings({"pypi.org"})), Error);
  EXPECT_THROW(EgressProxy(UniqueFd(), settings({"pypi.org"})), Error);
}

}  // namespace
}  // namespace sandboxrun::net
