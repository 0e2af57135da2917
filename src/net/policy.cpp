#include "net/net_policy.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "common/ascii.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::net {

namespace {

constexpr size_t kMaxNameLength = 253;
constexpr size_t kMaxLabelLength = 63;


bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool hex_number(std::string_view s) {
  if (s.size() < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  return std::all_of(s.begin() + 2, s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

bool label_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

IpAddress v4(const uint8_t* b) {
  IpAddress a;
  std::memcpy(a.bytes.data(), b, 4);
  return a;
}

// Embedded IPv4 of the IPv6 transition forms that a gateway would turn into that IPv4.
std::optional<IpAddress> embedded_v4(const IpAddress& a) {
  const auto& b = a.bytes;
  static constexpr uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(b.data(), nat64, 12) == 0) return v4(b.data() + 12);
  if (b[0] == 0x20 && b[1] == 0x02) return v4(b.data() + 2);  // 6to4 2002::/16
  return std::nullopt;
}

struct Range {
  Cidr net;
  const char* name;
};

const std::vector<Range>& special_ranges() {
  static const std::vector<Range> ranges = [] {
    const std::pair<const char*, const char*> table[] = {
        {"0.0.0.0/8", "unspecified"},
        {"10.0.0.0/8", "private"},
        {"100.64.0.0/10", "shared address space (CGNAT)"},
        {"127.0.0.0/8", "loopback"},
        {"169.254.0.0/16", "link-local"},
        {"172.16.0.0/12", "private"},
        {"192.0.0.0/24", "reserved (IETF protocol assignments)"},
        {"192.0.2.0/24", "reserved (documentation)"},
        {"192.168.0.0/16", "private"},
        {"198.18.0.0/15", "reserved (benchmarking)"},
        {"198.51.100.0/24", "reserved (documentation)"},
        {"203.0.113.0/24", "reserved (documentation)"},
        {"224.0.0.0/4", "multicast"},
        {"240.0.0.0/4", "reserved"},
        {"::/128", "unspecified"},
        {"::1/128", "loopback"},
        {"::/96", "reserved (IPv4-compatible IPv6)"},
        {"64:ff9b:1::/48", "reserved (local-use NAT64)"},
        {"100::/64", "reserved (discard-only)"},
        {"2001::/32", "reserved (Teredo)"},
        {"2001:db8::/32", "reserved (documentation)"},
        {"fc00::/7", "unique-local"},
        {"fe80::/10", "link-local"},
        {"fec0::/10", "site-local"},
        {"ff00::/8", "multicast"},
    };
    std::vector<Range> out;
    for (const auto& [cidr, name] : table) out.push_back({parse_cidr(cidr), name});
    return out;
  }();
  return ranges;
}

}  // namespace

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

socklen_t IpAddress::to_sockaddr(uint16_t port, sockaddr_storage& out) const {
  out = {};
  if (v6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    std::memcpy(&sin6->sin6_addr, bytes.data(), 16);
    return sizeof(sockaddr_in6);
  }
  auto* sin = reinterpret_cast<sockaddr_in*>(&out);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  std::memcpy(&sin->sin_addr, bytes.data(), 4);
  return sizeof(sockaddr_in);
}

IpAddress IpAddress::from_sockaddr(const sockaddr* sa) {
  IpAddress a;
  if (sa->sa_family == AF_INET) {
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return a;
  }
  const auto* b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  static constexpr uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(b, mapped, 12) == 0) return v4(b + 12);
  a.v6 = true;
  std::memcpy(a.bytes.data(), b, 16);
  return a;
}

std::optional<IpAddress> parse_ip(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string s(text);
  // glibc's inet_pton accepts only the canonical dotted quad (no leading zeros, no short forms).
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) return v4(reinterpret_cast<const uint8_t*>(&a4));
  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  if (inet_pton(AF_INET6, s.c_str(), &sin6.sin6_addr) == 1)
    return IpAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&sin6));
  return std::nullopt;
}

bool Cidr::contains(const IpAddress& a) const {
  if (a.v6 != base.v6) return false;
  unsigned bits = prefix;
  for (size_t i = 0; bits > 0; ++i) {
    const unsigned take = std::min(bits, 8u);
    const auto mask = static_cast<uint8_t>(0xff << (8 - take));
    if ((a.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
    bits -= take;
  }
  return true;
}

std::string Cidr::to_string() const { return base.to_string() + "/" + std::to_string(prefix); }

Cidr parse_cidr(std::string_view text) {
  const std::string where = "network '" + std::string(text) + "'";
  const auto slash = text.find('/');
  const std::string_view addr_text = text.substr(0, slash);
  const auto addr = parse_ip(addr_text);
  if (!addr || addr_text.front() == '[')
    throw Error(where + ": not an address or CIDR", "write e.g. 10.0.0.0/8 or fd00::/8");
  if (!addr->v6 && addr_text.find(':') != std::string_view::npos)
    throw Error(where + ": IPv4-mapped IPv6 network", "write the IPv4 network in dotted form");
  const unsigned max = addr->v6 ? 128 : 32;
  unsigned prefix = max;
  if (slash != std::string_view::npos) {
    const auto p = text.substr(slash + 1);
    if (!all_digits(p) || p.size() > 3 || std::stoul(std::string(p)) > max)
      throw Error(where + ": bad prefix length", "use /0 to /" + std::to_string(max));
    prefix = static_cast<unsigned>(std::stoul(std::string(p)));
  }
  Cidr c{*addr, prefix};
  Cidr masked = c;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned lo = i * 8;
    if (prefix <= lo)
      masked.base.bytes[i] = 0;
    else if (prefix < lo + 8)
      masked.base.bytes[i] &= static_cast<uint8_t>(0xff << (lo + 8 - prefix));
  }
  if (!(masked.base == c.base))
    throw Error(where + ": host bits set after the prefix", "did you mean " + masked.to_string() + "?");
  return c;
}

HostCheck normalize_host(std::string_view text) {
  const std::string shown(text.substr(0, 80));
  if (text.empty()) return {std::nullopt, "empty host"};
  if (text.front() == '[' || text.find(':') != std::string_view::npos) {
    const bool bracketed = text.front() == '[';
    auto ip = parse_ip(text);
    if (!ip || (bracketed && text.back() != ']'))
      return {std::nullopt, "'" + shown + "' is not a valid IPv6 literal"};
    return {Host{Host::Kind::ip, ip->to_string(), ip}, {}};
  }
  std::string name;
  name.reserve(text.size());
  for (char c : text) name.push_back(ascii_lower(c));
  if (name.back() == '.') name.pop_back();
  if (name.empty() || name.size() > kMaxNameLength) return {std::nullopt, "'" + shown + "' is not a valid host name"};
  if (auto ip = parse_ip(name)) return {Host{Host::Kind::ip, ip->to_string(), ip}, {}};

  std::string_view last;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    const std::string_view label = std::string_view(name).substr(start, dot == std::string::npos ? dot : dot - start);
    if (label.empty() || label.size() > kMaxLabelLength || !std::all_of(label.begin(), label.end(), label_char))
      return {std::nullopt, "'" + shown + "' is not a valid host name"};
    last = label;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // Resolvers read these as IPv4 numbers (inet_aton): refuse rather than guess.
  if (all_digits(last) || hex_number(last))
    return {std::nullopt, "'" + shown + "' is a numeric address form, not a name"};
  return {Host{Host::Kind::name, std::move(name), std::nullopt}, {}};
}

Allowlist::Allowlist(const std::vector<std::string>& entries) {
  for (const auto& entry : entries) {
    const std::string where = "network allowlist entry '" + entry + "'";
    std::string_view e = entry;
    const bool wildcard = e.starts_with("*.");
    if (wildcard) e.remove_prefix(1);  // keep the dot: ".pypi.org"
    if (e.find('*') != std::string_view::npos)
      throw Error(where + ": '*' is only allowed as a leading '*.'", "write e.g. *.pythonhosted.org");
    const auto check = normalize_host(wildcard ? e.substr(1) : e);
    if (!check.host) throw Error(where + ": " + check.reason, "list a host name, *.domain or an IP address");
    if (!wildcard) {
      exact_.push_back(check.host->text);
      continue;
    }
    if (check.host->kind == Host::Kind::ip)
      throw Error(where + ": a wildcard over an address", "list the address itself");
    if (check.host->text.find('.') == std::string::npos)
      throw Error(where + ": wildcard over a whole top-level domain", "list the domains you need");
    suffixes_.push_back("." + check.host->text);
  }
}

bool Allowlist::allows(const Host& host) const {
  if (std::find(exact_.begin(), exact_.end(), host.text) != exact_.end()) return true;
  if (host.kind == Host::Kind::ip) return false;
  return std::any_of(suffixes_.begin(), suffixes_.end(),
                     [&](const std::string& s) { return host.text.size() > s.size() && host.text.ends_with(s); });
}

std::optional<std::string> special_range(const IpAddress& a) {
  if (a.v6) {
    if (auto inner = embedded_v4(a)) {
      if (auto r = special_range(*inner)) return *r + " (embedded in IPv6 " + a.to_string() + ")";
      return std::nullopt;
    }
  }
  // Most specific match first: ::/128 and ::1/128 before ::/96.
  const Range* best = nullptr;
  for (const auto& r : special_ranges())
    if (r.net.contains(a) && (!best || r.net.prefix > best->net.prefix)) best = &r;
  if (best) return std::string(best->name);
  return std::nullopt;
}

AddressPolicy::AddressPolicy(std::vector<Cidr> allowed_networks) : allowed_(std::move(allowed_networks)) {}

std::optional<std::string> AddressPolicy::deny_reason(const IpAddress& a) const {
  for (const auto& c : allowed_)
    if (c.contains(a)) return std::nullopt;
  auto range = special_range(a);
  if (!range) return std::nullopt;
  return "destination " + a.to_string() + " is " + *range + " and not in allow_networks";
}

}  // namespace sandboxrun::net
