// Assessor rules are data (policies/assess-rules.yaml): each rule has an id, a severity, a
// score, a message, optional tags, and one match spec over the analyzer's facts. Combination
// rules (all_of tags) express intent such as "socket + dup2 + shell = reverse shell".
#pragma once

#include <array>
#include <compare>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "assess/name_hash.hpp"
#include "assess/regex_prefilter.hpp"
#include "common/cache_io.hpp"
#include "sandboxrun/assess_analyzer.hpp"

namespace sandboxrun::assess {

using cache::Packed;

enum class Severity : uint8_t { info, low, medium, high, critical };
const char* to_string(Severity s) noexcept;

// A regular expression (ECMAScript; a leading "(?i)" makes it case-insensitive) applied to
// at most 4 KiB at a time, so its cost and stack use stay bounded on any input.
// A text that lacks what every match needs (regex_prefilter.hpp) is answered without the
// regex. The filter is derived when the pattern is compiled and kept in the compiled-rules
// cache: deriving it took ~12 us a pattern, 0.3 ms of a cached `assess`. The regex itself is
// compiled on first use: a file meets few of the rules. Copies share one compiled form
// (thread-safe).
struct Pattern {
  std::string text;
  // Throws std::regex_error when `text` is not a valid expression (compiled now, to check it).
  static Pattern compile(std::string text);
  // `text` as validated by compile() before, with the filter it derived then (the
  // compiled-rules cache); the regex is compiled when first needed.
  static Pattern deferred(std::string text, RegexPrefilter filter);
  bool search(std::string_view s) const;
  const RegexPrefilter& prefilter() const;

 private:
  struct Compiled;
  std::shared_ptr<Compiled> compiled_;
};

// A list of strings: views of the rule set's compiled form (see RuleSet).
using Strs = std::span<const std::string_view>;

// A condition on one argument of a call.
struct ArgCondition {
  int index = -1;         // positional index
  std::string_view keyword;  // or keyword name (either may select the argument)
  bool any = false;       // or: some argument satisfies the value conditions
  Strs contains;          // its text contains one of these
  std::optional<Pattern> regex;  // its text matches
  Strs equals;            // its text is one of these
  Strs not_in;            // absent, or its text is none of these
  std::optional<bool> dynamic, decoded, folded;
  std::optional<bool> present;
  uint8_t flows = 0;      // it carries host data of one of these kinds (Flow bits; 0: any)
  uint8_t except_flows = 0;  // it does not count when all it carries is of these kinds (absent: counts)
};

// A rule as loaded. Its strings and lists are views of the rule set that holds it.
struct Rule {
  enum class Type : uint8_t { call, reference, import, string, detector, combo };
  std::string_view id;
  Severity severity = Severity::medium;
  int score = 0;
  std::string_view message;
  Strs tags;                      // set when the rule matches; combo rules consume them
  bool report = true;             // false: only sets tags

  Type type = Type::call;
  Strs names;                       // call / reference / import patterns ('*' matches anything)
  std::span<const ArgCondition> args;  // call: all must hold
  bool unbounded_loop = false;     // call: only inside `while True:` and the like
  bool unless_waiting = false;     // call: and not when that loop waits for input each pass
  bool not_called = false;         // reference: only uses other than a direct call
  Strs contains;                   // string: contains one of these
  std::optional<Pattern> regex;    // string: and matches this (when given)
  Strs acts_on;                    // string: counts where one of these tags is set (empty: the actuators)
  uint8_t flows = 0;               // string: names a path of these kinds (flow_of_path; 0: any)
  Detector detector = Detector::count_;
  std::span<const Strs> all_of;    // combo: each entry is a list of alternatives
};

// The same, owning its strings: what the YAML parser builds and the compiled form encodes.
struct ArgSpec {
  int index = -1;
  std::string keyword;
  bool any = false;
  std::vector<std::string> contains;
  std::optional<Pattern> regex;
  std::vector<std::string> equals;
  std::vector<std::string> not_in;
  std::optional<bool> dynamic, decoded, folded;
  std::optional<bool> present;
  uint8_t flows = 0;
  uint8_t except_flows = 0;
};

struct RuleSpec {
  std::string id;
  Severity severity = Severity::medium;
  int score = 0;
  std::string message;
  std::vector<std::string> tags;
  bool report = true;
  Rule::Type type = Rule::Type::call;
  std::vector<std::string> names;
  std::vector<ArgSpec> args;
  bool unbounded_loop = false;
  bool unless_waiting = false;
  bool not_called = false;
  std::vector<std::string> contains;
  std::optional<Pattern> regex;
  std::vector<std::string> acts_on;
  uint8_t flows = 0;
  Detector detector = Detector::count_;
  std::vector<std::vector<std::string>> all_of;
};

// A name pattern with '*', split for a fast test: most have one star (prefix*suffix). Views of
// the rule's own name, like the rest of the index.
struct Glob {
  std::string_view pattern, prefix, suffix;
  bool single_star = false;
  size_t rule = 0;
  explicit Glob(std::string_view p, size_t r);
  bool match(std::string_view name) const noexcept;
};

// Rules in their compiled form (assess_rules_cache.hpp): one byte string that every Rule's
// strings are views of, and the rules decoded from it with their lists in three arrays sized
// once. A cached load maps the compiled form and decodes it in place: building a std::string
// and a vector for each of ~3,000 strings and ~1,600 lists, then freeing them all at exit, was
// most of a cached load (and 80 of a 1,000-line `assess`'s ~240 page faults). The index (by
// name, by kind) is part of the compiled form too, and is used where it lies.
class RuleSet {
 public:
  // The index refers to the rules' own strings: a copy would refer to the original's.
  RuleSet() = default;
  RuleSet(RuleSet&&) noexcept = default;
  RuleSet& operator=(RuleSet&&) noexcept = default;
  RuleSet(const RuleSet&) = delete;
  RuleSet& operator=(const RuleSet&) = delete;

  // Parses and validates a rules file; throws sandboxrun::Error naming the file, the rule
  // and the key on any mistake.
  static RuleSet load(const std::filesystem::path& file);
  // The rules file's text (read from `fd` when it is open, else opened by name); throws
  // sandboxrun::Error naming the file when it cannot be read.
  static std::string read(const std::filesystem::path& file, int fd = -1);
  // Parses and validates rules text read from `file` (named in errors).
  static RuleSet parse(const std::filesystem::path& file, const std::string& text);

  // The compiled form, for the cache in assess_rules_cache.hpp.
  std::string serialize() const { return std::string(bytes_); }
  // nullopt when `bytes` is not a complete, valid compiled form. The first form copies the
  // bytes; the second decodes `bytes` in place, `owner` keeping them alive (a mapped entry).
  static std::optional<RuleSet> deserialize(std::string_view bytes);
  static std::optional<RuleSet> deserialize(std::string_view bytes, std::shared_ptr<const void> owner);

  const std::vector<Rule>& rules() const noexcept { return rules_; }
  // Tags of capabilities that can act on a string (run it, write it, send it, open it): the
  // file's `string` rule matches count only in a file that has one of them; elsewhere they are
  // words in a string, reported as info without a score. Empty: string matches always count.
  Strs actuators() const noexcept { return actuators_; }

  using NameHash = assess::NameHash;
  // Rule indexes by fact. The compiled form carries the index as built when the rules were
  // compiled, and its arrays are read there in place: building it at every load was half of
  // decoding cached rules (~0.14 ms of a start, and ~70 KB of fresh memory to fault in).
  struct Index {
    // A name without '*' of the call and reference rules, and its run of rule indexes in
    // exact_rules. The table is open-addressed (at most three quarters full, a power of two
    // long); a free slot has name_size 0 (rule names are never empty).
    struct Run {
      uint32_t name_at = 0, name_size = 0;  // the name's bytes in the compiled form
      uint32_t first = 0, count = 0;
    };
    // The first two bytes of a string rule's `contains` needle, and that rule's position in
    // `strings`: sorted by pair.
    struct Pair {
      uint32_t pair = 0, position = 0;
      auto operator<=>(const Pair&) const = default;
    };
    // The string filter's key: the first two bytes at `p` (of a needle, or of a literal).
    static uint16_t byte_pair(const char* p) noexcept {
      return static_cast<uint16_t>(static_cast<unsigned char>(p[0]) << 8 | static_cast<unsigned char>(p[1]));
    }
    const char* base = nullptr;  // the compiled form, which every name_at is relative to
    Packed<Run> exact;
    Packed<uint32_t> exact_rules;
    std::optional<Run> find_exact(std::string_view name) const noexcept;
    // Globs by the first segment of their literal prefix ("ctypes" for ctypes.*.mount); those
    // starting with '*' under "". A name only meets the globs of its own first segment.
    std::unordered_map<std::string_view, std::vector<Glob>, NameHash, std::equal_to<>> call_globs, reference_globs;
    Packed<uint32_t> imports, strings, combos;
    std::array<Packed<uint32_t>, static_cast<size_t>(Detector::count_)> detectors;
    // A bit per byte pair (65,536, in 32-bit words) that starts some string rule's needle, for a
    // quick reject: a literal can only contain a needle whose first pair it contains, so a
    // string rule none of whose pairs occur in it is skipped without searching. Empty: no
    // string rules.
    Packed<uint32_t> string_pair_bits;
    Packed<uint32_t> string_unfiltered;  // a bit per string rule with a 1-byte needle
    Packed<Pair> string_pairs;
  };
  const Index& index() const noexcept { return index_; }

 private:
  // The compiled form of `specs` (rules_cache.cpp).
  static std::string encode(const std::vector<RuleSpec>& specs, const std::vector<std::string>& actuators);
  // Reads the index section that encode() appended after the rules; false when it is not a
  // complete, consistent index of these rules.
  bool read_index(cache::Reader& in);

  std::shared_ptr<const void> owner_;  // keeps bytes_ alive
  std::string_view bytes_;
  std::vector<std::string_view> strs_;  // every list's items, each list a run
  std::vector<ArgCondition> args_;
  std::vector<Strs> groups_;            // all_of groups
  std::vector<Rule> rules_;
  Strs actuators_;
  Index index_;
};

// Bit `i` of a bit set held in 32-bit words (the string filter's, read in place or built).
template <class Words>
bool test_bit(const Words& words, size_t i) noexcept {
  return (words[i / 32] >> (i % 32) & 1) != 0;
}
inline void set_bit(std::vector<uint32_t>& words, size_t i) noexcept { words[i / 32] |= uint32_t{1} << (i % 32); }

// '*' matches any run of characters (dots included); everything else literally.
bool glob_match(std::string_view pattern, std::string_view text) noexcept;

}  // namespace sandboxrun::assess
