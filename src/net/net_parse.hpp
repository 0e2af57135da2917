// Parsers of what the sandbox sends the egress proxy: an HTTP/1.x proxy request head and, inside a
// CONNECT tunnel, the TLS ClientHello whose SNI must name the CONNECT host. Both work on bytes
// received so far, are bounded, and never trust a length field beyond the data they hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/net_policy.hpp"

namespace sandboxrun::net {

inline constexpr size_t kMaxRequestHead = 16 * 1024;
inline constexpr size_t kMaxHeaders = 100;
inline constexpr size_t kMaxClientHello = 64 * 1024;

struct HttpHeader {
  std::string name;
  std::string value;  // surrounding whitespace removed
};

struct RequestHead {
  std::string method;
  std::string target;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<HttpHeader> headers;
  size_t size = 0;  // bytes of the head including the empty line

  // Every value of header `name`, compared case-insensitively.
  std::vector<std::string_view> values(std::string_view name) const;
};

enum class ParseStatus { incomplete, complete, invalid, too_large };

struct HeadParse {
  ParseStatus status = ParseStatus::incomplete;
  RequestHead head;   // valid when complete
  std::string error;  // set when invalid or too_large
};

// Strict HTTP/1.x request head: CRLF line ends, single spaces in the request line, token header
// names, no obsolete line folding, no control characters. `data` may hold bytes past the head.
HeadParse parse_request_head(std::string_view data, size_t max_bytes = kMaxRequestHead);

// A request the proxy can act on.
struct ProxyRequest {
  enum class Kind { connect, http };
  Kind kind = Kind::http;
  Host host;
  uint16_t port = 0;
  std::string authority;        // normalised "host[:port]" for the upstream Host header
  std::string path;             // origin-form target (http only)
  uint64_t content_length = 0;  // request body bytes to forward (http only)
};

struct RequestCheck {
  std::optional<ProxyRequest> request;
  int status = 0;      // HTTP status to answer when request is empty: 400, 403, 501
  std::string error;   // why, for the client and the record
  std::string host;    // best known host and port, for the record
  uint16_t port = 0;
};

// Interprets a proxy request: "CONNECT host:port" or an absolute-form "http://" URI whose Host
// header (if any) names the same host and port. Refuses userinfo, fragments, https:// (that is
// what CONNECT is for), Transfer-Encoding request bodies, and hosts normalize_host refuses.
RequestCheck interpret_request(const RequestHead& head);

// The head sent upstream for a plain HTTP request: origin-form target, Host from the URI,
// hop-by-hop and Proxy-* headers dropped, and "Connection: close" (one request per connection).
std::string upstream_head(const RequestHead& head, const ProxyRequest& req);

enum class SniStatus {
  incomplete,  // need more bytes
  found,       // server_name holds the SNI host name
  absent,      // a complete ClientHello without a server_name extension
  not_tls,     // the first bytes are not a TLS handshake record
  malformed,   // a broken or oversized ClientHello
  ech,         // an Encrypted ClientHello, whose real SNI cannot be checked
};

struct SniParse {
  SniStatus status = SniStatus::incomplete;
  std::string server_name;
  std::string error;
};

// Reads the SNI host name from the TLS record(s) carrying a ClientHello (fragmented across
// records or not). Bytes after the ClientHello are ignored.
SniParse parse_client_hello_sni(std::string_view data);

}  // namespace sandboxrun::net
