// The compiled form of a RuleSet (a length-prefixed binary encoding of its rules; the index
// and regular expressions are rebuilt from it) and the cache that stores it. See
// assess_rules_cache.hpp for the safety rules of the cache directory.
#include "sandboxrun/assess_rules_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::assess {

namespace {

constexpr std::string_view kMagic = "SRRULES\x02";  // bump the last byte when the encoding changes
constexpr size_t kDigestHex = 64;
constexpr size_t kMaxCacheBytes = 64u << 20;

// SHA-256 (FIPS 180-4) without OpenSSL: initialising libcrypto's providers cost more than the
// rest of a cached rules load.
std::string digest_hex(std::string_view data) {
  static constexpr uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  auto block = [&](const unsigned char* p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    const uint32_t v[8] = {a, b, c, d, e, f, g, hh};
    for (int i = 0; i < 8; ++i) h[i] += v[i];
  };
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  size_t full = data.size() / 64 * 64;
  for (size_t i = 0; i < full; i += 64) block(bytes + i);
  // The tail, a 0x80 byte, zeros, and the length in bits (big-endian) in one or two blocks.
  unsigned char tail[128] = {};
  const size_t rest = data.size() - full;
  std::memcpy(tail, bytes + full, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest + 9 <= 64 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (size_t i = 0; i < tail_len; i += 64) block(tail + i);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint32_t v : h)
    for (int s = 28; s >= 0; s -= 4) out += hex[(v >> s) & 0xf];
  return out;
}

class Writer {
 public:
  void u32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  void opt_bool(const std::optional<bool>& b) { u32(b ? (*b ? 2 : 1) : 0); }
  void pattern(const std::optional<Pattern>& p) {
    u32(p ? 1 : 0);
    if (p) str(p->text);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Every read is bounds-checked; the first failure makes ok() false and later reads no-ops.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const noexcept { return ok_; }
  bool done() const noexcept { return ok_ && in_.empty(); }
  uint32_t u32() {
    uint32_t v = 0;
    if (!need(sizeof v)) return 0;
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return v;
  }
  std::string str() {
    const uint32_t n = u32();
    if (!need(n)) return {};
    std::string s(in_.substr(0, n));
    in_.remove_prefix(n);
    return s;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count());
    for (auto& s : v) s = str();
    return v;
  }
  // A count of items that each take at least 4 bytes: larger than the input means corruption.
  uint32_t count() {
    const uint32_t n = u32();
    if (n > in_.size() / 4) ok_ = false;
    return ok_ ? n : 0;
  }
  std::optional<bool> opt_bool() {
    const uint32_t v = u32();
    if (v > 2) ok_ = false;
    return v == 0 ? std::nullopt : std::optional<bool>(v == 2);
  }
  // The entry's checksum vouches that the text is what compile() validated when it was built.
  std::optional<Pattern> pattern() {
    if (u32() == 0 || !ok_) return std::nullopt;
    std::string text = str();
    if (!ok_) return std::nullopt;
    return Pattern::deferred(std::move(text));
  }
  uint32_t below(uint32_t limit) {
    const uint32_t v = u32();
    if (v >= limit) ok_ = false;
    return v;
  }

 private:
  bool need(size_t n) {
    if (ok_ && in_.size() >= n) return true;
    ok_ = false;
    return false;
  }
  std::string_view in_;
  bool ok_ = true;
};

// The cache directory as an open descriptor, or an explanation of why it cannot be trusted.
UniqueFd open_cache_dir(const std::filesystem::path& dir, std::string& why) {
  // Only the last two levels are created (~/.cache/sandboxrun); both private to the user.
  ::mkdir(dir.parent_path().c_str(), 0700);
  ::mkdir(dir.c_str(), 0700);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    why = "cannot open " + dir.string() + ": " + std::strerror(errno);
    return fd;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    why = dir.string() + " is not a directory private to this user (owner and mode 0700 or 0755 expected)";
    return UniqueFd();
  }
  return fd;
}

std::optional<std::string> read_entry(int dirfd, const std::string& name) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0 ||
      static_cast<uint64_t>(st.st_size) > kMaxCacheBytes)
    return std::nullopt;
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  return out;
}

bool write_entry(int dirfd, const std::string& name, const std::string& bytes) {
  const std::string tmp = "." + name + "." + std::to_string(::getpid()) + ".tmp";
  UniqueFd fd(::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return false;
  size_t put = 0;
  while (put < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + put, bytes.size() - put);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    put += static_cast<size_t>(n);
  }
  // A crash after the rename may leave a short file: the checksum catches it next time.
  if (put != bytes.size() || ::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return false;
  }
  return true;
}

}  // namespace

std::string RuleSet::serialize() const {
  Writer w;
  w.u32(static_cast<uint32_t>(rules_.size()));
  for (const Rule& r : rules_) {
    w.str(r.id);
    w.u32(static_cast<uint32_t>(r.severity));
    w.u32(static_cast<uint32_t>(r.score));
    w.str(r.message);
    w.strs(r.tags);
    w.u32(r.report);
    w.u32(static_cast<uint32_t>(r.type));
    w.strs(r.names);
    w.u32(static_cast<uint32_t>(r.args.size()));
    for (const ArgCondition& a : r.args) {
      w.u32(static_cast<uint32_t>(a.index + 1));
      w.str(a.keyword);
      w.u32(a.any);
      w.strs(a.contains);
      w.pattern(a.regex);
      w.strs(a.equals);
      w.strs(a.not_in);
      for (const auto* b : {&a.dynamic, &a.decoded, &a.folded, &a.present}) w.opt_bool(*b);
    }
    w.u32(r.unbounded_loop);
    w.u32(r.not_called);
    w.strs(r.contains);
    w.pattern(r.regex);
    w.u32(static_cast<uint32_t>(r.detector));
    w.u32(static_cast<uint32_t>(r.all_of.size()));
    for (const auto& g : r.all_of) w.strs(g);
  }
  return w.take();
}

std::optional<RuleSet> RuleSet::deserialize(std::string_view bytes) {
  Reader in(bytes);
  RuleSet set;
  set.rules_.resize(in.count());
  for (Rule& r : set.rules_) {
    r.id = in.str();
    r.severity = static_cast<Severity>(in.below(static_cast<uint32_t>(Severity::critical) + 1));
    r.score = static_cast<int>(in.below(1001));
    r.message = in.str();
    r.tags = in.strs();
    r.report = in.below(2) != 0;
    r.type = static_cast<Rule::Type>(in.below(static_cast<uint32_t>(Rule::Type::combo) + 1));
    r.names = in.strs();
    r.args.resize(in.count());
    for (ArgCondition& a : r.args) {
      a.index = static_cast<int>(in.below(33)) - 1;
      a.keyword = in.str();
      a.any = in.below(2) != 0;
      a.contains = in.strs();
      a.regex = in.pattern();
      a.equals = in.strs();
      a.not_in = in.strs();
      for (auto* b : {&a.dynamic, &a.decoded, &a.folded, &a.present}) *b = in.opt_bool();
    }
    r.unbounded_loop = in.below(2) != 0;
    r.not_called = in.below(2) != 0;
    r.contains = in.strs();
    r.regex = in.pattern();
    r.detector = static_cast<Detector>(in.below(static_cast<uint32_t>(Detector::count_) + 1));
    r.all_of.resize(in.count());
    for (auto& g : r.all_of) g = in.strs();
    if (!in.ok()) return std::nullopt;
  }
  if (!in.done()) return std::nullopt;
  set.build_index();
  return set;
}

std::string rules_digest(std::string_view data) { return digest_hex(data); }

std::optional<std::filesystem::path> default_cache_dir() {
  if (const char* d = std::getenv("SANDBOXRUN_CACHE_DIR")) {
    if (*d == '\0') return std::nullopt;
    return std::filesystem::path(d);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::filesystem::path(x) / "sandboxrun";
  if (const char* h = std::getenv("HOME"); h && *h == '/') return std::filesystem::path(h) / ".cache" / "sandboxrun";
  return std::nullopt;
}

CachedRules load_rules_cached(const std::filesystem::path& file, const std::filesystem::path& cache_dir) {
  const std::string text = RuleSet::read(file);
  const std::string digest = digest_hex(text);
  std::string why;
  UniqueFd dir = open_cache_dir(cache_dir, why);
  if (!dir) return CachedRules{RuleSet::parse(file, text), CacheUse::bypassed, "rules cache not used: " + why};
  const std::string name = "assess-rules-" + digest + ".bin";
  // Layout: magic, the rules text's digest, payload length, payload digest, payload.
  if (auto bytes = read_entry(dir.get(), name)) {
    std::string_view b = *bytes;
    const size_t head = kMagic.size() + kDigestHex + sizeof(uint32_t) + kDigestHex;
    if (b.size() >= head && b.starts_with(kMagic) && b.substr(kMagic.size(), kDigestHex) == digest) {
      uint32_t len = 0;
      std::memcpy(&len, b.data() + kMagic.size() + kDigestHex, sizeof len);
      const std::string_view payload = b.substr(head);
      if (payload.size() == len && digest_hex(payload) == b.substr(head - kDigestHex, kDigestHex)) {
        if (auto set = RuleSet::deserialize(payload)) return CachedRules{std::move(*set), CacheUse::hit, {}};
      }
    }
    why = "the cached rules failed verification and were rebuilt";
  }
  CachedRules out{RuleSet::parse(file, text), CacheUse::built, std::move(why)};
  const std::string payload = out.rules.serialize();
  std::string entry(kMagic);
  entry += digest;
  const uint32_t len = static_cast<uint32_t>(payload.size());
  entry.append(reinterpret_cast<const char*>(&len), sizeof len);
  entry += digest_hex(payload);
  entry += payload;
  if (!write_entry(dir.get(), name, entry)) out.note = "rules cache not written in " + cache_dir.string();
  return out;
}

}  // namespace sandboxrun::assess
