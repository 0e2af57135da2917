// Fuzzes the proxy's request-head parser and the request interpretation behind it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "net/net_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sandboxrun::net;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto parsed = parse_request_head(input);
  if (parsed.status != ParseStatus::complete) return 0;
  if (parsed.head.size > input.size() || parsed.head.size > kMaxRequestHead) __builtin_trap();
  const auto check = interpret_request(parsed.head);
  if (!check.request) {
    if (check.status == 0 || check.error.empty()) __builtin_trap();
    return 0;
  }
  // Whatever is forwarded must itself be a well-formed head for the same request.
  const auto out = upstream_head(parsed.head, *check.request);
  // (Host and Connection are added, so a head at the header-count bound may exceed it.)
  if (check.request->kind == ProxyRequest::Kind::http && parsed.head.headers.size() + 2 <= kMaxHeaders) {
    const auto again = parse_request_head(out, out.size() + 1);
    if (again.status != ParseStatus::complete || again.head.size != out.size() ||
        again.head.target != check.request->path)
      __builtin_trap();
  }
  return 0;
}
