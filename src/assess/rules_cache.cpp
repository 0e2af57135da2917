// The compiled form of a RuleSet (a length-prefixed binary encoding of its rules, then their
// index, which a load reads in place; regular expressions are compiled on first use) and the
// cache that stores it. See cache_io.hpp for the safety rules of the cache directory.
#include "assess/assess_rules_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "common/cache_io.hpp"
#include "assess/name_hash.hpp"
#include "common/sha256.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::assess {

namespace {

constexpr std::string_view kMagic = "SRRULES\x0f";  // bump the last byte when the encoding changes
constexpr std::string_view kLinkMagic = "SRRLINK\x02";
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

using Index = RuleSet::Index;

// A call or reference rule's name, as encode() wrote it.
struct NameAt {
  uint32_t rule;
  Rule::Type type;
  uint32_t at;  // in the encoding
  std::string_view name;
};

// A glob of the index: which rule, whether it is a call rule's, and its name in the encoding.
struct GlobAt {
  uint32_t rule = 0, call = 0, at = 0, size = 0;
};

// The second half of the compiled form: RuleSet::Index as built from `specs`, whose names
// encode() wrote at `names`.
void put_index(cache::Writer& w, const std::vector<RuleSpec>& specs, const std::vector<NameAt>& names) {
  size_t exact_names = 0;
  for (const NameAt& n : names) exact_names += (n.type == Rule::Type::call || n.type == Rule::Type::reference) && n.name.find('*') == std::string_view::npos;
  size_t slots = 16;
  while (slots * 3 < exact_names * 4) slots *= 2;  // at most three quarters full
  std::vector<Index::Run> exact(slots);
  std::vector<std::string_view> slot_name(slots);
  std::vector<std::pair<uint32_t, uint32_t>> slot_rule;  // (slot, rule), in rule order
  std::vector<GlobAt> globs;
  const size_t mask = slots - 1;
  for (const NameAt& n : names) {
    if (n.type != Rule::Type::call && n.type != Rule::Type::reference) continue;
    const auto size = static_cast<uint32_t>(n.name.size());
    if (n.name.find('*') != std::string_view::npos) {
      globs.push_back({n.rule, n.type == Rule::Type::call, n.at, size});
      continue;
    }
    size_t h = NameHash{}(n.name) & mask;
    while (exact[h].name_size != 0 && slot_name[h] != n.name) h = (h + 1) & mask;
    if (exact[h].name_size == 0) {
      exact[h] = {n.at, size, 0, 0};
      slot_name[h] = n.name;
    }
    ++exact[h].count;
    slot_rule.emplace_back(static_cast<uint32_t>(h), n.rule);
  }
  uint32_t at = 0;
  for (Index::Run& run : exact) {
    if (run.name_size == 0) continue;  // a free slot stays all zero
    run.first = at;
    at += run.count;
    run.count = 0;
  }
  std::vector<uint32_t> exact_rules(at);
  for (const auto& [slot, rule] : slot_rule) exact_rules[exact[slot].first + exact[slot].count++] = rule;

  std::vector<uint32_t> imports, strings, combos;
  std::vector<std::vector<uint32_t>> detectors(static_cast<size_t>(Detector::count_));
  for (uint32_t k = 0; k < specs.size(); ++k) {
    switch (specs[k].type) {
      case Rule::Type::import: imports.push_back(k); break;
      case Rule::Type::string: strings.push_back(k); break;
      case Rule::Type::detector: detectors[static_cast<size_t>(specs[k].detector)].push_back(k); break;
      case Rule::Type::combo: combos.push_back(k); break;
      default: break;
    }
  }
  // Byte pairs of the string rules' needles; a rule with a one-byte needle is always searched.
  std::vector<uint32_t> pair_bits, unfiltered;
  std::vector<Index::Pair> pairs;
  if (!strings.empty()) {
    pair_bits.assign(65536 / 32, 0);
    unfiltered.assign((strings.size() + 31) / 32, 0);
    for (uint32_t i = 0; i < strings.size(); ++i)
      for (const std::string& n : specs[strings[i]].contains) {
        if (n.size() < 2) {
          set_bit(unfiltered, i);
          continue;
        }
        const uint16_t pair = Index::byte_pair(n.data());
        set_bit(pair_bits, pair);
        pairs.push_back({pair, i});
      }
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  }
  w.packed(exact);
  w.packed(exact_rules);
  w.packed(globs);
  w.packed(imports);
  w.packed(strings);
  w.packed(combos);
  for (const auto& d : detectors) w.packed(d);
  w.packed(pair_bits);
  w.packed(unfiltered);
  w.packed(pairs);
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
  std::vector<NameAt> names;  // where encode wrote each rule's names: the index refers to them
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
    w.u32(static_cast<uint32_t>(r.names.size()));
    for (const std::string& n : r.names) {
      names.push_back({static_cast<uint32_t>(&r - specs.data()), r.type, static_cast<uint32_t>(w.size() + 4), n});
      w.str(n);
    }
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
      w.u32(a.flows);
      w.u32(a.except_flows);
    }
    w.u32(r.unbounded_loop);
    w.u32(r.unless_waiting);
    w.u32(r.not_called);
    w.strs(r.contains);
    put_pattern(w, r.regex);
    w.strs(r.acts_on);
    w.u32(r.flows);
    w.u32(static_cast<uint32_t>(r.detector));
    w.u32(static_cast<uint32_t>(r.all_of.size()));
    for (const auto& g : r.all_of) w.strs(g);
  }
  put_index(w, specs, names);
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
      a.flows = static_cast<uint8_t>(in.below(64));
      a.except_flows = static_cast<uint8_t>(in.below(64));
    }
    r.args = std::span<const ArgCondition>(set.args_.data() + first_arg, set.args_.size() - first_arg);
    r.unbounded_loop = in.below(2) != 0;
    r.unless_waiting = in.below(2) != 0;
    r.not_called = in.below(2) != 0;
    r.contains = list();
    r.regex = get_pattern(in);
    r.acts_on = list();
    r.flows = static_cast<uint8_t>(in.below(64));
    r.detector = static_cast<Detector>(in.below(static_cast<uint32_t>(Detector::count_) + 1));
    const uint32_t ngroups = in.count();
    if (ngroups > set.groups_.capacity() - set.groups_.size()) return std::nullopt;
    const size_t first_group = set.groups_.size();
    for (uint32_t i = 0; i < ngroups && in.ok(); ++i) set.groups_.push_back(list());
    r.all_of = std::span<const Strs>(set.groups_.data() + first_group, set.groups_.size() - first_group);
    if (!in.ok()) return std::nullopt;
  }
  if (!set.read_index(in) || !in.done()) return std::nullopt;
  return set;
}

bool RuleSet::read_index(cache::Reader& in) {
  Index& ix = index_;
  ix.base = bytes_.data();
  ix.exact = in.packed<Index::Run>();
  ix.exact_rules = in.packed<uint32_t>();
  const Packed<GlobAt> globs = in.packed<GlobAt>();
  ix.imports = in.packed<uint32_t>();
  ix.strings = in.packed<uint32_t>();
  ix.combos = in.packed<uint32_t>();
  for (auto& d : ix.detectors) d = in.packed<uint32_t>();
  ix.string_pair_bits = in.packed<uint32_t>();
  ix.string_unfiltered = in.packed<uint32_t>();
  ix.string_pairs = in.packed<Index::Pair>();
  if (!in.ok()) return false;
  // Checked whole before any use: every name inside the encoding, every rule index a rule of the
  // kind its list is for, the table a power of two with a free slot (so that a probe ends), the
  // string filter sized for its rules and sorted.
  const size_t slots = ix.exact.size();
  if (slots < 16 || (slots & (slots - 1)) != 0) return false;
  const auto inside = [&](uint32_t at, uint32_t size) { return at <= bytes_.size() && size <= bytes_.size() - at; };
  bool free_slot = false;
  for (const Index::Run run : ix.exact) {
    if (run.name_size == 0) {
      if (run.name_at != 0 || run.first != 0 || run.count != 0) return false;
      free_slot = true;
      continue;
    }
    if (!inside(run.name_at, run.name_size) || run.first > ix.exact_rules.size() ||
        run.count > ix.exact_rules.size() - run.first)
      return false;
  }
  if (!free_slot) return false;
  const auto is = [&](uint32_t k, auto... types) { return k < rules_.size() && ((rules_[k].type == types) || ...); };
  for (const uint32_t k : ix.exact_rules)
    if (!is(k, Rule::Type::call, Rule::Type::reference)) return false;
  for (const uint32_t k : ix.imports)
    if (!is(k, Rule::Type::import)) return false;
  for (const uint32_t k : ix.strings)
    if (!is(k, Rule::Type::string)) return false;
  for (const uint32_t k : ix.combos)
    if (!is(k, Rule::Type::combo)) return false;
  for (size_t d = 0; d < ix.detectors.size(); ++d)
    for (const uint32_t k : ix.detectors[d])
      if (!is(k, Rule::Type::detector) || rules_[k].detector != static_cast<Detector>(d)) return false;
  if (ix.strings.empty() ? !ix.string_pair_bits.empty() || !ix.string_unfiltered.empty() || !ix.string_pairs.empty()
                         : ix.string_pair_bits.size() != 65536 / 32 ||
                               ix.string_unfiltered.size() != (ix.strings.size() + 31) / 32)
    return false;
  uint32_t last = 0;
  for (const Index::Pair p : ix.string_pairs) {
    if (p.pair > 0xffff || p.pair < last || p.position >= ix.strings.size()) return false;
    last = p.pair;
  }
  for (const GlobAt g : globs) {
    if (!is(g.rule, g.call ? Rule::Type::call : Rule::Type::reference) || !inside(g.at, g.size)) return false;
    const std::string_view name(bytes_.data() + g.at, g.size);
    if (name.find('*') == std::string_view::npos) return false;
    const std::string_view head = name.substr(0, name.find_first_of(".*"));
    const std::string_view key = name[head.size()] == '.' ? head : std::string_view();  // "*.run", "os*" under ""
    (g.call ? ix.call_globs : ix.reference_globs)[key].emplace_back(name, g.rule);
  }
  return true;
}


namespace {

// A file's identity for the link below: device, inode, size, modification and change times.
std::string file_id(const struct stat& st) {
  std::string id = std::string(kLinkMagic) + "rules-file\n";  // an encoding of its own
  for (const uint64_t v : {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                           static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_mtim.tv_sec),
                           static_cast<uint64_t>(st.st_mtim.tv_nsec), static_cast<uint64_t>(st.st_ctim.tv_sec),
                           static_cast<uint64_t>(st.st_ctim.tv_nsec)})
    id += std::to_string(v) + "\n";
  return sha256_hex(id);
}

// The compiled entry of rules text with digest `digest`, in this encoding: two versions of
// sandboxrun sharing a cache (an upgrade while the old one still runs) keep an entry each
// instead of rebuilding over each other's on every run.
std::string entry_key(const std::string& digest) { return sha256_hex(std::string(kMagic) + digest); }

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
      const std::string key = entry_key(digest);
      if (auto payload = cache::read_entry(dir.get(), "assess-rules-" + key + ".bin", kMagic, key, bad))
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
  const std::string key = entry_key(digest);
  const std::string name = "assess-rules-" + key + ".bin";
  rejected = false;
  if (auto payload = cache::read_entry(dir.get(), name, kMagic, key, rejected)) {
    if (auto set = decode_in_place(std::move(*payload))) {
      if (settled) cache::write_entry(dir.get(), link_name, kLinkMagic, id, digest);
      return CachedRules{std::move(*set), CacheUse::hit, {}};
    }
    rejected = true;
  }
  if (rejected) why = "the cached rules failed verification and were rebuilt";
  CachedRules out{RuleSet::parse(file, text), CacheUse::built, std::move(why)};
  if (!cache::write_entry(dir.get(), name, kMagic, key, out.rules.serialize()))
    out.note = "rules cache not written in " + cache_dir.string();
  else if (settled)
    cache::write_entry(dir.get(), link_name, kLinkMagic, id, digest);
  return out;
}

}  // namespace sandboxrun::assess
