// Canonical serialization, record hashing (plain: common/sha256; keyed: OpenSSL HMAC) and the
// strict canonical-JSON scanner that verify, tail and repair use instead of a full JSON parser
// (it is several times faster and rejects anything canonical() could not have produced).
#include "audit/audit_format.hpp"

#include <openssl/core_names.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "common/libcrypto.hpp"
#include "common/sha256.hpp"
#include "common/utf8.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::audit {

std::string canonical(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

[[noreturn]] void openssl_fail(const char* what) {
  throw Error(std::string("OpenSSL: ") + what + " failed",
              "check that libcrypto is installed and supports SHA-256/HMAC");
}

}  // namespace

struct RecordHasher::Impl {
  std::string joined;  // plain chain: the hashed spans, reused between records
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* mac_ctx = nullptr;

  ~Impl() {
    // The plain chain never loads libcrypto: nothing to free, and no reason to load it now.
    if (mac_ctx) libcrypto().EVP_MAC_CTX_free(mac_ctx);
    if (mac) libcrypto().EVP_MAC_free(mac);
  }
};

// The plain chain needs no OpenSSL: fetching its SHA-256 costs about half a millisecond of
// provider set-up in every process that opens a log.
RecordHasher::RecordHasher() : impl_(std::make_unique<Impl>()) {}

RecordHasher::RecordHasher(std::string_view key) : impl_(std::make_unique<Impl>()) {
  const LibCrypto& crypto = libcrypto();
  impl_->mac = crypto.EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!impl_->mac) openssl_fail("HMAC fetch");
  impl_->mac_ctx = crypto.EVP_MAC_CTX_new(impl_->mac);
  if (!impl_->mac_ctx) openssl_fail("HMAC context");
  char digest_name[] = "SHA256";
  OSSL_PARAM params[] = {crypto.OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                         crypto.OSSL_PARAM_construct_end()};
  if (crypto.EVP_MAC_init(impl_->mac_ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                   params) != 1)
    openssl_fail("HMAC-SHA256 init");
}

RecordHasher::RecordHasher(RecordHasher&&) noexcept = default;
RecordHasher& RecordHasher::operator=(RecordHasher&&) noexcept = default;
RecordHasher::~RecordHasher() = default;

bool RecordHasher::keyed() const noexcept { return impl_->mac_ctx != nullptr; }

HexDigest RecordHasher::digest(std::string_view a, std::string_view b) {
  unsigned char raw[EVP_MAX_MD_SIZE];
  if (impl_->mac_ctx) {
    const LibCrypto& crypto = libcrypto();
    size_t len = 0;
    // Re-initialising with a null key keeps the key and resets the state.
    if (crypto.EVP_MAC_init(impl_->mac_ctx, nullptr, 0, nullptr) != 1 ||
        crypto.EVP_MAC_update(impl_->mac_ctx, reinterpret_cast<const unsigned char*>(a.data()), a.size()) != 1 ||
        crypto.EVP_MAC_update(impl_->mac_ctx, reinterpret_cast<const unsigned char*>(b.data()), b.size()) != 1 ||
        crypto.EVP_MAC_final(impl_->mac_ctx, raw, &len, sizeof raw) != 1 || len != 32)
      openssl_fail("HMAC-SHA256");
  } else {
    impl_->joined.assign(a);
    impl_->joined.append(b);
    const std::string d = sha256_raw(impl_->joined);
    std::memcpy(raw, d.data(), 32);
  }
  HexDigest out;
  hex_into(std::string_view(reinterpret_cast<const char*>(raw), 32), out.data());
  return out;
}

std::string key_id(std::string_view key) {
  std::string input = "sandboxrun-audit-kid:";
  input.append(key);
  return sha256_hex(input).substr(0, 16);
}

bool parse_u64(std::string_view text, uint64_t& out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

namespace {

// Bytes that end the fast path of a string: quote, backslash, control and non-ASCII.
constexpr std::array<bool, 256> kStringStop = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = c < 0x20 || c >= 0x80 || c == '"' || c == '\\';
  return t;
}();

constexpr std::array<bool, 256> kLowerHex = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  return t;
}();

// Whether any of the 8 bytes in `w` is a quote, a backslash, a control or a non-ASCII byte
// (SWAR bit tricks, so plain string bytes are skipped a word at a time).
constexpr bool word_has_stop(uint64_t w) {
  constexpr uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  auto has_zero = [](uint64_t v) { return (v - ones) & ~v & highs; };
  uint64_t less_than_space = (w - ones * 0x20) & ~w & highs;
  return (less_than_space | has_zero(w ^ (ones * '"')) | has_zero(w ^ (ones * '\\')) | (w & highs)) != 0;
}

// Appends the body of a canonical string literal for `s` (what nlohmann's dump_escaped writes
// with ensure_ascii=false): runs of plain bytes are copied whole. Returns false, having
// appended an unspecified prefix, when `s` is not valid UTF-8.
bool append_escaped(std::string& out, std::string_view s) {
  const auto* d = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0, run = 0;  // bytes [run, i) are still to be copied as they are
  for (;;) {
    while (n - i >= 8) {
      uint64_t w;
      std::memcpy(&w, d + i, 8);
      if (word_has_stop(w)) break;
      i += 8;
    }
    while (i < n && !kStringStop[d[i]]) ++i;
    if (i == n) break;
    unsigned char c = d[i];
    if (c >= 0x80) {
      size_t len = utf8_len(d + i, n - i);
      if (len == 0) return false;
      i += len;  // non-ASCII is written raw
      continue;
    }
    out.append(s.data() + run, i - run);
    switch (c) {
      case '"': out.append("\\\"", 2); break;
      case '\\': out.append("\\\\", 2); break;
      case '\b': out.append("\\b", 2); break;
      case '\f': out.append("\\f", 2); break;
      case '\n': out.append("\\n", 2); break;
      case '\r': out.append("\\r", 2); break;
      case '\t': out.append("\\t", 2); break;
      default: {
        char esc[6] = {'\\', 'u', '0', '0'};
        hex_into(std::string_view(reinterpret_cast<const char*>(&c), 1), esc + 4);
        out.append(esc, 6);
      }
    }
    run = ++i;
  }
  out.append(s.data() + run, n - run);
  return true;
}

template <typename Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;  // 24 bytes hold any 64-bit integer
  out.append(buf, static_cast<size_t>(end - buf));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase hex is not canonical
}

// Decodes a canonical string body (only the escapes the scanner admits).
std::string decode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\') {
      out.push_back(raw[i]);
      continue;
    }
    char e = raw[++i];
    switch (e) {
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u':
        out.push_back(static_cast<char>(hex_value(raw[i + 3]) * 16 + hex_value(raw[i + 4])));
        i += 4;
        break;
      default: out.push_back(e); break;  // " and backslash
    }
  }
  return out;
}

class Scanner {
 public:
  Scanner(std::string_view text, std::vector<Member>& members, std::string& error)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), members_(members),
        error_(error) {}

  bool run() {
    if (p_ == end_ || *p_ != '{') return fail("a record must be a JSON object");
    if (!object(0, true)) return false;
    if (p_ != end_) return fail("unexpected bytes after the record");
    return true;
  }

 private:
  bool fail(const char* what) {
    error_ = what;
    error_ += " (at byte ";
    error_ += std::to_string(offset());
    error_ += ")";
    return false;
  }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }

  bool value(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    if (p_ == end_) return fail("value expected");
    switch (*p_) {
      case '{': return object(depth, false);
      case '[': return array(depth);
      case '"': {
        std::string_view raw;
        bool esc = false;
        return string(raw, esc);
      }
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0)
      return fail("invalid literal");
    p_ += word.size();
    return true;
  }

  bool object(int depth, bool top) {
    ++p_;  // '{'
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    std::string_view prev_key;
    bool prev_esc = false, have_prev = false;
    for (;;) {
      if (p_ == end_ || *p_ != '"') return fail("object key expected");
      std::string_view key;
      bool esc = false;
      if (!string(key, esc)) return false;
      if (have_prev && !key_less(prev_key, prev_esc, key, esc))
        return fail("object keys not in canonical order or duplicated");
      prev_key = key;
      prev_esc = esc;
      have_prev = true;
      if (p_ == end_ || *p_ != ':') return fail("':' expected");
      ++p_;
      const char* vstart = p_;
      if (!value(depth + 1)) return false;
      if (top) members_.push_back({key, std::string_view(vstart, static_cast<size_t>(p_ - vstart))});
      if (p_ == end_) return fail("unterminated object");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      return fail("',' or '}' expected");
    }
  }

  static bool key_less(std::string_view a, bool a_esc, std::string_view b, bool b_esc) {
    if (!a_esc && !b_esc) {
      // Most neighbouring keys differ in their first byte; skip the memcmp call for those.
      if (!a.empty() && !b.empty() && a[0] != b[0])
        return static_cast<unsigned char>(a[0]) < static_cast<unsigned char>(b[0]);
      return a < b;
    }
    return decode(a) < decode(b);
  }

  bool array(int depth) {
    ++p_;  // '['
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      if (!value(depth + 1)) return false;
      if (p_ == end_) return fail("unterminated array");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      return fail("',' or ']' expected");
    }
  }

  bool string(std::string_view& raw, bool& has_escape) {
    ++p_;  // '"'
    const char* start = p_;
    for (;;) {
      while (end_ - p_ >= 8) {
        uint64_t w;
        std::memcpy(&w, p_, 8);
        if (word_has_stop(w)) break;
        p_ += 8;
      }
      while (p_ != end_ && !kStringStop[static_cast<unsigned char>(*p_)]) ++p_;
      if (p_ == end_) return fail("unterminated string");
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        raw = std::string_view(start, static_cast<size_t>(p_ - start));
        ++p_;
        return true;
      }
      if (c == '\\') {
        has_escape = true;
        if (!escape()) return false;
      } else if (c < 0x20) {
        return fail("unescaped control character in string");
      } else if (!utf8()) {
        return false;
      }
    }
  }

  // The escapes nlohmann's dump writes, and no others.
  bool escape() {
    if (end_ - p_ < 2) return fail("truncated escape");
    char e = p_[1];
    if (e == '"' || e == '\\' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
      p_ += 2;
      return true;
    }
    if (e != 'u' || end_ - p_ < 6) return fail("non-canonical escape");
    int d[4];
    for (int i = 0; i < 4; ++i) {
      d[i] = hex_value(p_[2 + i]);
      if (d[i] < 0) return fail("non-canonical \\u escape");
    }
    int cp = d[0] << 12 | d[1] << 8 | d[2] << 4 | d[3];
    if (cp >= 0x20 || cp == '\b' || cp == '\f' || cp == '\n' || cp == '\r' || cp == '\t')
      return fail("non-canonical \\u escape");
    p_ += 6;
    return true;
  }

  bool utf8() {
    const size_t len = utf8_len(reinterpret_cast<const unsigned char*>(p_), static_cast<size_t>(end_ - p_));
    if (len == 0) return fail("invalid UTF-8 in string");
    p_ += len;
    return true;
  }

  // JSON number grammar, then canonical form: integers must be what nlohmann parses as an
  // integer (so they round-trip), floats must equal their shortest round-trip dump.
  bool number() {
    const char* start = p_;
    bool negative = false, is_float = false;
    if (*p_ == '-') {
      negative = true;
      ++p_;
    }
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail("invalid value");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != end_ && *p_ == '.') {
      is_float = true;
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail("invalid number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      is_float = true;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail("invalid number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    std::string_view text(start, static_cast<size_t>(p_ - start));
    if (!is_float) {
      if (negative) {
        int64_t v = 0;
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || ptr != p_ || v == 0) return fail("non-canonical integer");
      } else {
        uint64_t v = 0;
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || ptr != p_) return fail("integer out of range");
      }
      return true;
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (ec != std::errc() || ptr != p_ || !std::isfinite(d) || nlohmann::json(d).dump() != text)
      return fail("non-canonical number");
    return true;
  }

 private:
  const char* begin_;
  const char* p_;
  const char* end_;
  std::vector<Member>& members_;
  std::string& error_;
};

bool is_hex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  bool ok = true;
  for (char c : s) ok &= kLowerHex[static_cast<unsigned char>(c)];
  return ok;
}

// The body of a string value, or nullopt when it is not a string.
std::optional<std::string_view> string_body(const Member* m) {
  if (!m || m->value.size() < 2 || m->value.front() != '"') return std::nullopt;
  return m->value.substr(1, m->value.size() - 2);
}

}  // namespace

void append_canonical_string(std::string& out, std::string_view s, CanonicalInfo& info) {
  size_t start = out.size();
  out.push_back('"');
  if (append_escaped(out, s)) {
    out.push_back('"');
    return;
  }
  // Invalid UTF-8: let nlohmann's replacement define the bytes.
  out.resize(start);
  out += canonical(nlohmann::json(s));
  info.fallback = true;
}

void append_canonical(std::string& out, const nlohmann::json& j, CanonicalInfo& info, int depth) {
  using value_t = nlohmann::json::value_t;
  if (depth > info.depth) info.depth = depth;
  switch (j.type()) {
    case value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, value] : j.get_ref<const nlohmann::json::object_t&>()) {
        if (!first) out.push_back(',');
        first = false;
        append_canonical_string(out, key, info);
        out.push_back(':');
        append_canonical(out, value, info, depth + 1);
      }
      out.push_back('}');
      return;
    }
    case value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& value : j.get_ref<const nlohmann::json::array_t&>()) {
        if (!first) out.push_back(',');
        first = false;
        append_canonical(out, value, info, depth + 1);
      }
      out.push_back(']');
      return;
    }
    case value_t::string: append_canonical_string(out, j.get_ref<const std::string&>(), info); return;
    case value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case value_t::null: out += "null"; return;
    case value_t::number_integer: append_int(out, j.get<int64_t>()); return;
    case value_t::number_unsigned: append_int(out, j.get<uint64_t>()); return;
    case value_t::number_float: out += canonical(j); return;  // shortest round-trip form
    default:  // binary, discarded
      out += canonical(j);
      info.fallback = true;
      return;
  }
}

bool LineScanner::scan(std::string_view line) {
  members_.clear();
  error_.clear();
  return Scanner(line, members_, error_).run();
}

const Member* LineScanner::find(std::string_view key) const noexcept {
  for (const Member& m : members_)
    if (m.key == key) return &m;
  return nullptr;
}

bool parse_record(std::string_view line, LineScanner& scanner, RecordFields& out,
                  std::string& error) {
  if (line.size() > kMaxRecordBytes) {
    error = "record longer than " + std::to_string(kMaxRecordBytes) + " bytes";
    return false;
  }
  if (!scanner.scan(line)) {
    error = scanner.error();
    return false;
  }
  // One pass over the members for the chain fields.
  const Member *seq = nullptr, *ts_m = nullptr, *run_m = nullptr, *event_m = nullptr,
               *prev_m = nullptr, *hash_m = nullptr, *kid_m = nullptr;
  for (const Member& m : scanner.members()) {
    switch (m.key.size()) {
      case 2: if (m.key == "ts") ts_m = &m; break;
      case 3:
        if (m.key == "seq") seq = &m;
        else if (m.key == "kid") kid_m = &m;
        break;
      case 4:
        if (m.key == "prev") prev_m = &m;
        else if (m.key == "hash") hash_m = &m;
        break;
      case 5: if (m.key == "event") event_m = &m; break;
      case 6: if (m.key == "run_id") run_m = &m; break;
      default: break;
    }
  }
  if (!seq || !parse_u64(seq->value, out.seq) || out.seq == 0) {
    error = "missing or invalid 'seq' (expected an integer >= 1)";
    return false;
  }
  auto ts = string_body(ts_m);
  auto run_id = string_body(run_m);
  auto event = string_body(event_m);
  auto prev = string_body(prev_m);
  auto hash = string_body(hash_m);
  if (!ts || !run_id || !event || event->empty()) {
    error = "missing or invalid 'ts', 'run_id' or 'event'";
    return false;
  }
  if (!prev || !is_hex(*prev, kHashHex) || !hash || !is_hex(*hash, kHashHex)) {
    error = "missing or invalid 'prev' or 'hash' (expected 64 lowercase hex digits)";
    return false;
  }
  out.kid = {};
  if (kid_m) {
    auto k = string_body(kid_m);
    if (!k || !is_hex(*k, 16)) {
      error = "invalid 'kid' (expected 16 lowercase hex digits)";
      return false;
    }
    out.kid = *k;
  }
  out.ts = *ts;
  out.run_id = *run_id;
  out.event = *event;
  out.prev = *prev;
  out.hash = *hash;
  // "event" < "hash" and both exist, so the hash member is never first: a comma precedes it.
  out.hash_pos = static_cast<size_t>(hash->data() - line.data()) - 9;
  return true;
}

}  // namespace sandboxrun::audit
