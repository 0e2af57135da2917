// The egress proxy's settings check, its error answers and its name resolution.
#include <fcntl.h>
#include <netdb.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <thread>

#include "net/net_parse.hpp"
#include "net/proxy_internal.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::net::proxy {

namespace {

std::vector<Cidr> parse_networks(const std::vector<std::string>& nets) {
  std::vector<Cidr> out;
  for (const auto& n : nets) {
    try {
      out.push_back(parse_cidr(n));
    } catch (const Error& e) {
      throw Error(std::string("allow_networks: ") + e.what(), e.hint());
    }
  }
  return out;
}

}  // namespace

Config validate(const NetworkSettings& s) {
  if (s.mode != NetworkMode::allowlist)
    throw Error("egress proxy: network_mode is not allowlist", "the proxy only runs for network_mode: allowlist");
  Config c{Allowlist(s.allowlist), AddressPolicy(parse_networks(s.allow_networks)), {}, s.max_connections, s.max_bytes,
           std::chrono::seconds(s.idle_timeout_s)};
  for (const auto& [name, address] : s.extra_hosts) {
    const std::string where = "extra_hosts entry '" + name + "'";
    const auto host = normalize_host(name);
    if (!host.host || host.host->kind != Host::Kind::name)
      throw Error(where + ": " + (host.host ? "the name is an address" : host.reason), "map a host name to an address");
    const auto ip = parse_ip(address);
    if (!ip) throw Error(where + ": '" + address + "' is not an IP address", "write e.g. pypi.internal: 10.0.0.5");
    const auto [it, inserted] = c.extra_hosts.emplace(host.host->text, *ip);
    if (!inserted && !(it->second == *ip))
      throw Error(where + ": the same name is mapped twice to different addresses", "keep one entry per name");
  }
  if (s.max_connections == 0 || s.max_connections > kMaxConnectionsCap)
    throw Error("network max_connections: " + std::to_string(s.max_connections) + " is out of range",
                "use 1 to " + std::to_string(kMaxConnectionsCap));
  if (s.max_bytes == 0) throw Error("network max_bytes: must be greater than 0");
  if (s.idle_timeout_s == 0) throw Error("network idle_timeout_s: must be greater than 0");
  return c;
}

void check_listening(int fd) {
  int accepting = 0, type = 0;
  socklen_t len = sizeof accepting;
  if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting)
    throw Error("egress proxy: fd " + std::to_string(fd) + " is not a listening socket", "pass the proxy's listening socket", errno);
  len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    throw Error("egress proxy: fd " + std::to_string(fd) + " is not a stream socket");
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_errno("egress proxy: set O_NONBLOCK on the listening socket");
}

int millis_until(Clock::time_point deadline) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, INT_MAX));
}

namespace {

std::string status_text(int status) {
  switch (status) {
    case 200: return "Connection established";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

std::string error_response(int status, const std::string& reason) {
  const std::string body = "sandboxrun egress proxy: " + reason + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}


std::shared_ptr<ResolveJob> start_resolve(const std::string& name) {
  auto job = std::make_shared<ResolveJob>();
  if (!job->done) throw_errno("egress proxy: eventfd for name resolution");
  std::thread([job, name] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
    std::vector<IpAddress> out;
    for (auto* ai = res; rc == 0 && ai; ai = ai->ai_next) {
      if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
      auto a = IpAddress::from_sockaddr(ai->ai_addr);
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
    if (res) freeaddrinfo(res);
    std::lock_guard lock(job->mu);
    job->rc = rc;
    job->addresses = std::move(out);
    const uint64_t one = 1;
    [[maybe_unused]] auto n = write(job->done.get(), &one, sizeof one);
  }).detach();
  return job;
}

}  // namespace sandboxrun::net::proxy
