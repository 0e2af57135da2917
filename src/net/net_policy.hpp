// Egress policy of the allowlist network mode: which host names may be asked for (Allowlist) and
// which resolved addresses may be connected to (AddressPolicy). Pure functions over strings and
// addresses, so every rule is unit-testable without sockets.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandboxrun::net {

// An IPv4 or IPv6 address. IPv4-mapped IPv6 (::ffff:a.b.c.d) is always stored as IPv4, so one
// rule covers both spellings of the same destination.
struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 uses the first 4

  // Canonical text: "127.0.0.1", "::1" (no brackets).
  std::string to_string() const;
  // Fills a sockaddr_in/sockaddr_in6 with `port`; returns its length.
  socklen_t to_sockaddr(uint16_t port, sockaddr_storage& out) const;
  static IpAddress from_sockaddr(const sockaddr* sa);
  bool operator==(const IpAddress&) const = default;
};

// Strict parse of a canonical literal: dotted-quad IPv4 (no leading zeros, no short or numeric
// forms) or IPv6 with or without brackets. Anything else is not an address.
std::optional<IpAddress> parse_ip(std::string_view text);

struct Cidr {
  IpAddress base;  // host bits cleared
  unsigned prefix = 0;
  bool contains(const IpAddress& a) const;
  std::string to_string() const;
};
// "10.0.0.0/8", "fd00::/8", or a bare address (a /32 or /128). Throws Error naming `text`.
Cidr parse_cidr(std::string_view text);

// A host as asked for by a client, after normalisation.
struct Host {
  enum class Kind { name, ip };
  Kind kind = Kind::name;
  std::string text;  // lower-case name without trailing dot, or canonical address text
  std::optional<IpAddress> ip;
};

// Normalises a host from a request (case, one trailing dot, brackets around IPv6). Returns a
// reason on refusal: bad characters or label lengths, and numeric IPv4 forms other than the
// canonical dotted quad ("2130706433", "0x7f.1", "127.1", "0177.0.0.1"), which resolvers would
// quietly turn into an address.
struct HostCheck {
  std::optional<Host> host;
  std::string reason;  // set when host is empty
};
HostCheck normalize_host(std::string_view text);

// Exact names, "*.domain" (any depth of subdomain on a dot boundary, not the domain itself) and
// IP literals. Matching is case-insensitive and ignores one trailing dot.
class Allowlist {
 public:
  // Throws Error naming the bad entry: empty, a bare "*", a wildcard over a top-level label
  // ("*.org"), a "*" anywhere but a leading "*.", or a host normalize_host refuses.
  explicit Allowlist(const std::vector<std::string>& entries);
  bool allows(const Host& host) const;

 private:
  std::vector<std::string> exact_;     // names and canonical address texts
  std::vector<std::string> suffixes_;  // ".pypi.org" for "*.pypi.org"
};

// Destination ranges the proxy refuses unless an allow_networks CIDR covers the address:
// unspecified, loopback, link-local (169.254/16 incl. cloud metadata, fe80::/10), private
// (10/8, 172.16/12, 192.168/16), shared CGNAT 100.64/10, unique-local fc00::/7, multicast,
// reserved and benchmark ranges, and IPv6 forms embedding such an IPv4 (NAT64, 6to4, compat).
class AddressPolicy {
 public:
  explicit AddressPolicy(std::vector<Cidr> allowed_networks);
  // Empty when the address may be connected to; otherwise why not ("loopback", ...).
  std::optional<std::string> deny_reason(const IpAddress& a) const;

 private:
  std::vector<Cidr> allowed_;
};

// The range class a blocked address falls in ("loopback", "private", ...), or empty for a
// globally routable address. Exposed for tests and messages.
std::optional<std::string> special_range(const IpAddress& a);

}  // namespace sandboxrun::net
