#include <algorithm>
#include <cstring>

#include "common/ascii.hpp"
#include "net/net_parse.hpp"

namespace sandboxrun::net {

namespace {

bool tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), tchar); }

bool visible(char c) { return c > 0x20 && c < 0x7f; }

// Header values: visible ASCII, space, tab and bytes >= 0x80; never other controls.
bool value_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}


bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string shown(std::string_view s) { return std::string(s.substr(0, 80)); }

HeadParse invalid(std::string error) { return {ParseStatus::invalid, {}, std::move(error)}; }

std::optional<std::string> check_request_line(std::string_view line, RequestHead& out) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return "malformed request line";
  const auto method = line.substr(0, sp1);
  const auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const auto version = line.substr(sp2 + 1);
  if (!token(method)) return "malformed method";
  if (target.empty() || !std::all_of(target.begin(), target.end(), visible)) return "malformed request target";
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return "unsupported HTTP version '" + shown(version) + "'";
  out.method = method;
  out.target = target;
  out.version = version;
  return std::nullopt;
}

struct Authority {
  std::string host;  // as written, brackets kept
  uint16_t port = 0;
  std::string error;
};

Authority split_authority(std::string_view text, uint16_t default_port) {
  Authority a;
  if (text.find('@') != std::string_view::npos) return {std::string(text), 0, "userinfo in the authority is refused"};
  std::string_view host = text;
  std::string_view port;
  bool has_port = false;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return {std::string(text), 0, "unterminated IPv6 literal"};
    host = text.substr(0, close + 1);
    const auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return {std::string(text), 0, "malformed authority"};
      port = rest.substr(1);
      has_port = true;
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    has_port = true;
    if (host.find(':') != std::string_view::npos) return {std::string(text), 0, "IPv6 literal without brackets"};
  }
  a.host = host;
  if (!has_port) {
    if (default_port == 0) return {a.host, 0, "port missing in '" + shown(text) + "'"};
    a.port = default_port;
    return a;
  }
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {a.host, 0, "malformed port in '" + shown(text) + "'"};
  const unsigned long p = std::stoul(std::string(port));
  if (p == 0 || p > 65535) return {a.host, 0, "port out of range in '" + shown(text) + "'"};
  a.port = static_cast<uint16_t>(p);
  return a;
}

RequestCheck refuse(int status, std::string error, std::string host = {}, uint16_t port = 0) {
  RequestCheck r;
  r.status = status;
  r.error = std::move(error);
  r.host = std::move(host);
  r.port = port;
  return r;
}

std::string host_for_header(const Host& h) { return h.ip && h.ip->v6 ? "[" + h.text + "]" : h.text; }

}  // namespace

std::vector<std::string_view> RequestHead::values(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& h : headers)
    if (iequals(h.name, name)) out.emplace_back(h.value);
  return out;
}

HeadParse parse_request_head(std::string_view data, size_t max_bytes) {
  const size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos || end + 4 > max_bytes) {
    if (data.size() >= max_bytes) return {ParseStatus::too_large, {}, "request head larger than " + std::to_string(max_bytes) + " bytes"};
    // Refuse garbage early instead of waiting for the timeout.
    const size_t eol = data.find("\r\n");
    if (eol != std::string_view::npos) {
      RequestHead scratch;
      if (auto err = check_request_line(data.substr(0, eol), scratch)) return invalid(*err);
    }
    return {};
  }
  HeadParse out;
  out.status = ParseStatus::complete;
  RequestHead& head = out.head;
  head.size = end + 4;
  const std::string_view text = data.substr(0, end + 2);  // every line ends with CRLF
  size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    const size_t eol = text.find("\r\n", pos);
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 2;
    if (line.find_first_of("\r\n") != std::string_view::npos) return invalid("bare CR or LF in request head");
    if (first) {
      if (auto err = check_request_line(line, head)) return invalid(*err);
      first = false;
      continue;
    }
    // A folded line (leading SP/HTAB, obsolete) fails here too: names are tokens.
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !token(line.substr(0, colon)))
      return invalid("malformed header line '" + shown(line) + "'");
    const auto value = line.substr(colon + 1);
    if (!std::all_of(value.begin(), value.end(), value_char)) return invalid("control character in header value");
    if (head.headers.size() == kMaxHeaders) return invalid("more than " + std::to_string(kMaxHeaders) + " headers");
    head.headers.push_back({std::string(line.substr(0, colon)), std::string(trim(value))});
  }
  return out;
}

RequestCheck interpret_request(const RequestHead& head) {
  ProxyRequest req;
  Authority auth;
  if (head.method == "CONNECT") {
    req.kind = ProxyRequest::Kind::connect;
    auth = split_authority(head.target, 0);
  } else {
    constexpr std::string_view scheme = "http://";
    if (istarts_with(head.target, "https://"))
      return refuse(400, "https:// URIs are not proxied as plain requests; use CONNECT");
    if (!istarts_with(head.target, scheme))
      return refuse(400, "not a proxy request: expected CONNECT or an absolute http:// URI");
    const std::string_view rest = std::string_view(head.target).substr(scheme.size());
    if (rest.find('#') != std::string_view::npos) return refuse(400, "fragment in request target");
    const size_t path_start = std::min(rest.find('/'), rest.find('?'));
    const auto authority = rest.substr(0, path_start);
    if (authority.empty()) return refuse(400, "empty host in request URI");
    auth = split_authority(authority, 80);
    req.path = path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
    if (req.path.front() == '?') req.path.insert(0, "/");
  }
  if (!auth.error.empty()) return refuse(400, auth.error, auth.host, auth.port);
  auto check = normalize_host(auth.host);
  if (!check.host) return refuse(403, "host refused: " + check.reason, auth.host, auth.port);
  req.host = std::move(*check.host);
  req.port = auth.port;
  req.authority = host_for_header(req.host) + (req.port == 80 ? "" : ":" + std::to_string(req.port));

  if (req.kind == ProxyRequest::Kind::http) {
    const auto hosts = head.values("host");
    if (hosts.size() > 1) return refuse(400, "more than one Host header", req.host.text, req.port);
    if (hosts.size() == 1) {
      const auto h = split_authority(hosts[0], 80);
      const auto hn = h.error.empty() ? normalize_host(h.host) : HostCheck{};
      if (!hn.host || hn.host->text != req.host.text || h.port != req.port)
        return refuse(400, "Host header '" + shown(hosts[0]) + "' does not match the request URI", req.host.text, req.port);
    }
    if (!head.values("transfer-encoding").empty())
      return refuse(501, "request bodies with Transfer-Encoding are not supported", req.host.text, req.port);
    const auto lengths = head.values("content-length");
    for (const auto& l : lengths) {
      if (l.empty() || l.size() > 18 || !std::all_of(l.begin(), l.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
          l != lengths.front())
        return refuse(400, "malformed Content-Length", req.host.text, req.port);
    }
    if (!lengths.empty()) req.content_length = std::stoull(std::string(lengths.front()));
  }
  RequestCheck ok;
  ok.host = req.host.text;
  ok.port = req.port;
  ok.request = std::move(req);
  return ok;
}

std::string upstream_head(const RequestHead& head, const ProxyRequest& req) {
  // Hop-by-hop headers (RFC 9110 7.6.1) and those the client names in Connection.
  std::vector<std::string> drop = {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                   "proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade", "host"};
  for (const auto* name : {"connection", "proxy-connection"}) {
    for (auto v : head.values(name)) {
      while (!v.empty()) {
        const size_t comma = v.find(',');
        const auto item = trim(v.substr(0, comma));
        if (!item.empty()) {
          std::string l;
          for (char c : item) l.push_back(ascii_lower(c));
          drop.push_back(std::move(l));
        }
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
    }
  }
  std::string out = head.method + " " + req.path + " " + head.version + "\r\nHost: " + req.authority + "\r\n";
  for (const auto& h : head.headers) {
    if (std::any_of(drop.begin(), drop.end(), [&](const std::string& d) { return iequals(h.name, d); })) continue;
    out += h.name + ": " + h.value + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

}  // namespace sandboxrun::net
