// Names bound by loops and classes. `for` loops over literals: the loop's names take the values of the items they iterate, so
// that `for cmd in COMMANDS: subprocess.run(cmd)` is read as a run of every command in the list
// and `for path, value in SETTINGS.items(): open(path, "w")` as a write of every key. A name
// that can hold several values holds them all, joined by kAlternative; a rule's argument test
// passes when any one of them passes it (rules.cpp).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess::detail {

namespace {

// The bracket that opens at `open` closes at the end of `s` (not `f(a) + g(b)`).
bool closes_at_end(std::string_view s, size_t open) {
  if (open >= s.size() || (s[open] != '(' && s[open] != '[' && s[open] != '{')) return false;
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(' || s[i] == '[' || s[i] == '{') ++depth;
    if (s[i] == ')' || s[i] == ']' || s[i] == '}') --depth;
    if (depth == 0) return i + 1 == s.size();
  }
  return false;
}

// `f(x)` -> `x` when `s` is one call of `fn` around all of it.
bool unwrap(std::string_view& s, std::string_view fn) {
  if (!s.starts_with(fn) || s.size() < fn.size() + 2 || s[fn.size()] != '(' || !closes_at_end(s, fn.size())) return false;
  s = s.substr(fn.size() + 1, s.size() - fn.size() - 2);
  return true;
}

// One bracketed literal spanning all of `s`: `[...]`, `(...)`, `{...}`.
bool one_literal(std::string_view s) { return closes_at_end(s, 0); }

// Item `i` of a tuple literal's value (its items joined by \x1f; "{}" or nothing where an item
// was not a constant string).
std::optional<ArgInfo> tuple_item(const ArgInfo& tuple, size_t i) {
  if (tuple.kind != Kind::container) return std::nullopt;
  std::string_view t = tuple.text;
  for (size_t k = 0; k < i; ++k) {
    const size_t sep = t.find('\x1f');
    if (sep == std::string_view::npos) return std::nullopt;
    t.remove_prefix(sep + 1);
  }
  t = t.substr(0, t.find('\x1f'));
  if (t.empty() || t == "{}") return std::nullopt;
  return ArgInfo{{}, Kind::string, std::string(t), false, tuple.folded, tuple.decoded};
}

// The values one name takes, as one ArgInfo. It is no constant (the name holds one value at a
// time, and "prefix" + name is no payload assembled from pieces): an expression whose pieces are
// the values, or a container when every value is one (a list of argument lists).
ArgInfo alternatives(const std::vector<ArgInfo>& values) {
  ArgInfo r = values.front();
  r.keyword.clear();
  r.dynamic = true;
  // One value is still a choice (of one): spelled twice, so that what reads a name's values
  // (paths, commands) finds it as it finds several.
  if (values.size() == 1 && r.kind != Kind::container) {
    r.text += kAlternative;
    append_capped(r.text, values.front().text, kMaxSymbolText);
  }
  for (size_t i = 1; i < values.size(); ++i) {
    const ArgInfo& v = values[i];
    if (v.kind != r.kind) r.kind = Kind::expr;
    r.folded |= v.folded;
    r.decoded |= v.decoded;
    r.text += kAlternative;
    append_capped(r.text, v.text, kMaxSymbolText);
  }
  if (r.kind != Kind::container) r.kind = Kind::expr;
  return r;
}

}  // namespace

// The tokens of a `for` header: its names up to `in`, then how the iterable is spelled.
void Analyzer::for_header_token(const Token& t) {
  if (for_phase_ == 0) {
    if (t.kind == TokKind::name && is_keyword(t.text)) {
      if (t.text == "in" && frames_.size() == 1) for_phase_ = 1;
      else if (t.text != "for" && t.text != "async") for_targets_ok_ = false;
    } else if (t.kind == TokKind::name) {
      if (for_targets_.size() < 4) for_targets_.emplace_back(t.text);
      else for_targets_ok_ = false;
    } else if (!(t.kind == TokKind::op && (t.text == "," || t.text == "(" || t.text == ")" || t.text == "[" ||
                                           t.text == "]"))) {
      for_targets_ok_ = false;  // `for self.x in`, `for d[k] in`: not plain names
    }
    return;
  }
  if (t.kind == TokKind::op && t.text == ":" && frames_.size() == 1) return;
  const bool word = t.kind == TokKind::name || t.kind == TokKind::op;
  if (!append_capped(for_iter_sig_, word ? t.text : std::string_view("$"), 96)) for_targets_ok_ = false;
}

// A list, tuple, set or dict literal closed at statement level: its items, for a name it is
// bound to or a `for` header it is the iterable of.
void Analyzer::capture_items(Frame& f) {
  stmt_items_ = Items{};
  stmt_items_set_ = true;
  const bool dict = f.kind == FrameKind::brace && f.key_mask != 0;
  stmt_items_.dict = dict;
  // Items are kept as short as a name's constant: a statement copies at most 32 KiB here.
  auto item = [](const ArgInfo& a) {
    return ArgInfo{{}, a.kind, a.text.substr(0, kMaxSymbolText), a.dynamic || a.text.size() > kMaxSymbolText, a.folded, a.decoded};
  };
  for (size_t i = 0; i < f.args.size() && i < 32; ++i) {
    if (!f.args[i].keyword.empty()) continue;
    const bool key = (f.key_mask >> i) & 1u;
    if (!dict || key) stmt_items_.keys.push_back(item(f.args[i]));
    else if (stmt_items_.values.size() < stmt_items_.keys.size()) stmt_items_.values.push_back(item(f.args[i]));
  }
  if (dict) stmt_items_.values.resize(stmt_items_.keys.size(), ArgInfo{{}, Kind::expr, {}, true});
}

void Analyzer::remember_items(const std::string& name, const ArgInfo& value) {
  if (value.kind == Kind::container && stmt_items_set_ && !stmt_items_.keys.empty()) {
    if (items_.size() < kMaxSymbols) items_[name] = stmt_items_;
  } else if (!items_.empty()) {
    items_.erase(name);
  }
}

void Analyzer::bind_loop_targets() {
  if (for_targets_.empty()) return;
  auto forget = [&] {
    for (const auto& t : for_targets_) symbols_.erase(t);
  };
  if (!for_targets_ok_) return forget();
  std::string_view s = for_iter_sig_;
  size_t skip = 0;
  if (unwrap(s, "enumerate")) skip = 1;
  for (std::string_view fn : {"sorted", "reversed", "list", "tuple", "set", "iter"})
    if (unwrap(s, fn)) break;
  enum class Part { items, keys, values, pairs } part = Part::items;
  auto strip = [&](std::string_view suffix) {
    if (!s.ends_with(suffix)) return false;
    s.remove_suffix(suffix.size());
    return true;
  };
  if (strip(".items()")) part = Part::pairs;
  else if (strip(".values()")) part = Part::values;
  else if (strip(".keys()")) part = Part::keys;
  const Items* src = nullptr;
  if (is_identifier(s) || (s.starts_with("self.") && is_identifier(s.substr(5)))) {
    if (auto it = items_.find(s); it != items_.end()) src = &it->second;
  } else if (one_literal(s) && stmt_items_set_) {
    src = &stmt_items_;
  }
  if (!src || skip >= for_targets_.size()) return forget();
  const size_t n = for_targets_.size() - skip;
  std::vector<std::vector<ArgInfo>> values(n);
  bool known = true;
  if (part == Part::pairs) {
    if (!src->dict || n != 2) return forget();
    values[0] = src->keys;
    values[1] = src->values;
  } else {
    const std::vector<ArgInfo>& from = (part == Part::values && src->dict) ? src->values : src->keys;
    if (part != Part::items && !src->dict) return forget();
    for (const ArgInfo& item : from) {
      if (n == 1) {
        values[0].push_back(item);
        continue;
      }
      for (size_t i = 0; i < n; ++i) {
        if (auto v = tuple_item(item, i)) values[i].push_back(std::move(*v));
        else known = false;
      }
    }
  }
  if (skip) symbols_.erase(for_targets_[0]);
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = for_targets_[skip + i];
    if (!known || values[i].empty()) {
      symbols_.erase(name);
      continue;
    }
    ArgInfo v = alternatives(values[i]);
    mark_flow(v, system_path_flow(v.text), stmt_line_);
    bind(name, v);
  }
}

void Analyzer::bind_loop_to_value(const ArgInfo& iter) {
  if (for_targets_.size() != 1 || !for_targets_ok_ || iter.kind != Kind::container || symbols_.count(for_targets_[0]) ||
      !names_a_path(iter.text))
    return;
  // `for path in targets(prefix):` over the list or generator a function of the file returns:
  // the name holds each item that says something (not "{}").
  std::vector<ArgInfo> values;
  std::string_view t = iter.text;
  for (size_t start = 0; start <= t.size() && values.size() < 32;) {
    size_t end = t.find('\x1f', start);
    if (end == std::string_view::npos) end = t.size();
    const std::string_view item = t.substr(start, end - start);
    if (!item.empty() && item != "{}") {
      // An item that is a loop's values is each of them.
      std::string text(item);
      if (text.size() > 2 && text.front() == kGroup && text.back() == kGroup && text.find(kGroup, 1) == text.size() - 1)
        text = text.substr(1, text.size() - 2);
      values.push_back(ArgInfo{{}, has_alternatives(text) ? Kind::expr : Kind::string, std::move(text), true,
                               iter.folded, iter.decoded});
    }
    start = end + 1;
  }
  if (values.empty()) return;
  ArgInfo v = alternatives(values);
  carry_flow(v, iter);
  mark_flow(v, system_path_flow(v.text), stmt_line_);
  bind(for_targets_[0], v);
}

const ArgInfo& Analyzer::iterated(const ArgInfo& v) const {
  if (!is_name_kind(v.kind) || !v.text.starts_with("local:") || !v.text.ends_with("()")) return v;
  if (!classes_.count(std::string_view(v.text).substr(0, v.text.size() - 2))) return v;
  const auto it = returns_.find("local:__iter__()");
  return it == returns_.end() ? v : it->second;
}

void Analyzer::prebind_comprehension(Frame& f, const char* at) {
  if (!tok_ || lookahead_budget_ == 0) return;
  // Inside a bracket already read to its end without a `for` at any depth: nothing to bind.
  if (std::less<const char*>()(at, no_for_until_)) return;
  bool any_for = false;
  Tokenizer ahead = *tok_;
  int depth = 0;
  int phase = 0;  // 0: the element, 1: the names after `for`, 2: the iterable after `in`
  std::vector<std::string> names;
  std::string sig;
  for (size_t n = 0; n < 512; ++n) {
    if (lookahead_budget_ == 0) return;
    --lookahead_budget_;
    const Token t = ahead.next();
    if (t.kind == TokKind::end || t.kind == TokKind::newline) return;
    if (t.kind == TokKind::nl || t.kind == TokKind::comment) continue;
    const bool op = t.kind == TokKind::op;
    if (t.kind == TokKind::name && t.text == "for") any_for = true;
    if (op && (t.text == "(" || t.text == "[" || t.text == "{")) {
      ++depth;
    } else if (op && (t.text == ")" || t.text == "]" || t.text == "}")) {
      if (depth == 0) {
        if (!any_for) no_for_until_ = t.text.data();
        break;
      }
      --depth;
    } else if (depth == 0 && t.kind == TokKind::name && phase == 0 && t.text == "for") {
      phase = 1;
      continue;
    } else if (depth == 0 && t.kind == TokKind::name && phase == 1 && t.text == "in") {
      phase = 2;
      continue;
    } else if (depth == 0 && t.kind == TokKind::name && phase == 2 &&
               (t.text == "if" || t.text == "for" || t.text == "async")) {
      break;
    }
    if (phase == 1) {
      if (t.kind == TokKind::name && !is_keyword(t.text) && names.size() < 4) names.emplace_back(t.text);
      else if (!op || (t.text != "," && t.text != "(" && t.text != ")" && t.text != "[" && t.text != "]")) return;
    } else if (phase == 2) {
      sig += t.kind == TokKind::name || op ? t.text : std::string_view("$");
      if (sig.size() > 96) return;
    }
  }
  // A literal iterable is not read here (its items are not known yet): only names of tables.
  if (phase != 2 || names.empty() || sig.empty() || sig[0] == '[' || sig[0] == '(' || sig[0] == '{') return;
  for (const auto& n : names) {
    const auto it = symbols_.find(n);
    f.comp_saved.emplace_back(n, it == symbols_.end() ? std::nullopt : std::optional<ArgInfo>(it->second));
  }
  std::swap(for_targets_, names);
  std::swap(for_iter_sig_, sig);
  const bool targets_ok = std::exchange(for_targets_ok_, true);
  const bool items_set = std::exchange(stmt_items_set_, false);
  bind_loop_targets();
  // What the iterated name carries, each item carries (as for a `for` statement).
  std::string_view s = for_iter_sig_;
  for (std::string_view fn : {"enumerate", "sorted", "reversed", "list", "tuple", "set", "iter"})
    if (unwrap(s, fn)) break;
  for (std::string_view suffix : {".items()", ".values()", ".keys()"})
    if (s.ends_with(suffix)) s.remove_suffix(suffix.size());
  // `for d in JobDirs()`, `for p in paths(root)`: what the file's own class or generator gives.
  if (const size_t open = s.find('('); open != std::string_view::npos && is_identifier(s.substr(0, open)) &&
      closes_at_end(s, open)) {
    const ArgInfo callee = resolve(s.substr(0, open));
    const std::string key = callee.text + "()";
    const auto r = classes_.count(callee.text) ? returns_.find("local:__iter__()") : returns_.find(key);
    if (callee.text.starts_with("local:") && r != returns_.end()) {
      bind_loop_to_value(r->second);
      ArgInfo flows_only;  // its parameters mean nothing here
      mark_flow(flows_only, r->second.flows, r->second.flow_line);
      carry_into_targets(flows_only);
    }
  } else if (is_identifier(s) || (s.starts_with("self.") && is_identifier(s.substr(5)))) {
    carry_into_targets(resolve(s));
  } else if (const auto v = resolve_attribute(s)) {
    // `[... for p in cfg.sources]`: an attribute of an object or class of the file's.
    bind_loop_to_value(*v);
    carry_into_targets(*v);
  }
  std::swap(for_targets_, names);
  std::swap(for_iter_sig_, sig);
  for_targets_ok_ = targets_ok;
  stmt_items_set_ = items_set;
}

std::optional<ArgInfo> Analyzer::resolve_attribute(std::string_view s) const {
  // NAME.ATTR as on_name reads it: a binding of the spelling, of the canonical text, or for an
  // object of one of the file's classes (local:Cls()) what its methods or body set as self.ATTR.
  const size_t dot = s.find('.');
  if (!dotted_symbols_ || dot == std::string_view::npos || !is_identifier(s.substr(0, dot)) ||
      !is_identifier(s.substr(dot + 1)) || s.starts_with("self."))
    return std::nullopt;
  if (auto raw = symbols_.find(s); raw != symbols_.end()) return raw->second;
  const ArgInfo base = resolve(s.substr(0, dot));
  const std::string text = base.text + std::string(s.substr(dot));
  if (auto it = symbols_.find(text); it != symbols_.end()) return it->second;
  if (base.text.starts_with("local:") && base.text.ends_with("()"))
    if (auto own = symbols_.find("self" + std::string(s.substr(dot))); own != symbols_.end()) return own->second;
  return std::nullopt;
}

void Analyzer::carry_into_targets(const ArgInfo& iter) {
  if (!iter.flows && !iter.params && !iter.path_params) return;
  for (const auto& name : for_targets_) {
    ArgInfo v = resolve(name);
    carry_flow(v, iter);
    bind(name, v);
  }
}

void Analyzer::restore_comprehension(Frame& f) {
  for (auto& [name, value] : f.comp_saved) {
    if (value) symbols_[name] = std::move(*value);
    else symbols_.erase(name);
  }
}

// `[k for k in os.environ if ...]` walks the whole environment, as a `for` statement over it does.
void Analyzer::comprehension_iterable_end() {
  if (comp_in_depth_ == 0 || comp_in_depth_ != frames_.size()) return;
  comp_in_depth_ = comp_for_depth_ = 0;
  report_environ_walk();
}

void Analyzer::report_environ_walk() {
  if (!prim_.active || !is_name_kind(prim_.val.kind)) return;
  const std::string it = detail::canonical(prim_.val.text);
  if (it == "os.environ" || it == "os.environb") report_call(it + ".__iter__", {}, prim_.line);
}

void Analyzer::bind_class_base(const std::vector<ArgInfo>& bases) {
  auto mixin = [](const std::string& n) {
    return n.size() >= 5 && (n.ends_with("Mixin") || n.ends_with("MixIn") || n.ends_with("mixin"));
  };
  const ArgInfo* pick = nullptr;
  for (const auto& b : bases) {
    if (!b.keyword.empty() || !is_name_kind(b.kind) || b.text == "object") continue;  // metaclass=...
    // Mixins come first by convention and bring no constructor of their own.
    if (!pick || (mixin(pick->text) && !mixin(b.text))) pick = &b;
  }
  if (pick) bind(class_name_, *pick);
  class_name_.clear();
}

}  // namespace sandboxrun::assess::detail
