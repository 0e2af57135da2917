// The compiled form of a RuleSet (a length-prefixed binary encoding of its rules; the index
// and regular expressions are rebuilt from it) and the cache that stores it. See cache_io.hpp
// for the safety rules of the cache directory.
#include "assess/assess_rules_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>

#include "common/cache_io.hpp"
#include "common/sha256.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::assess {

namespace {

constexpr std::string_view kMagic = "SRRULES\x08";  // bump the last byte when the encoding changes
constexpr std::string_view kLinkMagic = "SRRLINK\x01";
// How long ago a rules file must have last changed for its identity to be linked to its digest:
// well above any file system's timestamp granularity.
constexpr std::chrono::seconds kSettled{2};

// Patterns are stored as their text and the prefilter compile() derived from it; the entry's
// checksum vouches that both are what compile() produced when the entry was built.
void put_pattern(cache::Writer& w, const std::optional<Pattern>& p) {
  w.u32(p ? 1 : 0);
  if (!p) return;
  w.str(p->text);
  const RegexPrefilter& f = p->prefilter();
  w.u64(f.min_length);
  w.u32(f.icase);
  w.strs(f.needles);
}

std::optional<Pattern> get_pattern(cache::Reader& in) {
  if (in.u32() == 0 || !in.ok()) return std::nullopt;
  std::string text = in.str();
  RegexPrefilter f;
  f.min_length = in.u64();
  f.icase = in.below(2) != 0;
  f.needles = in.strs();
  if (!in.ok()) return std::nullopt;
  return Pattern::deferred(std::move(text), std::move(f));
}

// The rules decoded where the entry is mapped; the set keeps the mapping.
std::optional<RuleSet> decode_in_place(cache::Entry entry) {
  auto mapped = std::make_shared<const cache::Entry>(std::move(entry));
  return RuleSet::deserialize(mapped->payload(), mapped);
}

}  // namespace

std::string RuleSet::encode(const std::vector<RuleSpec>& specs, const std::vector<std::string>& actuators) {
  // How many list items, argument conditions and all_of groups follow: the decoder sizes its
  // arrays once, so that the views into them stay valid.
  uint32_t items = static_cast<uint32_t>(actuators.size()), args = 0, groups = 0;
  for (const RuleSpec& r : specs) {
    items += static_cast<uint32_t>(r.tags.size() + r.names.size() + r.contains.size() + r.acts_on.size());
    for (const ArgSpec& a : r.args) items += static_cast<uint32_t>(a.contains.size() + a.equals.size() + a.not_in.size());
    for (const auto& g : r.all_of) items += static_cast<uint32_t>(g.size());
    args += static_cast<uint32_t>(r.args.size());
    groups += static_cast<uint32_t>(r.all_of.size());
  }
  cache::Writer w;
  w.u32(items);
  w.u32(args);
  w.u32(groups);
  w.strs(actuators);
  w.u32(static_cast<uint32_t>(specs.size()));
  for (const RuleSpec& r : specs) {
    w.str(r.id);
    w.u32(static_cast<uint32_t>(r.severity));
    w.u32(static_cast<uint32_t>(r.score));
    w.str(r.message);
    w.strs(r.tags);
    w.u32(r.report);
    w.u32(static_cast<uint32_t>(r.type));
    w.strs(r.names);
    w.u32(static_cast<uint32_t>(r.args.size()));
    for (const ArgSpec& a : r.args) {
      w.u32(static_cast<uint32_t>(a.index + 1));
      w.str(a.keyword);
      w.u32(a.any);
      w.strs(a.contains);
      put_pattern(w, a.regex);
      w.strs(a.equals);
      w.strs(a.not_in);
      for (const auto* b : {&a.dynamic, &a.decoded, &a.folded, &a.present}) w.opt_bool(*b);
    }
    w.u32(r.unbounded_loop);
    w.u32(r.unless_waiting);
    w.u32(r.not_called);
    w.strs(r.contains);
    put_pattern(w, r.regex);
    w.strs(r.acts_on);
    w.u32(static_cast<uint32_t>(r.detector));
    w.u32(static_cast<uint32_t>(r.all_of.size()));
    for (const auto& g : r.all_of) w.strs(g);
  }
  return w.take();
}

std::optional<RuleSet> RuleSet::deserialize(std::string_view bytes) {
  auto copy = std::make_shared<const std::string>(bytes);
  return deserialize(*copy, copy);
}

std::optional<RuleSet> RuleSet::deserialize(std::string_view bytes, std::shared_ptr<const void> owner) {
  cache::Reader in(bytes);
  RuleSet set;
  set.owner_ = std::move(owner);
  set.bytes_ = bytes;
  set.strs_.reserve(in.count());
  set.args_.reserve(in.count());
  set.groups_.reserve(in.count());
  // A run of `strs_`; never past the reserved size, so no view of it ever moves.
  auto list = [&]() -> Strs {
    const uint32_t n = in.count();
    if (n > set.strs_.capacity() - set.strs_.size()) {
      in.below(0);  // fails the reader
      return {};
    }
    const size_t at = set.strs_.size();
    for (uint32_t i = 0; i < n; ++i) set.strs_.push_back(in.view());
    return Strs(set.strs_.data() + at, n);
  };
  set.actuators_ = list();
  set.rules_.resize(in.count());
  for (Rule& r : set.rules_) {
    r.id = in.view();
    r.severity = static_cast<Severity>(in.below(static_cast<uint32_t>(Severity::critical) + 1));
    r.score = static_cast<int>(in.below(1001));
    r.message = in.view();
    r.tags = list();
    r.report = in.below(2) != 0;
    r.type = static_cast<Rule::Type>(in.below(static_cast<uint32_t>(Rule::Type::combo) + 1));
    r.names = list();
    const uint32_t nargs = in.count();
    if (nargs > set.args_.capacity() - set.args_.size()) return std::nullopt;
    const size_t first_arg = set.args_.size();
    for (uint32_t i = 0; i < nargs && in.ok(); ++i) {
      ArgCondition& a = set.args_.emplace_back();
      a.index = static_cast<int>(in.below(33)) - 1;
      a.keyword = in.view();
      a.any = in.below(2) != 0;
      a.contains = list();
      a.regex = get_pattern(in);
      a.equals = list();
      a.not_in = list();
      for (auto* b : {&a.dynamic, &a.decoded, &a.folded, &a.present}) *b = in.opt_bool();
    }
    r.args = std::span<const ArgCondition>(set.args_.data() + first_arg, set.args_.size() - first_arg);
    r.unbounded_loop = in.below(2) != 0;
    r.unless_waiting = in.below(2) != 0;
    r.not_called = in.below(2) != 0;
    r.contains = list();
    r.regex = get_pattern(in);
    r.acts_on = list();
    r.detector = static_cast<Detector>(in.below(static_cast<uint32_t>(Detector::count_) + 1));
    const uint32_t ngroups = in.count();
    if (ngroups > set.groups_.capacity() - set.groups_.size()) return std::nullopt;
    const size_t first_group = set.groups_.size();
    for (uint32_t i = 0; i < ngroups && in.ok(); ++i) set.groups_.push_back(list());
    r.all_of = std::span<const Strs>(set.groups_.data() + first_group, set.groups_.size() - first_group);
    if (!in.ok()) return std::nullopt;
  }
  if (!in.done()) return std::nullopt;
  set.build_index();
  return set;
}


namespace {

// A file's identity for the link below: device, inode, size, modification and change times.
std::string file_id(const struct stat& st) {
  std::string id = "rules-file\n";
  for (const uint64_t v : {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                           static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_mtim.tv_sec),
                           static_cast<uint64_t>(st.st_mtim.tv_nsec), static_cast<uint64_t>(st.st_ctim.tv_sec),
                           static_cast<uint64_t>(st.st_ctim.tv_nsec)})
    id += std::to_string(v) + "\n";
  return sha256_hex(id);
}

bool same_file_state(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
         a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

}  // namespace

CachedRules load_rules_cached(const std::filesystem::path& file, const std::filesystem::path& cache_dir,
                              std::chrono::system_clock::time_point now) {
  // The link from the file's identity to its digest spares a warm start reading and hashing the
  // rules text (~0.2 ms of a 2 ms `assess`). Any change to a file moves its change time to the
  // present, so an identity recorded while the change time lay in the past cannot match a later
  // content; one recorded within the clock's granularity of a change could, so none is (git's
  // "racily clean" rule).
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat before {};
  if (!fd || ::fstat(fd.get(), &before) != 0 || !S_ISREG(before.st_mode)) fd.reset();
  std::string why;
  UniqueFd dir = cache::open_dir(cache_dir, why);
  const std::string id = fd ? file_id(before) : std::string();
  const std::string link_name = "assess-rules-file-" + id + ".link";
  bool rejected = false;
  if (fd && dir) {
    if (auto link = cache::read_entry(dir.get(), link_name, kLinkMagic, id, rejected); link && link->payload().size() == 64) {
      const std::string digest(link->payload());
      bool bad = false;
      if (auto payload = cache::read_entry(dir.get(), "assess-rules-" + digest + ".bin", kMagic, digest, bad))
        if (auto set = decode_in_place(std::move(*payload))) return CachedRules{std::move(*set), CacheUse::hit, {}, true};
    }
  }
  const std::string text = RuleSet::read(file, fd.get());  // throws, naming the file
  struct stat after {};
  const auto changed = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(before.st_ctim.tv_sec) + std::chrono::nanoseconds(before.st_ctim.tv_nsec)));
  const bool settled = fd && ::fstat(fd.get(), &after) == 0 && same_file_state(before, after) &&
                       changed + kSettled <= now;
  const std::string digest = sha256_hex(text);
  if (!dir) return CachedRules{RuleSet::parse(file, text), CacheUse::bypassed, "rules cache not used: " + why};
  const std::string name = "assess-rules-" + digest + ".bin";
  rejected = false;
  if (auto payload = cache::read_entry(dir.get(), name, kMagic, digest, rejected)) {
    if (auto set = decode_in_place(std::move(*payload))) {
      if (settled) cache::write_entry(dir.get(), link_name, kLinkMagic, id, digest);
      return CachedRules{std::move(*set), CacheUse::hit, {}};
    }
    rejected = true;
  }
  if (rejected) why = "the cached rules failed verification and were rebuilt";
  CachedRules out{RuleSet::parse(file, text), CacheUse::built, std::move(why)};
  if (!cache::write_entry(dir.get(), name, kMagic, digest, out.rules.serialize()))
    out.note = "rules cache not written in " + cache_dir.string();
  else if (settled)
    cache::write_entry(dir.get(), link_name, kLinkMagic, id, digest);
  return out;
}

}  // namespace sandboxrun::assess
