// Canonical serialization, record hashing and the strict scanner against fixed vectors.
// The expected bytes and digests were computed independently with Python:
//   json.dumps(rec, sort_keys=True, separators=(',', ':'), ensure_ascii=False)
//   hashlib.sha256(c).hexdigest(); hmac.new(key, c, hashlib.sha256).hexdigest()
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "audit/audit_format.hpp"

namespace sandboxrun::audit {
namespace {

using nlohmann::json;

const std::string kKey = "0123456789abcdef0123456789abcdef";
const std::string kCanonical =
    R"({"code":{"name":"job.py","sha256":"cc42155088fca5730758db72b2a5bca33112a941dfaa2d43098ec422ce4ea213","size":9},)"
    R"("event":"run_start","limits":{"cpus":1.5,"memory_bytes":268435456},)"
    "\"note\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\xe2\x98\x83\","
    R"("prev":"0000000000000000000000000000000000000000000000000000000000000000",)"
    R"("run_id":"r1","seq":1,"trust_used":"untrusted","ts":"2024-01-02T03:04:05.000006Z"})";
const std::string kSha = "a3883e3ac5d3bb41b8dcadb4493efbe8ba4e43829eb55e3443e2a27440381c9c";
const std::string kHmac = "c852e2d1e0ccbe0016d5d184d893640181f816506585c5bc6232349aedeeabef";

json fixed_record() {
  // Built in a different key order on purpose: canonical() must sort.
  json j;
  j["ts"] = "2024-01-02T03:04:05.000006Z";
  j["seq"] = 1;
  j["run_id"] = "r1";
  j["event"] = "run_start";
  j["prev"] = std::string(kGenesisPrev);
  j["trust_used"] = "untrusted";
  j["limits"] = {{"memory_bytes", 268435456}, {"cpus", 1.5}};
  j["note"] = "a\"b\\c\n\x01\xc3\xa9\xe2\x98\x83";
  j["code"] = {{"size", 9}, {"sha256", sha256_hex("print(1)\n")}, {"name", "job.py"}};
  return j;
}

std::string hex(const HexDigest& d) { return std::string(d.data(), d.size()); }

TEST(AuditFormat, CanonicalSerializationFixedVector) {
  EXPECT_EQ(canonical(fixed_record()), kCanonical);
}

TEST(AuditFormat, HashFixedVectors) {
  RecordHasher sha;
  EXPECT_EQ(hex(sha.digest(kCanonical)), kSha);
  // Split input hashes the same as the concatenation.
  EXPECT_EQ(hex(sha.digest(kCanonical.substr(0, 10), kCanonical.substr(10))), kSha);
  RecordHasher mac(kKey);
  EXPECT_TRUE(mac.keyed());
  EXPECT_EQ(hex(mac.digest(kCanonical)), kHmac);
  EXPECT_EQ(hex(mac.digest(kCanonical)), kHmac);  // re-initialisation keeps the key
  EXPECT_EQ(key_id(kKey), "926481279aa68677");
}

TEST(AuditFormat, RecordLineHashesTheLineWithoutItsHashMember) {
  json j = fixed_record();
  j["hash"] = kSha;
  std::string line = canonical(j);
  LineScanner scan;
  RecordFields f;
  std::string err;
  ASSERT_TRUE(parse_record(line, scan, f, err)) << err;
  EXPECT_EQ(f.seq, 1u);
  EXPECT_EQ(f.event, "run_start");
  EXPECT_EQ(f.hash, kSha);
  EXPECT_EQ(f.prev, kGenesisPrev);
  auto [a, b] = hashed_spans(line, f.hash_pos);
  EXPECT_EQ(std::string(a) + std::string(b), kCanonical);
}

TEST(AuditFormat, ScannerAcceptsCanonicalOutput) {
  LineScanner scan;
  for (const json& j : {json::object(), fixed_record(),
                        json{{"a", json::array({1, -2, 0.1, 1e300, nullptr, true, false, "x"})},
                             {"b", {{"c", json::array()}, {"d", json::object()}}},
                             {"\x7f", "\xf0\x9f\x98\x80"},
                             {"big", 18446744073709551615ull},
                             {"neg", -9223372036854775807ll - 1},
                             {"k\"q", 1},
                             {"k", 2}}}) {
    std::string text = canonical(j);
    EXPECT_TRUE(scan.scan(text)) << text << ": " << scan.error();
  }
}

TEST(AuditFormat, ScannerRejectsNonCanonicalJson) {
  LineScanner scan;
  for (std::string bad : {
           R"({"b":1,"a":2})",            // unsorted
           R"({"a":1,"a":2})",            // duplicate
           R"({"a": 1})",                 // whitespace
           R"({"a":01})",                 // leading zero
           R"({"a":-0})",                 // negative zero integer
           R"({"a":1.50})",               // non-shortest float
           R"({"a":1E5})",                // not nlohmann's float form
           R"({"a":18446744073709551616})",  // integer overflow
           R"({"a":"\u0041"})",           // needless escape
           R"({"a":"\/"})",               // needless escape
           R"({"a":"\u000A"})",           // uppercase / has a short form
           "{\"a\":\"\x01\"}",            // raw control character
           "{\"a\":\"\xc3\"}",            // truncated UTF-8
           "{\"a\":\"\xed\xa0\x80\"}",    // surrogate
           "{\"a\":\"\xc0\xaf\"}",        // overlong
           R"({"a":1})x",                 // trailing bytes
           R"([1])",                      // not an object
           R"({"a":tru})",
           R"({"a":[1,]})",
           R"({"a":"x)",
           "",
       }) {
    EXPECT_FALSE(scan.scan(bad)) << bad;
    EXPECT_FALSE(scan.error().empty());
  }
  std::string deep(100, '[');
  EXPECT_FALSE(scan.scan("{\"a\":" + deep + std::string(100, ']') + "}"));
}

// The writer serializes with append_canonical: it must give canonical()'s bytes for any value.
class RandomJson {
 public:
  explicit RandomJson(uint32_t seed) : rng_(seed) {}

  std::string text() {
    // Plain ASCII, escapes, DEL, valid multi-byte sequences and invalid ones.
    static const std::vector<std::string> pieces = {
        "a", "Z", "0", " ", "~", "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", std::string(1, '\0'),
        "\x01", "\x1f", "\x7f", "\xc2\x80", "\xc3\xa9", "\xdf\xbf", "\xe0\xa0\x80", "\xe2\x98\x83",
        "\xed\x9f\xbf", "\xef\xbf\xbd", "\xf0\x90\x80\x80", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf",
        "\x80", "\xbf", "\xc0\xaf", "\xc1", "\xc3", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xf5", "\xff", "\xe2\x98", "\xf0\x9f\x98", "plain text of some length"};
    std::string out;
    int n = pick(12);
    for (int i = 0; i < n; ++i) out += pieces[pick(static_cast<int>(pieces.size()))];
    return out;
  }

  json value(int depth) {
    switch (pick(depth > 4 ? 7 : 9)) {
      case 0: return nullptr;
      case 1: return pick(2) == 0;
      case 2: return static_cast<int64_t>(bits()) >> pick(64);
      case 3: return bits() >> pick(64);
      case 4: {
        uint64_t b = bits();
        double d;
        std::memcpy(&d, &b, sizeof d);  // any bit pattern: NaN, inf, denormals, -0.0
        return pick(2) ? d : static_cast<double>(static_cast<int64_t>(bits() >> pick(64))) / (1 + pick(1000));
      }
      case 5: return text();
      case 6: return pick(2) ? json::binary({1, 2, 3}, 7) : json::binary({0xff});
      case 7: {
        json a = json::array();
        for (int i = pick(5); i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (int i = pick(6); i > 0; --i) o[text()] = value(depth + 1);
        return o;
      }
    }
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  uint64_t bits() { return (static_cast<uint64_t>(rng_()) << 32) ^ rng_(); }
  std::mt19937 rng_;
};

TEST(AuditFormat, AppendCanonicalGivesCanonicalBytes) {
  auto check = [](const json& j) {
    std::string out = "prefix";
    CanonicalInfo info;
    append_canonical(out, j, info);
    ASSERT_EQ(out, "prefix" + canonical(j)) << j.dump(-1, ' ', true, json::error_handler_t::replace);
  };
  check(fixed_record());
  check(json::object());
  check(json{{"a", json::array({1, -2, 0.1, 1e300, nullptr, true, false, "x"})}, {"\x7f", "\xf0\x9f\x98\x80"}});
  RandomJson gen(20240501);
  for (int i = 0; i < 20000; ++i) check(gen.value(0));
  for (int i = 0; i < 20000; ++i) {
    std::string s = gen.text(), out;
    CanonicalInfo info;
    append_canonical_string(out, s, info);
    ASSERT_EQ(out, canonical(json(s))) << json(s).dump(-1, ' ', true, json::error_handler_t::replace);
  }
}

TEST(AuditFormat, AppendCanonicalReportsFallbackAndDepth) {
  CanonicalInfo plain;
  std::string out;
  append_canonical(out, json{{"a", "\xc3\xa9\n"}, {"b", json::array({1.5, 2})}}, plain);
  EXPECT_FALSE(plain.fallback);
  EXPECT_EQ(plain.depth, 2);
  CanonicalInfo invalid;
  append_canonical(out, json{{"a", "\xff"}}, invalid);
  EXPECT_TRUE(invalid.fallback);
  CanonicalInfo key;
  append_canonical(out, json{{"\xc3", 1}}, key);
  EXPECT_TRUE(key.fallback);
  json deep = 1;
  for (int i = 0; i < kMaxDepth; ++i) deep = json::array({deep});
  CanonicalInfo d;
  out.clear();
  append_canonical(out, json{{"v", deep}}, d);
  EXPECT_EQ(d.depth, kMaxDepth + 1);
  LineScanner scan;
  EXPECT_FALSE(scan.scan(out));  // the scanner's limit is the same
}

TEST(AuditFormat, ParseRecordRequiresChainFields) {
  LineScanner scan;
  RecordFields f;
  std::string err;
  json j = fixed_record();
  j["hash"] = kSha;
  for (const char* key : {"seq", "ts", "run_id", "event", "prev", "hash"}) {
    json k = j;
    k.erase(key);
    EXPECT_FALSE(parse_record(canonical(k), scan, f, err)) << key;
  }
  json upper = j;
  upper["hash"] = std::string(64, 'A');
  EXPECT_FALSE(parse_record(canonical(upper), scan, f, err));
  json zero = j;
  zero["seq"] = 0;
  EXPECT_FALSE(parse_record(canonical(zero), scan, f, err));
  // Chain fields all present, but the line is not canonical.
  std::string spaced = canonical(j);
  spaced.insert(spaced.find(':') + 1, " ");
  EXPECT_FALSE(parse_record(spaced, scan, f, err));
  EXPECT_NE(err.find("at byte"), std::string::npos) << err;
  json kid = j;
  kid["kid"] = "xyz";
  EXPECT_FALSE(parse_record(canonical(kid), scan, f, err));
}

}  // namespace
}  // namespace sandboxrun::audit
