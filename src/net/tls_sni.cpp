// ClientHello layout: RFC 8446 4.1.2 (and RFC 5246 7.4.1.2); server_name: RFC 6066 3;
// encrypted_client_hello: RFC 9849 (type 0xfe0d).
#include <set>

#include "net/net_parse.hpp"

namespace sandboxrun::net {

namespace {

constexpr uint8_t kHandshakeRecord = 22;
constexpr uint8_t kClientHello = 1;
constexpr size_t kMaxRecordPayload = (1 << 14) + 2048;  // TLSCiphertext bound; plaintext is 2^14
constexpr uint16_t kServerNameExt = 0;
constexpr uint16_t kEchExt = 0xfe0d;
constexpr size_t kMaxHostName = 255;

// Bounds-checked reader: every read fails once past the end instead of trusting lengths.
class Reader {
 public:
  explicit Reader(std::string_view d) : d_(d) {}
  bool u8(uint8_t& v) {
    if (d_.size() < 1) return false;
    v = static_cast<uint8_t>(d_[0]);
    d_.remove_prefix(1);
    return true;
  }
  bool u16(uint16_t& v) {
    if (d_.size() < 2) return false;
    v = static_cast<uint16_t>(static_cast<uint8_t>(d_[0]) << 8 | static_cast<uint8_t>(d_[1]));
    d_.remove_prefix(2);
    return true;
  }
  bool bytes(size_t n, std::string_view& out) {
    if (d_.size() < n) return false;
    out = d_.substr(0, n);
    d_.remove_prefix(n);
    return true;
  }
  // A vector with a 1- or 2-byte length prefix.
  bool vec8(std::string_view& out) {
    uint8_t n = 0;
    return u8(n) && bytes(n, out);
  }
  bool vec16(std::string_view& out) {
    uint16_t n = 0;
    return u16(n) && bytes(n, out);
  }
  bool empty() const { return d_.empty(); }

 private:
  std::string_view d_;
};

SniParse fail(SniStatus s, std::string error) { return {s, {}, std::move(error)}; }

SniParse parse_server_name(std::string_view ext) {
  Reader r(ext);
  std::string_view list;
  if (!r.vec16(list) || !r.empty() || list.empty()) return fail(SniStatus::malformed, "malformed server_name extension");
  Reader lr(list);
  std::string name;
  while (!lr.empty()) {
    uint8_t type = 0;
    std::string_view value;
    if (!lr.u8(type) || !lr.vec16(value)) return fail(SniStatus::malformed, "malformed server_name entry");
    if (type != 0) continue;  // only host_name (0) is defined; unknown types carry no host
    if (!name.empty()) return fail(SniStatus::malformed, "more than one host_name in server_name");
    if (value.empty() || value.size() > kMaxHostName) return fail(SniStatus::malformed, "bad SNI host_name length");
    name = value;
  }
  if (name.empty()) return fail(SniStatus::absent, "server_name extension without a host_name");
  return {SniStatus::found, std::move(name), {}};
}

SniParse parse_hello_body(std::string_view body) {
  Reader r(body);
  uint16_t version = 0;
  std::string_view random, session, suites, compression, extensions;
  if (!r.u16(version) || !r.bytes(32, random) || !r.vec8(session) || session.size() > 32 || !r.vec16(suites) ||
      suites.size() < 2 || suites.size() % 2 != 0 || !r.vec8(compression) || compression.empty())
    return fail(SniStatus::malformed, "malformed ClientHello");
  if (r.empty()) return fail(SniStatus::absent, "ClientHello without extensions");
  if (!r.vec16(extensions) || !r.empty()) return fail(SniStatus::malformed, "malformed ClientHello extensions");

  Reader er(extensions);
  std::set<uint16_t> seen;
  SniParse sni = fail(SniStatus::absent, "ClientHello without server_name (SNI)");
  bool ech = false;
  while (!er.empty()) {
    uint16_t type = 0;
    std::string_view data;
    if (!er.u16(type) || !er.vec16(data)) return fail(SniStatus::malformed, "malformed ClientHello extension");
    if (!seen.insert(type).second) return fail(SniStatus::malformed, "duplicate ClientHello extension " + std::to_string(type));
    if (type == kEchExt) ech = true;
    if (type == kServerNameExt) {
      sni = parse_server_name(data);
      if (sni.status == SniStatus::malformed) return sni;
    }
  }
  if (ech) return fail(SniStatus::ech, "Encrypted ClientHello (ECH) hides the real server name");
  return sni;
}

}  // namespace

SniParse parse_client_hello_sni(std::string_view data) {
  // Reassemble the handshake message from consecutive handshake records.
  std::string handshake;
  bool first = true;
  while (true) {
    if (handshake.size() >= 4) {
      const size_t len = static_cast<size_t>(static_cast<uint8_t>(handshake[1])) << 16 |
                         static_cast<size_t>(static_cast<uint8_t>(handshake[2])) << 8 |
                         static_cast<uint8_t>(handshake[3]);
      if (static_cast<uint8_t>(handshake[0]) != kClientHello) return fail(SniStatus::malformed, "first handshake message is not a ClientHello");
      if (len > kMaxClientHello) return fail(SniStatus::malformed, "ClientHello larger than " + std::to_string(kMaxClientHello) + " bytes");
      if (handshake.size() >= 4 + len) return parse_hello_body(std::string_view(handshake).substr(4, len));
    }
    if (data.size() < 5) {
      if (first && !data.empty() && static_cast<uint8_t>(data[0]) != kHandshakeRecord)
        return fail(SniStatus::not_tls, "not a TLS handshake");
      return {};
    }
    const auto type = static_cast<uint8_t>(data[0]);
    const auto major = static_cast<uint8_t>(data[1]);
    const size_t len = static_cast<size_t>(static_cast<uint8_t>(data[3])) << 8 | static_cast<uint8_t>(data[4]);
    if (type != kHandshakeRecord || major != 3)
      return fail(first ? SniStatus::not_tls : SniStatus::malformed, first ? "not a TLS handshake" : "ClientHello interrupted by a non-handshake record");
    if (len == 0 || len > kMaxRecordPayload) return fail(SniStatus::malformed, "bad TLS record length");
    if (data.size() < 5 + len) return {};
    handshake.append(data.substr(5, len));
    data.remove_prefix(5 + len);
    first = false;
  }
}

}  // namespace sandboxrun::net
