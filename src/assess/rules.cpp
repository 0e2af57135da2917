// The rules' patterns and index, and the engine that matches analyzer facts against the rules
// (rules_yaml.cpp reads the rules file).
#include <algorithm>

#include "internal.hpp"
#include "assess/assess_rules.hpp"
#include "assess/regex_prefilter.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::assess {

namespace {

constexpr size_t kWindow = 4096;
constexpr size_t kStep = 3072;

bool contains_any(std::string_view text, Strs needles) {
  for (const auto& n : needles)
    if (text.find(n) != std::string_view::npos) return true;
  return false;
}

std::string readable(std::string_view s) {
  std::string out;
  for (char ch : s.substr(0, 60)) {
    auto c = static_cast<unsigned char>(ch);
    out += (c >= 0x20 && c < 0x7F) ? ch : '?';
  }
  if (s.size() > 60) out += "...";
  return out;
}

}  // namespace

const char* to_string(Severity s) noexcept {
  switch (s) {
    case Severity::info: return "info";
    case Severity::low: return "low";
    case Severity::medium: return "medium";
    case Severity::high: return "high";
    case Severity::critical: return "critical";
  }
  return "?";
}

struct Pattern::Compiled {
  RegexPrefilter filter;
  std::once_flag once;
  std::regex re;
};

namespace {

std::regex build_regex(std::string_view text) {
  auto flags = std::regex::ECMAScript;
  if (text.starts_with("(?i)")) {
    text.remove_prefix(4);
    flags |= std::regex::icase;
  }
  return std::regex(std::string(text), flags);
}

}  // namespace

bool Pattern::search(std::string_view s) const {
  // Most texts cannot match: they are turned away without running (or compiling) the regex.
  if (!compiled_->filter.may_match(s)) return false;
  std::call_once(compiled_->once, [&] {
    // A deferred text was validated when its cache entry was built; should it still fail,
    // the pattern matches nothing rather than throw out of an assessment.
    try {
      compiled_->re = build_regex(text);
    } catch (const std::regex_error&) {
      compiled_->re = std::regex("[^\\s\\S]");
    }
  });
  const std::regex& re = compiled_->re;
  if (s.size() <= kWindow) return std::regex_search(s.begin(), s.end(), re);
  for (size_t p = 0;; p += kStep) {
    const size_t e = std::min(s.size(), p + kWindow);
    auto flags = std::regex_constants::match_default;
    if (p > 0) flags |= std::regex_constants::match_prev_avail;
    if (e < s.size()) flags |= std::regex_constants::match_not_eol;
    if (std::regex_search(s.begin() + static_cast<ptrdiff_t>(p), s.begin() + static_cast<ptrdiff_t>(e), re, flags)) return true;
    if (e == s.size()) return false;
  }
}

bool glob_match(std::string_view pat, std::string_view text) noexcept {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pat.size() && pat[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

Glob::Glob(std::string_view p, size_t r) : pattern(p), rule(r) {
  const size_t first = pattern.find('*'), last = pattern.rfind('*');
  single_star = first == last;
  prefix = pattern.substr(0, first);
  suffix = pattern.substr(last + 1);
}

bool Glob::match(std::string_view name) const noexcept {
  if (name.size() < prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  return single_star || glob_match(pattern, name);
}

Pattern Pattern::compile(std::string text) {
  std::string_view body = text;
  const bool icase = body.starts_with("(?i)");
  if (icase) body.remove_prefix(4);
  RegexPrefilter filter = regex_prefilter(body, icase);
  Pattern p = deferred(std::move(text), std::move(filter));
  std::call_once(p.compiled_->once, [&] { p.compiled_->re = build_regex(p.text); });
  return p;
}

const RegexPrefilter& Pattern::prefilter() const { return compiled_->filter; }

Pattern Pattern::deferred(std::string text, RegexPrefilter filter) {
  Pattern p;
  p.text = std::move(text);
  p.compiled_ = std::make_shared<Compiled>();
  p.compiled_->filter = std::move(filter);
  return p;
}

std::optional<RuleSet::Index::Run> RuleSet::Index::find_exact(std::string_view name) const noexcept {
  if (exact.empty() || name.empty()) return std::nullopt;
  // read_index checked that the table has a free slot, so every probe ends.
  const size_t mask = exact.size() - 1;
  for (size_t h = NameHash{}(name) & mask;; h = (h + 1) & mask) {
    const Run run = exact[h];
    if (run.name_size == 0) return std::nullopt;
    if (std::string_view(base + run.name_at, run.name_size) == name) return run;
  }
}

// ---- engine ---------------------------------------------------------------------------------

namespace detail {

namespace {

const ArgInfo* select(const ArgCondition& c, std::span<const ArgInfo> args) {
  if (!c.keyword.empty())
    for (const auto& a : args)
      if (a.keyword == c.keyword) return &a;
  if (c.index >= 0) {
    int pos = 0;
    for (const auto& a : args) {
      if (!a.keyword.empty()) continue;
      if (pos++ == c.index) return &a;
    }
  }
  return nullptr;
}

bool text_ok(const ArgCondition& c, std::string_view text) {
  if (!c.contains.empty() && !contains_any(text, c.contains)) return false;
  if (c.regex && !c.regex->search(text)) return false;
  if (!c.equals.empty() && std::find(c.equals.begin(), c.equals.end(), text) == c.equals.end()) return false;
  if (!c.not_in.empty() && std::find(c.not_in.begin(), c.not_in.end(), text) != c.not_in.end()) return false;
  return true;
}

bool value_ok(const ArgCondition& c, const ArgInfo& a) {
  std::string spaced;
  std::string_view text = a.text;
  if (a.kind == ArgInfo::Kind::container) {
    spaced = a.text;
    std::replace(spaced.begin(), spaced.end(), '\x1f', ' ');
    text = spaced;
  }
  // A computed value of which nothing is known has no text to test: `[...] + list(args)` is not
  // the empty string that `^(\s|$)` looks for, nor is a table or list whose items are not known
  // here (`checker.run(TARGETS)`).
  const bool unknown = (a.kind == ArgInfo::Kind::expr || a.kind == ArgInfo::Kind::container) && a.text.empty();
  if (unknown && (!c.contains.empty() || c.regex || !c.equals.empty())) return false;
  // A name that holds one of several values (a loop's name over a list's items): the test
  // passes when one of them passes it.
  if (!any_alternative(text, [&](std::string_view one) { return text_ok(c, one); })) return false;
  if (c.dynamic && *c.dynamic != a.dynamic) return false;
  if (c.decoded && *c.decoded != a.decoded) return false;
  if (c.folded && *c.folded != a.folded) return false;
  if (c.flows && !(c.flows & a.flows)) return false;
  if (c.except_flows && a.flows && !(a.flows & ~c.except_flows)) return false;
  return true;
}

// The line the data a `flows` condition matched was read at (0: the rule has none).
uint32_t flow_source_line(std::span<const ArgCondition> conds, std::span<const ArgInfo> args) {
  for (const auto& c : conds) {
    if (!c.flows) continue;
    for (const auto& a : args)
      if (a.flows & c.flows) return a.flow_line;
  }
  return 0;
}

bool args_match(std::span<const ArgCondition> conds, std::span<const ArgInfo> args) {
  for (const auto& c : conds) {
    if (c.any) {
      if (std::none_of(args.begin(), args.end(), [&](const ArgInfo& a) { return value_ok(c, a); })) return false;
      continue;
    }
    const ArgInfo* a = select(c, args);
    if (c.present && *c.present != (a != nullptr)) return false;
    if (!a) {
      // Absence satisfies "not one of", `present: false` and "except what carries only ...".
      if (!c.not_in.empty() || c.present || c.except_flows) continue;
      return false;
    }
    if (!value_ok(c, *a)) return false;
  }
  return true;
}

}  // namespace

RuleEngine::RuleEngine(const RuleSet& rules, uint32_t max_findings_per_rule)
    : rules_(rules), max_per_rule_(max_findings_per_rule), state_(rules.rules().size()) {}

template <class Fn>
void RuleEngine::lookup(std::string_view name, bool calls, Fn&& fn) {
  const auto& ix = rules_.index();
  auto exact = [&](std::string_view n) {
    if (const std::optional<RuleSet::Index::Run> run = ix.find_exact(n))
      for (uint32_t i = 0; i < run->count; ++i) fn(ix.exact_rules[run->first + i]);
  };
  exact(name);
  if (name.find('.') == std::string_view::npos)
    for (const auto& m : star_modules_) exact(m + "." + std::string(name));
  // References are frequent and only reference rules apply to them: skip the call globs.
  const std::string_view head = name.substr(0, name.find('.'));
  auto globs = [&](const auto& by_head) {
    for (std::string_view key : {std::string_view(), head}) {
      if (auto it = by_head.find(key); it != by_head.end())
        for (const auto& g : it->second)
          if (g.match(name)) fn(g.rule);
      if (head.empty() || head.size() == name.size()) break;  // a bare name has no head of its own
    }
  };
  if (calls) globs(ix.call_globs);
  globs(ix.reference_globs);
}

void RuleEngine::on_import(std::string_view module, uint32_t line) {
  for (const uint32_t k : rules_.index().imports) {
    for (const auto& p : rules_.rules()[k].names) {
      const bool hit = p.find('*') != std::string::npos
                           ? glob_match(p, module)
                           : (module == p || (module.starts_with(p) && module.size() > p.size() && module[p.size()] == '.'));
      if (hit) {
        fire(k, line, module);
        break;
      }
    }
  }
}

const std::vector<size_t>& RuleEngine::candidates(std::string_view name, bool calls) {
  Memo& memo = calls ? call_candidates_ : reference_candidates_;
  if (auto it = memo.find(name); it != memo.end()) return it->second;
  std::vector<size_t> found;
  lookup(name, calls, [&](size_t k) { found.push_back(k); });
  return memo.emplace(std::string(name), std::move(found)).first->second;
}

void RuleEngine::on_call(const CallEvent& call) {
  const std::vector<size_t>& ks = candidates(call.qual, true);
  if (ks.empty()) return;
  const std::string detail = call.from_decoded ? std::string(call.qual) + ", in exec'd or decoded code" : std::string(call.qual);
  for (size_t k : ks) {
    const Rule& r = rules_.rules()[k];
    if (r.type == Rule::Type::call) {
      if (r.unbounded_loop && (!call.unbounded_loop || (r.unless_waiting && call.waiting_loop))) continue;
      if (!args_match(r.args, call.args)) continue;
      // A rule on where data goes names where it came from.
      if (const uint32_t from = flow_source_line(r.args, call.args)) {
        // flow_system follows a path, not data read.
        const bool path = std::all_of(r.args.begin(), r.args.end(),
                                      [](const ArgCondition& c) { return !c.flows || c.flows == flow_system; });
        fire(k, call.line, detail + (path ? ", path from line " : ", data read at line ") + std::to_string(from));
        continue;
      }
    } else if (r.not_called) {
      continue;
    }
    fire(k, call.line, detail);
  }
}

void RuleEngine::on_reference(std::string_view qual, uint32_t line) {
  for (size_t k : candidates(qual, false))
    if (rules_.rules()[k].type == Rule::Type::reference) fire(k, line, qual);
}

void RuleEngine::on_string(std::string_view value, uint32_t line) {
  const RuleSet::Index& ix = rules_.index();
  if (ix.strings.empty()) return;
  // Which rules have a needle whose first byte pair occurs in the literal.
  string_hits_.assign(ix.string_unfiltered.begin(), ix.string_unfiltered.end());
  for (size_t p = 0; p + 1 < value.size(); ++p) {
    const uint16_t pair = RuleSet::Index::byte_pair(value.data() + p);
    if (!test_bit(ix.string_pair_bits, pair)) continue;
    // The first entry of `pair` in the sorted pairs, then its run. Searched by position: the
    // pairs are read in place (Packed has no random-access iterator), and std::views::iota,
    // which would make positions a range, does not compile with clang 14 and libstdc++ 12 (the
    // fuzzing build).
    size_t at = 0;
    for (size_t end = ix.string_pairs.size(); at < end;) {
      const size_t mid = at + (end - at) / 2;
      if (ix.string_pairs[mid].pair < pair) at = mid + 1;
      else end = mid;
    }
    for (; at < ix.string_pairs.size() && ix.string_pairs[at].pair == pair; ++at)
      set_bit(string_hits_, ix.string_pairs[at].position);
  }
  for (uint32_t i = 0; i < ix.strings.size(); ++i) {
    const size_t k = ix.strings[i];
    const Rule& r = rules_.rules()[k];
    if (!r.contains.empty() && (!test_bit(string_hits_, i) || !contains_any(value, r.contains))) continue;
    if (r.regex && !r.regex->search(value)) continue;
    if (r.flows && !(flow_of_path(value) & r.flows)) continue;
    fire(k, line, "'" + readable(value) + "'");
  }
}

void RuleEngine::on_detector(Detector d, uint32_t line, std::string_view detail) {
  for (const uint32_t k : rules_.index().detectors[static_cast<size_t>(d)]) fire(k, line, readable(detail));
}

void RuleEngine::on_star_import(std::string_view module) {
  if (star_modules_.size() >= 16) return;
  star_modules_.emplace_back(module);
  call_candidates_.clear();  // a bare name may now mean module.name
  reference_candidates_.clear();
}

bool RuleEngine::loop_sensitive(std::string_view qual) {
  const std::vector<size_t>& ks = candidates(qual, true);
  return std::any_of(ks.begin(), ks.end(), [&](size_t k) { return rules_.rules()[k].unbounded_loop; });
}

void RuleEngine::fire(size_t k, uint32_t line, std::string_view detail) {
  const Rule& r = rules_.rules()[k];
  for (std::string_view t : r.tags) {
    if (auto it = tags_.find(t); it == tags_.end()) tags_.emplace(std::string(t), line);
    else if (line < it->second) it->second = line;
  }
  if (!r.report) return;
  if (r.type == Rule::Type::string && !rules_.actuators().empty()) {
    if (latent_.size() < 4096) latent_.push_back(Latent{k, line, std::string(detail)});
    return;
  }
  report(k, line, detail, true);
}

void RuleEngine::report(size_t k, uint32_t line, std::string_view detail, bool scored) {
  const Rule& r = rules_.rules()[k];
  State& st = state_[k];
  if (scored) st.matched = true;
  if (st.count >= max_per_rule_ || std::find(st.lines.begin(), st.lines.end(), line) != st.lines.end()) return;
  ++st.count;
  st.lines.push_back(line);
  std::string msg(r.message);
  if (!detail.empty()) msg += " (" + std::string(detail) + ")";
  if (!scored)
    msg += r.acts_on.empty() ? " [only words in a string: nothing in the file runs, writes, sends or opens a string]"
                             : " [only words in a string: nothing in the file runs, writes or sends one]";
  findings_.push_back(Finding{std::string(r.id), scored ? to_string(r.severity) : "info", static_cast<int>(line), std::move(msg)});
}

void RuleEngine::finish(std::vector<Finding>& findings, int& score) {
  // A string rule's match is behaviour only where the file can act on a string at all.
  // A rule may name what must act on its strings (a shell command line needs something that
  // runs, writes or sends it; reading files does not).
  auto any_set = [&](Strs acts) {
    return std::any_of(acts.begin(), acts.end(), [&](std::string_view t) { return tags_.count(t) > 0; });
  };
  const bool can_act = any_set(rules_.actuators());
  for (const Latent& l : latent_) {
    const Strs own = rules_.rules()[l.rule].acts_on;
    report(l.rule, l.line, l.detail, own.empty() ? can_act : any_set(own));
  }
  latent_.clear();
  for (const uint32_t k : rules_.index().combos) {
    const Rule& r = rules_.rules()[k];
    uint32_t line = 0;
    std::string evidence;
    bool all = true;
    for (const auto& group : r.all_of) {
      const std::string* best = nullptr;
      uint32_t best_line = UINT32_MAX;
      for (const auto& t : group)
        if (auto it = tags_.find(t); it != tags_.end() && it->second < best_line) {
          best = &it->first;
          best_line = it->second;
        }
      if (!best) {
        all = false;
        break;
      }
      line = std::max(line, best_line);
      evidence += (evidence.empty() ? "" : ", ") + *best + " at line " + std::to_string(best_line);
    }
    if (all) fire(k, line, evidence);
  }
  score = 0;
  for (size_t k = 0; k < state_.size(); ++k)
    if (state_[k].matched) score += rules_.rules()[k].score;
  std::stable_sort(findings_.begin(), findings_.end(), [](const Finding& a, const Finding& b) { return a.line < b.line; });
  findings = std::move(findings_);
  findings_.clear();
}

}  // namespace detail
}  // namespace sandboxrun::assess
