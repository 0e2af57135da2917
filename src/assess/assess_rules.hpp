// Assessor rules are data (policies/assess-rules.yaml): each rule has an id, a severity, a
// score, a message, optional tags, and one match spec over the analyzer's facts. Combination
// rules (all_of tags) express intent such as "socket + dup2 + shell = reverse shell".
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "assess/regex_prefilter.hpp"
#include "sandboxrun/assess_analyzer.hpp"

namespace sandboxrun::assess {

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

// A condition on one argument of a call.
struct ArgCondition {
  int index = -1;         // positional index
  std::string keyword;    // or keyword name (either may select the argument)
  bool any = false;       // or: some argument satisfies the value conditions
  std::vector<std::string> contains;  // its text contains one of these
  std::optional<Pattern> regex;       // its text matches
  std::vector<std::string> equals;    // its text is one of these
  std::vector<std::string> not_in;    // absent, or its text is none of these
  std::optional<bool> dynamic, decoded, folded;
  std::optional<bool> present;
};

struct Rule {
  enum class Type : uint8_t { call, reference, import, string, detector, combo };
  std::string id;
  Severity severity = Severity::medium;
  int score = 0;
  std::string message;
  std::vector<std::string> tags;  // set when the rule matches; combo rules consume them
  bool report = true;             // false: only sets tags

  Type type = Type::call;
  std::vector<std::string> names;  // call / reference / import patterns ('*' matches anything)
  std::vector<ArgCondition> args;  // call: all must hold
  bool unbounded_loop = false;     // call: only inside `while True:` and the like
  bool not_called = false;         // reference: only uses other than a direct call
  std::vector<std::string> contains;  // string: contains one of these
  std::optional<Pattern> regex;       // string: and matches this (when given)
  Detector detector = Detector::count_;
  std::vector<std::vector<std::string>> all_of;  // combo: each entry is a list of alternatives
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

  // The compiled form (rules without their YAML), for the cache in assess_rules_cache.hpp.
  std::string serialize() const;
  // nullopt when `bytes` is not a complete, valid compiled form.
  static std::optional<RuleSet> deserialize(std::string_view bytes);

  const std::vector<Rule>& rules() const noexcept { return rules_; }
  // Tags of capabilities that can act on a string (run it, write it, send it, open it): the
  // file's `string` rule matches count only in a file that has one of them; elsewhere they are
  // words in a string, reported as info without a score. Empty: string matches always count.
  const std::vector<std::string>& actuators() const noexcept { return actuators_; }

  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  // Rule indexes by fact, built once at load.
  struct Index {
    // call + reference names without '*': views of the rules' own names, each to its run of
    // rule indexes in exact_rules (one allocation per name instead of three: the index was
    // half of the loaded rules' memory, and faulting that memory in most of a cached load).
    // An open-addressed table (at most half full) rather than a node per name: building the
    // nodes was half of decoding cached rules.
    struct Run {
      std::string_view name;  // empty: a free slot (rule names are never empty)
      uint32_t first = 0, count = 0;
    };
    std::vector<Run> exact;  // a power of two long
    std::vector<size_t> exact_rules;
    const Run* find_exact(std::string_view name) const noexcept;
    // The slot that holds `name`, or the free slot where it would go.
    size_t exact_slot(std::string_view name) const noexcept;
    // Globs by the first segment of their literal prefix ("ctypes" for ctypes.*.mount); those
    // starting with '*' under "". A name only meets the globs of its own first segment.
    std::unordered_map<std::string_view, std::vector<Glob>, NameHash, std::equal_to<>> call_globs, reference_globs;
    std::vector<size_t> imports, strings, combos;
    std::vector<std::vector<size_t>> detectors;  // by Detector
    // The first two bytes of every `contains` needle of the string rules: a bit per byte pair
    // for a quick reject, and the pairs sorted with the position in `strings` of their rule. A
    // literal can only contain a needle whose first pair it contains, so a string rule none of
    // whose pairs occur in it is skipped without searching (every literal met all 36 rules).
    std::vector<uint64_t> string_pair_bits;                  // 65,536 bits; empty: no string rules
    std::vector<uint64_t> string_unfiltered;                 // a bit per string rule with a 1-byte needle
    std::vector<std::pair<uint16_t, uint32_t>> string_pairs;  // sorted (pair, position in strings)
  };
  const Index& index() const noexcept { return index_; }

 private:
  void build_index();

  std::vector<Rule> rules_;
  std::vector<std::string> actuators_;
  Index index_;
};

// '*' matches any run of characters (dots included); everything else literally.
bool glob_match(std::string_view pattern, std::string_view text) noexcept;

}  // namespace sandboxrun::assess
