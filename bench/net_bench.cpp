// Egress proxy throughput on loopback: a 100 MB download direct from a local origin, through the
// proxy as a plain HTTP request, and through a CONNECT tunnel (after a ClientHello with SNI).
// Also the cost of creating, starting and stopping a proxy. Everything stays on 127.0.0.1.
//
//   net_bench [MB] [runs]     (defaults: 100 MB, 5 runs; medians printed)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "net/egress_proxy.hpp"
#include "sandboxrun/error.hpp"

using namespace sandboxrun;
using Clock = std::chrono::steady_clock;

namespace {

UniqueFd listen_loopback(uint16_t& port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sin;
  if (!fd || bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), len) != 0 || listen(fd.get(), 64) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len) != 0)
    throw_errno("bench: listen on 127.0.0.1");
  port = ntohs(sin.sin_port);
  return fd;
}

UniqueFd connect_loopback(uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons(port);
  if (!fd || connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) throw_errno("bench: connect");
  return fd;
}

// Answers every connection's first bytes (a request head or a ClientHello) with `size` bytes.
class Origin {
 public:
  explicit Origin(uint64_t size) : size_(size), fd_(listen_loopback(port_)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~Origin() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  void serve() {
    std::vector<char> chunk(1 << 20, 'x');
    while (!stop_) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      UniqueFd c(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) continue;
      char buf[4096];
      if (recv(c.get(), buf, sizeof buf, 0) <= 0) continue;
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size_) + "\r\nConnection: close\r\n\r\n";
      send(c.get(), head.data(), head.size(), MSG_NOSIGNAL);
      for (uint64_t sent = 0; sent < size_;) {
        const ssize_t n = send(c.get(), chunk.data(), std::min<uint64_t>(chunk.size(), size_ - sent), MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<uint64_t>(n);
      }
    }
  }

  uint64_t size_;
  uint16_t port_ = 0;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string u16(size_t v) { return {static_cast<char>(v >> 8 & 0xff), static_cast<char>(v & 0xff)}; }

// Minimal ClientHello record carrying SNI `name` (enough for the proxy's check).
std::string client_hello(const std::string& name) {
  const std::string entry = std::string(1, '\0') + u16(name.size()) + name;
  const std::string sni = u16(0) + u16(entry.size() + 2) + u16(entry.size()) + entry;
  std::string body = "\x03\x03" + std::string(32, 'r') + std::string(1, '\0') + u16(2) + "\x13\x01" + std::string("\x01\x00", 2);
  body += u16(sni.size()) + sni;
  const std::string hs = std::string(1, '\x01') + '\0' + u16(body.size()) + body;
  return "\x16\x03\x01" + u16(hs.size()) + hs;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

struct Sample {
  double mb_per_s;
  double cpu_ms_per_100mb;  // all threads of this process: origin, proxy and client
};

// Sends `request`, reads to EOF; returns MB/s over the bytes received and the CPU it took.
Sample download(uint16_t port, const std::string& request, uint64_t expect_at_least) {
  const double cpu0 = cpu_seconds();
  const auto start = Clock::now();
  auto fd = connect_loopback(port);
  if (send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
    throw_errno("bench: send request");
  std::vector<char> buf(256 * 1024);
  uint64_t total = 0;
  ssize_t n;
  while ((n = recv(fd.get(), buf.data(), buf.size(), 0)) > 0) total += static_cast<uint64_t>(n);
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (total < expect_at_least) throw Error("bench: short download (" + std::to_string(total) + " bytes)");
  const double mb = static_cast<double>(total) / 1e6;
  return {mb / s, (cpu_seconds() - cpu0) * 1000 / (mb / 100)};
}

Sample median(std::vector<Sample> v) {
  Sample m;
  std::sort(v.begin(), v.end(), [](const Sample& a, const Sample& b) { return a.mb_per_s < b.mb_per_s; });
  m.mb_per_s = v[v.size() / 2].mb_per_s;
  std::sort(v.begin(), v.end(), [](const Sample& a, const Sample& b) { return a.cpu_ms_per_100mb < b.cpu_ms_per_100mb; });
  m.cpu_ms_per_100mb = v[v.size() / 2].cpu_ms_per_100mb;
  return m;
}

}  // namespace

int main(int argc, char** argv) try {
  const uint64_t mb = argc > 1 ? std::stoull(argv[1]) : 100;
  const int runs = argc > 2 ? std::stoi(argv[2]) : 5;
  const uint64_t size = mb * 1000 * 1000;

  Origin origin(size);
  NetworkSettings s;
  s.mode = NetworkMode::allowlist;
  s.allowlist = {"bench.test"};
  s.extra_hosts = {{"bench.test", "127.0.0.1"}};
  s.max_bytes = 1ull << 40;
  uint16_t proxy_port = 0;
  net::EgressProxy proxy(listen_loopback(proxy_port), s);
  proxy.start();

  const std::string authority = "bench.test:" + std::to_string(origin.port());
  const std::string get = "GET http://" + authority + "/blob HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
  const std::string direct_get = "GET /blob HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
  const std::string connect = "CONNECT " + authority + " HTTP/1.1\r\n\r\n" + client_hello("bench.test");

  std::vector<Sample> direct, via_http, via_connect;
  for (int i = 0; i < runs; ++i) {  // interleaved so that load changes hit all three alike
    direct.push_back(download(origin.port(), direct_get, size));
    via_http.push_back(download(proxy_port, get, size));
    via_connect.push_back(download(proxy_port, connect, size));
  }
  std::printf("net_bench: %llu MB download on loopback, median of %d runs, %u CPUs online\n",
              static_cast<unsigned long long>(mb), runs, std::thread::hardware_concurrency());
  std::printf("  %-18s %8s %10s %16s\n", "path", "MB/s", "vs direct", "CPU ms / 100 MB");
  const Sample d = median(direct);
  for (const auto& [name, samples] : {std::pair{"direct", &direct}, {"proxy (HTTP GET)", &via_http}, {"proxy (CONNECT)", &via_connect}}) {
    const Sample m = median(*samples);
    std::printf("  %-18s %8.0f %9.0f%% %16.1f\n", name, m.mb_per_s, 100 * m.mb_per_s / d.mb_per_s, m.cpu_ms_per_100mb);
  }
  proxy.stop();
  const auto counters = proxy.counters();
  std::printf("  proxy counted: %llu allowed, %llu denied, %llu bytes down\n",
              static_cast<unsigned long long>(counters.allowed), static_cast<unsigned long long>(counters.denied),
              static_cast<unsigned long long>(counters.bytes_down));

  // Start-up cost of the proxy itself (the launcher's extra work for network_mode allowlist).
  constexpr int kStarts = 200;
  const auto t0 = Clock::now();
  for (int i = 0; i < kStarts; ++i) {
    uint16_t port = 0;
    net::EgressProxy p(listen_loopback(port), s);
    p.start();
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kStarts;
  std::printf("  proxy create+start+stop: %.0f us\n", us);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "net_bench: %s\n", e.what());
  return 1;
}
