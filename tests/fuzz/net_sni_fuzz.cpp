// Fuzzes the TLS ClientHello/SNI parser and the host normalisation its result goes through.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "net/net_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sandboxrun::net;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto sni = parse_client_hello_sni(input);
  if (sni.status == SniStatus::found) {
    if (sni.server_name.empty() || sni.server_name.size() > 255) __builtin_trap();
    normalize_host(sni.server_name);
  }
  // The same bytes as a host from a request line.
  const auto host = normalize_host(input.substr(0, 300));
  if (host.host && host.host->kind == Host::Kind::name && host.host->text.size() > 253) __builtin_trap();
  return 0;
}
