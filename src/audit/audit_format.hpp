// Audit record format: canonical serialization, record hashing and the strict line scanner.
// The format is specified in docs/audit.md; this header is its single implementation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sha256.hpp"

namespace sandboxrun::audit {

inline constexpr size_t kHashHex = 64;
// `prev` of the first record of a chain.
inline constexpr std::string_view kGenesisPrev =
    "0000000000000000000000000000000000000000000000000000000000000000";
// Largest record line (without its newline) a writer emits and a reader accepts.
inline constexpr size_t kMaxRecordBytes = 1 << 20;
// Top-level keys the log itself fills in; event fields may not use them.
inline constexpr std::array<std::string_view, 7> kReservedKeys = {"event", "hash", "kid", "prev",
                                                                  "run_id", "seq", "ts"};

using HexDigest = std::array<char, kHashHex>;

// Canonical serialization: compact nlohmann dump (no whitespace), object keys sorted bytewise,
// UTF-8 output with only ", \, and control characters escaped (lowercase \u00xx), invalid
// UTF-8 replaced by U+FFFD. dump(parse(canonical(j))) == canonical(j).
std::string canonical(const nlohmann::json& j);

// Deepest nesting the scanner accepts: a top-level member's value is at depth 1.
inline constexpr int kMaxDepth = 64;

// What append_canonical met on its way.
struct CanonicalInfo {
  bool fallback = false;  // a value went through nlohmann's dump (invalid UTF-8, binary)
  int depth = 0;          // deepest value, counted as the scanner does
};

// Appends canonical(j) to `out` (the same bytes) without building a temporary string:
// strings that are valid UTF-8, integers, objects and arrays are written directly; floats,
// strings with invalid UTF-8 (replaced by U+FFFD) and binary values are written by canonical()
// itself. `depth` is the depth of `j` as the scanner counts it.
void append_canonical(std::string& out, const nlohmann::json& j, CanonicalInfo& info, int depth = 0);
// Appends canonical(nlohmann::json(s)): a JSON string literal.
void append_canonical_string(std::string& out, std::string_view s, CanonicalInfo& info);

// SHA-256 (unkeyed) or HMAC-SHA256 (keyed) of the concatenation of up to two spans, as
// lowercase hex. Reuses one OpenSSL context, so one hasher per thread.
class RecordHasher {
 public:
  RecordHasher();                                // SHA-256
  explicit RecordHasher(std::string_view key);  // HMAC-SHA256 with `key`
  RecordHasher(RecordHasher&&) noexcept;
  RecordHasher& operator=(RecordHasher&&) noexcept;
  ~RecordHasher();

  HexDigest digest(std::string_view a, std::string_view b = {});
  bool keyed() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

using sandboxrun::sha256_hex;  // shared with the config digest (sandboxrun/sha256.hpp)
// Key identity written as `kid` in keyed records: the first 16 hex digits of
// SHA-256("sandboxrun-audit-kid:" + key). Lets verify tell a wrong key from a forgery.
std::string key_id(std::string_view key);

// One top-level member of a scanned line: raw key (between the quotes, still escaped) and
// raw JSON value text.
struct Member {
  std::string_view key;
  std::string_view value;
};

// Strict scanner for canonical JSON objects. Accepts exactly the bytes canonical() produces
// for some object: no whitespace, keys strictly increasing, canonical strings and numbers,
// valid UTF-8, nesting at most 64 deep. Keeps its member buffer between calls.
class LineScanner {
 public:
  bool scan(std::string_view line);
  const std::string& error() const noexcept { return error_; }
  const std::vector<Member>& members() const noexcept { return members_; }
  // Raw value of a top-level key (keys looked up here never need escaping).
  const Member* find(std::string_view key) const noexcept;

 private:
  std::vector<Member> members_;
  std::string error_;
};

// The chain fields of one record line, as views into the line.
struct RecordFields {
  uint64_t seq = 0;
  std::string_view ts, run_id, event, prev, hash, kid;  // kid empty when unkeyed
  // The hash covers line[0, hash_pos) + line[hash_pos + kHashMemberLen, end): the line with
  // its `,"hash":"<64 hex>"` member removed, which is canonical() of the record sans hash.
  size_t hash_pos = 0;
};
inline constexpr size_t kHashMemberLen = 74;  // ,"hash":"<64 hex>"

// Scans `line` (no trailing newline) and extracts the chain fields; on failure returns false
// and sets `error` to what is wrong.
bool parse_record(std::string_view line, LineScanner& scanner, RecordFields& out,
                  std::string& error);

// The two spans a record's hash covers (see RecordFields::hash_pos).
inline std::pair<std::string_view, std::string_view> hashed_spans(std::string_view line,
                                                                  size_t hash_pos) {
  return {line.substr(0, hash_pos), line.substr(hash_pos + kHashMemberLen)};
}

// Unsigned decimal integer without leading zeros (a canonical JSON integer); nullopt else.
bool parse_u64(std::string_view text, uint64_t& out);

}  // namespace sandboxrun::audit
