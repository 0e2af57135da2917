// The compiled form of a RuleSet (a length-prefixed binary encoding of its rules; the index
// and regular expressions are rebuilt from it) and the cache that stores it. See
// assess_rules_cache.hpp for the safety rules of the cache directory.
#include "assess/assess_rules_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/sha256.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::assess {

namespace {

constexpr std::string_view kMagic = "SRRULES\x02";  // bump the last byte when the encoding changes
constexpr size_t kDigestHex = 64;
constexpr size_t kMaxCacheBytes = 64u << 20;

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
  const std::string digest = sha256_hex(text);
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
      if (payload.size() == len && sha256_hex(payload) == b.substr(head - kDigestHex, kDigestHex)) {
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
  entry += sha256_hex(payload);
  entry += payload;
  if (!write_entry(dir.get(), name, entry)) out.note = "rules cache not written in " + cache_dir.string();
  return out;
}

}  // namespace sandboxrun::assess
