// Rules file loader (strict: unknown keys and bad values are errors) and the engine that
// matches analyzer facts against the rules.
#include <algorithm>
#include <set>

#include "internal.hpp"
#include "yaml_util.hpp"
#include "sandboxrun/assess_rules.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::assess {

namespace {

using detail::Ctx;
using detail::boolean;
using detail::check_keys;
using detail::integer;
using detail::scalar;
using detail::string_list;

constexpr size_t kWindow = 4096;
constexpr size_t kStep = 3072;

Pattern pattern(const YAML::Node& n, const Ctx& c) {
  Pattern p;
  p.text = scalar(n, c, "a regular expression");
  std::string_view body = p.text;
  auto flags = std::regex::ECMAScript;
  if (body.starts_with("(?i)")) {
    body.remove_prefix(4);
    flags |= std::regex::icase;
  }
  try {
    p.re = std::regex(std::string(body), flags);
  } catch (const std::regex_error& e) {
    c.fail("bad regular expression '" + p.text + "': " + e.what(), "an ECMAScript regular expression");
  }
  return p;
}

Severity severity(const YAML::Node& n, const Ctx& c) {
  const std::string s = scalar(n, c);
  for (auto v : {Severity::info, Severity::low, Severity::medium, Severity::high, Severity::critical})
    if (s == to_string(v)) return v;
  c.fail("severity '" + s + "'", "info, low, medium, high or critical");
}

ArgCondition arg_condition(const YAML::Node& n, const Ctx& c) {
  check_keys(n, {"index", "keyword", "any", "contains", "regex", "equals", "not_in", "dynamic", "decoded", "folded", "present"}, c);
  ArgCondition a;
  if (n["index"]) a.index = integer(n["index"], c / "index", 0, 31);
  if (n["keyword"]) a.keyword = scalar(n["keyword"], c / "keyword");
  if (n["any"]) a.any = boolean(n["any"], c / "any");
  if (a.index < 0 && a.keyword.empty() && !a.any) c.fail("no argument selected", "index, keyword or any: true");
  if (n["contains"]) a.contains = string_list(n["contains"], c / "contains");
  if (n["regex"]) a.regex = pattern(n["regex"], c / "regex");
  if (n["equals"]) a.equals = string_list(n["equals"], c / "equals");
  if (n["not_in"]) a.not_in = string_list(n["not_in"], c / "not_in");
  if (n["dynamic"]) a.dynamic = boolean(n["dynamic"], c / "dynamic");
  if (n["decoded"]) a.decoded = boolean(n["decoded"], c / "decoded");
  if (n["folded"]) a.folded = boolean(n["folded"], c / "folded");
  if (n["present"]) a.present = boolean(n["present"], c / "present");
  return a;
}

void parse_match(const YAML::Node& m, Rule& r, const Ctx& c) {
  check_keys(m, {"call", "reference", "import", "string", "detector", "all_of", "args", "unbounded_loop", "not_called"}, c);
  int kinds = 0;
  for (const char* k : {"call", "reference", "import", "string", "detector", "all_of"}) kinds += m[k] ? 1 : 0;
  if (kinds != 1) c.fail("needs exactly one of call, reference, import, string, detector, all_of", "one match kind per rule");
  if ((m["args"] || m["unbounded_loop"]) && !m["call"]) c.fail("args and unbounded_loop apply to call only", "a call match");
  if (m["not_called"] && !m["reference"]) c.fail("not_called applies to reference only", "a reference match");
  if (m["call"]) {
    r.type = Rule::Type::call;
    r.names = string_list(m["call"], c / "call");
    if (m["args"]) {
      if (!m["args"].IsSequence()) (c / "args").fail("not a list", "a list of argument conditions");
      size_t i = 0;
      for (const auto& a : m["args"]) r.args.push_back(arg_condition(a, Ctx{c.file, c.where + ".args[" + std::to_string(i++) + "]"}));
    }
    if (m["unbounded_loop"]) r.unbounded_loop = boolean(m["unbounded_loop"], c / "unbounded_loop");
  } else if (m["reference"]) {
    r.type = Rule::Type::reference;
    r.names = string_list(m["reference"], c / "reference");
    if (m["not_called"]) r.not_called = boolean(m["not_called"], c / "not_called");
  } else if (m["import"]) {
    r.type = Rule::Type::import;
    r.names = string_list(m["import"], c / "import");
  } else if (m["string"]) {
    r.type = Rule::Type::string;
    const YAML::Node s = m["string"];
    Ctx sc{c.file, c.where + ".string"};
    check_keys(s, {"contains", "regex"}, sc);
    if (s["contains"]) r.contains = string_list(s["contains"], sc / "contains");
    if (s["regex"]) r.regex = pattern(s["regex"], sc / "regex");
    if (r.contains.empty() && !r.regex) sc.fail("empty", "contains and/or regex");
  } else if (m["detector"]) {
    r.type = Rule::Type::detector;
    Ctx dc{c.file, c.where + ".detector"};
    const std::string name = scalar(m["detector"], dc);
    std::string known;
    for (size_t d = 0; d < static_cast<size_t>(Detector::count_); ++d) {
      known += (known.empty() ? "" : ", ") + std::string(to_string(static_cast<Detector>(d)));
      if (name == to_string(static_cast<Detector>(d))) r.detector = static_cast<Detector>(d);
    }
    if (r.detector == Detector::count_) dc.fail("unknown detector '" + name + "'", "one of: " + known);
  } else {
    r.type = Rule::Type::combo;
    for (const auto& group : string_list(m["all_of"], c / "all_of")) {
      std::vector<std::string> alts;
      size_t b = 0;
      for (size_t e; (e = group.find('|', b)) != std::string::npos; b = e + 1) alts.push_back(group.substr(b, e - b));
      alts.push_back(group.substr(b));
      r.all_of.push_back(std::move(alts));
    }
  }
}

bool contains_any(std::string_view text, const std::vector<std::string>& needles) {
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

bool Pattern::search(std::string_view s) const {
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

Glob::Glob(std::string p, size_t r) : pattern(std::move(p)), rule(r) {
  const size_t first = pattern.find('*'), last = pattern.rfind('*');
  single_star = first == last;
  prefix = pattern.substr(0, first);
  suffix = pattern.substr(last + 1);
}

bool Glob::match(std::string_view name) const noexcept {
  if (name.size() < prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  return single_star || glob_match(pattern, name);
}

RuleSet RuleSet::load(const std::filesystem::path& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::BadFile&) {
    throw Error(file.string() + ": cannot read the assessor rules file", "check the rules: key in security.yaml", ENOENT);
  } catch (const YAML::Exception& e) {
    throw Error(file.string() + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg, "fix the YAML syntax");
  }
  RuleSet set;
  try {
    Ctx top{file, "top level"};
    check_keys(root, {"version", "rules"}, top);
    if (!root["version"] || integer(root["version"], Ctx{file, "version"}, 1, 1) != 1) top.fail("missing version", "version: 1");
    if (!root["rules"] || !root["rules"].IsSequence()) top.fail("missing rules", "rules: a list of rules");
    std::set<std::string> ids;
    size_t i = 0;
    for (const auto& n : root["rules"]) {
      Ctx c{file, "rules[" + std::to_string(i++) + "]"};
      if (!n.IsMap()) c.fail("not a mapping", "a rule mapping");
      Rule r;
      if (n["id"]) r.id = scalar(n["id"], c / "id");
      if (r.id.empty()) c.fail("missing id", "id: a unique rule id");
      c.where = "rule '" + r.id + "'";
      check_keys(n, {"id", "severity", "score", "message", "tags", "report", "match"}, c);
      if (!ids.insert(r.id).second) c.fail("duplicate id", "unique rule ids");
      for (const char* k : {"severity", "score", "message", "match"})
        if (!n[k]) c.fail(std::string("missing ") + k, std::string(k) + ": ...");
      r.severity = severity(n["severity"], c / "severity");
      r.score = integer(n["score"], c / "score", 0, 1000);
      r.message = scalar(n["message"], c / "message");
      if (n["tags"]) r.tags = string_list(n["tags"], c / "tags");
      if (n["report"]) r.report = boolean(n["report"], c / "report");
      parse_match(n["match"], r, c / "match");
      set.rules_.push_back(std::move(r));
    }
    // Combination rules may only name tags that some rule sets (catches typos).
    std::set<std::string, std::less<>> tags;
    for (const auto& r : set.rules_) tags.insert(r.tags.begin(), r.tags.end());
    for (const auto& r : set.rules_)
      for (const auto& g : r.all_of)
        for (const auto& t : g)
          if (!tags.count(t)) Ctx{file, "rule '" + r.id + "'.match.all_of"}.fail("unknown tag '" + t + "'", "a tag set by another rule's tags:");
  } catch (const YAML::Exception& e) {
    throw Error(file.string() + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg, "fix the rules file");
  }
  Index& ix = set.index_;
  ix.detectors.resize(static_cast<size_t>(Detector::count_));
  for (size_t k = 0; k < set.rules_.size(); ++k) {
    const Rule& r = set.rules_[k];
    switch (r.type) {
      case Rule::Type::call:
      case Rule::Type::reference:
        for (const auto& n : r.names) {
          if (n.find('*') != std::string::npos) {
            const std::string head = n.substr(0, n.find_first_of(".*"));
            const std::string key = n[head.size()] == '.' ? head : std::string();  // "*.run", "os*" under ""
            (r.type == Rule::Type::call ? ix.call_globs : ix.reference_globs)[key].emplace_back(n, k);
          }
          else ix.exact[n].push_back(k);
        }
        break;
      case Rule::Type::import: ix.imports.push_back(k); break;
      case Rule::Type::string: ix.strings.push_back(k); break;
      case Rule::Type::detector: ix.detectors[static_cast<size_t>(r.detector)].push_back(k); break;
      case Rule::Type::combo: ix.combos.push_back(k); break;
    }
  }
  return set;
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

bool value_ok(const ArgCondition& c, const ArgInfo& a) {
  std::string spaced;
  std::string_view text = a.text;
  if (a.kind == ArgInfo::Kind::container) {
    spaced = a.text;
    std::replace(spaced.begin(), spaced.end(), '\x1f', ' ');
    text = spaced;
  }
  if (!c.contains.empty() && !contains_any(text, c.contains)) return false;
  if (c.regex && !c.regex->search(text)) return false;
  if (!c.equals.empty() && std::find(c.equals.begin(), c.equals.end(), text) == c.equals.end()) return false;
  if (!c.not_in.empty() && std::find(c.not_in.begin(), c.not_in.end(), text) != c.not_in.end()) return false;
  if (c.dynamic && *c.dynamic != a.dynamic) return false;
  if (c.decoded && *c.decoded != a.decoded) return false;
  if (c.folded && *c.folded != a.folded) return false;
  return true;
}

bool args_match(const std::vector<ArgCondition>& conds, std::span<const ArgInfo> args) {
  for (const auto& c : conds) {
    if (c.any) {
      if (std::none_of(args.begin(), args.end(), [&](const ArgInfo& a) { return value_ok(c, a); })) return false;
      continue;
    }
    const ArgInfo* a = select(c, args);
    if (c.present && *c.present != (a != nullptr)) return false;
    if (!a) {
      if (!c.not_in.empty() || c.present) continue;  // absence satisfies "not one of" / present: false
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
    if (auto it = ix.exact.find(n); it != ix.exact.end())
      for (size_t r : it->second) fn(r);
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
  for (size_t k : rules_.index().imports) {
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

void RuleEngine::on_call(const CallEvent& call) {
  const std::string detail = call.from_decoded ? std::string(call.qual) + ", in exec'd or decoded code" : std::string(call.qual);
  lookup(call.qual, true, [&](size_t k) {
    const Rule& r = rules_.rules()[k];
    if (r.type == Rule::Type::call) {
      if (r.unbounded_loop && !call.unbounded_loop) return;
      if (!args_match(r.args, call.args)) return;
    } else if (r.not_called) {
      return;
    }
    fire(k, call.line, detail);
  });
}

void RuleEngine::on_reference(std::string_view qual, uint32_t line) {
  lookup(qual, false, [&](size_t k) {
    if (rules_.rules()[k].type == Rule::Type::reference) fire(k, line, qual);
  });
}

void RuleEngine::on_string(std::string_view value, uint32_t line) {
  for (size_t k : rules_.index().strings) {
    const Rule& r = rules_.rules()[k];
    if (!r.contains.empty() && !contains_any(value, r.contains)) continue;
    if (r.regex && !r.regex->search(value)) continue;
    fire(k, line, "'" + readable(value) + "'");
  }
}

void RuleEngine::on_detector(Detector d, uint32_t line, std::string_view detail) {
  for (size_t k : rules_.index().detectors[static_cast<size_t>(d)]) fire(k, line, readable(detail));
}

void RuleEngine::on_star_import(std::string_view module) {
  if (star_modules_.size() < 16) star_modules_.emplace_back(module);
}

bool RuleEngine::loop_sensitive(std::string_view qual) {
  bool sensitive = false;
  lookup(qual, true, [&](size_t k) { sensitive = sensitive || rules_.rules()[k].unbounded_loop; });
  return sensitive;
}

void RuleEngine::fire(size_t k, uint32_t line, std::string_view detail) {
  const Rule& r = rules_.rules()[k];
  for (const auto& t : r.tags) {
    auto [it, fresh] = tags_.try_emplace(t, line);
    if (!fresh && line < it->second) it->second = line;
  }
  if (!r.report) return;
  State& st = state_[k];
  st.matched = true;
  if (st.count >= max_per_rule_ || std::find(st.lines.begin(), st.lines.end(), line) != st.lines.end()) return;
  ++st.count;
  st.lines.push_back(line);
  std::string msg = r.message;
  if (!detail.empty()) msg += " (" + std::string(detail) + ")";
  findings_.push_back(Finding{r.id, to_string(r.severity), static_cast<int>(line), std::move(msg)});
}

void RuleEngine::finish(std::vector<Finding>& findings, int& score) {
  for (size_t k : rules_.index().combos) {
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
