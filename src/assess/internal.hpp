// Helpers shared by the assessor's translation units (not part of the public API).
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sandboxrun/assess_analyzer.hpp"

namespace sandboxrun::assess::detail {

// Between the values an argument may have: a loop's name over a literal's items holds them all
// (analyzer_iter.cpp), and a rule's test passes when one of them passes it (rules.cpp). Inside a
// larger value ("of=" + name, [cmd, "stop", name], f"of={name}") the values are a group between
// two kGroup marks, and each one is tested with what stands around it.
constexpr char kAlternative = '\x1e';
constexpr char kGroup = '\x1d';

inline bool has_alternatives(std::string_view text) noexcept { return text.find(kAlternative) != std::string_view::npos; }
// An ASCII Python identifier (what a table key, an attribute or a loop's name must be here).
inline bool is_identifier(std::string_view s) noexcept {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}
// `os.O_WRONLY|os.O_CREAT`: names joined by `|`, as a flag chain is kept (see value_operator);
// a name bound to one keeps it.
inline bool is_flag_chain(std::string_view s) noexcept {
  if (s.find('|') == std::string_view::npos) return false;
  // Every piece between two separators (`|` or `.`) is an identifier.
  for (size_t b = 0; b <= s.size();) {
    const size_t e = std::min(s.find_first_of("|.", b), s.size());
    if (!is_identifier(s.substr(b, e - b))) return false;
    b = e + 1;
  }
  return true;
}
// The values of a name that holds several, as a group to embed in a larger value.
inline std::string as_group(std::string_view alternatives) {
  if (alternatives.find(kGroup) != std::string_view::npos) return std::string(alternatives);  // one already
  std::string g(1, kGroup);
  g.append(alternatives);
  g += kGroup;
  return g;
}

// Calls fn with each value a text stands for: the first group's alternatives, each with its
// surroundings (later groups read as their first value), or the alternatives of a bare list, or
// the text itself. Stops at the first fn that returns true; returns whether one did.
template <class Fn>
bool any_alternative(std::string_view text, Fn&& fn) {
  if (!has_alternatives(text)) return fn(text);
  auto first_values = [](std::string_view s) {  // later groups: their first value, no marks
    std::string out;
    bool in_group = false, skipping = false;
    for (char c : s) {
      if (c == kGroup) {
        in_group = !in_group;
        skipping = false;
      } else if (c == kAlternative) {
        skipping = in_group;
        if (!in_group) out += ' ';
      } else if (!skipping) {
        out += c;
      }
    }
    return out;
  };
  const size_t open = text.find(kGroup);
  const size_t close = open == std::string_view::npos ? open : text.find(kGroup, open + 1);
  if (close == std::string_view::npos) {
    for (size_t start = 0; start <= text.size();) {
      size_t end = text.find(kAlternative, start);
      if (end == std::string_view::npos) end = text.size();
      if (fn(std::string_view(first_values(text.substr(start, end - start))))) return true;
      start = end + 1;
    }
    return false;
  }
  const std::string_view body = text.substr(open + 1, close - open - 1);
  const std::string before(text.substr(0, open)), after = first_values(text.substr(close + 1));
  for (size_t start = 0; start <= body.size();) {
    size_t end = body.find(kAlternative, start);
    if (end == std::string_view::npos) end = body.size();
    const std::string one = before + std::string(body.substr(start, end - start)) + after;
    if (fn(std::string_view(one))) return true;
    start = end + 1;
  }
  return false;
}

// A host path written out: a constant that starts at the root or a home ('/etc/x', '~/.ssh').
inline bool absolute_path(std::string_view t) noexcept { return !t.empty() && (t[0] == '/' || t[0] == '~'); }

// Whether fn holds for some value the text stands for: an item of a container's text (split at
// \x1f), each with its alternatives.
template <class Fn>
bool any_item_value(std::string_view text, Fn&& fn) {
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\x1f', start);
    if (end == std::string_view::npos) end = text.size();
    if (any_alternative(text.substr(start, end - start), fn)) return true;
    start = end + 1;
  }
  return false;
}

// Some value the text stands for is a path from the root or a home: what a function returns or a
// loop hands on that is worth keeping.
inline bool names_a_path(std::string_view text) {
  return any_item_value(text, [](std::string_view one) { return absolute_path(one); });
}

// The text a decoder call produces from constant arguments (base64/hex/rot13 of a literal),
// or nullopt when the call is not a decoder or its input is not constant and valid.
std::optional<std::string> decode_constant_call(std::string_view qual, std::span<const ArgInfo> args);

// The coding declared in the first two lines (PEP 263) when it is not a plain one.
std::optional<std::string> unusual_source_encoding(std::string_view source);

// Why the input is not Python source (an ELF executable, a shell script, binary data), if so.
std::optional<std::string> foreign_format(std::string_view source);

// A long string that looks like encoded data rather than text.
bool is_entropy_blob(std::string_view s, const AnalyzerLimits& limits) noexcept;

// Canonical spelling of a qualified name: builtins.eval -> eval, posix.system -> os.system.
std::string canonical(std::string_view qual);
// canonical() in place, without a copy for the names it leaves as they are (most: called per
// name token).
void canonicalize(std::string& qual);
bool is_canonical(std::string_view qual) noexcept;

}  // namespace sandboxrun::assess::detail

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "sandboxrun/assess.hpp"
#include "assess/assess_rules.hpp"

namespace sandboxrun::assess::detail {

// Matches analyzer facts against the rules and collects findings, tags and the score.
class RuleEngine final : public EventSink {
 public:
  RuleEngine(const RuleSet& rules, uint32_t max_findings_per_rule);

  void on_import(std::string_view module, uint32_t line) override;
  void on_call(const CallEvent& call) override;
  void on_reference(std::string_view qual, uint32_t line) override;
  void on_string(std::string_view value, uint32_t line) override;
  void on_detector(Detector d, uint32_t line, std::string_view detail) override;
  void on_star_import(std::string_view module) override;
  bool loop_sensitive(std::string_view qual) override;

  // Evaluates the combination rules; findings come out in line order.
  void finish(std::vector<Finding>& findings, int& score);

 private:
  template <class Fn>
  void lookup(std::string_view name, bool calls, Fn&& fn);
  // What lookup() yields for `name`, in its order. Names recur through a file (self.log.info,
  // open, os.path.join): each is looked up once, not once per use.
  const std::vector<size_t>& candidates(std::string_view name, bool calls);
  void fire(size_t rule, uint32_t line, std::string_view detail);
  // A rule's finding; `scored` false: reported as info without a score (a latent string match).
  void report(size_t rule, uint32_t line, std::string_view detail, bool scored);

  const RuleSet& rules_;
  uint32_t max_per_rule_;
  struct State {
    uint32_t count = 0;
    bool matched = false;
    std::vector<uint32_t> lines;
  };
  std::vector<State> state_;
  std::map<std::string, uint32_t, std::less<>> tags_;  // tag -> first line
  std::vector<std::string> star_modules_;
  using Memo = std::unordered_map<std::string, std::vector<size_t>, RuleSet::NameHash, std::equal_to<>>;
  Memo call_candidates_, reference_candidates_;  // cleared when star_modules_ changes
  std::vector<Finding> findings_;
  std::vector<uint32_t> string_hits_;  // on_string's scratch: a bit per string rule
  // String-rule matches, held until finish() knows whether the file can act on a string.
  struct Latent {
    size_t rule;
    uint32_t line;
    std::string detail;
  };
  std::vector<Latent> latent_;
};

}  // namespace sandboxrun::assess::detail
