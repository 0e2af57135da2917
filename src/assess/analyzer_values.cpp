// Bracket frames and the values they produce: subscripts (globals()[...], sys.modules[...],
// os.environ[...]), containers and the operands joined into an argument. Calls are in
// analyzer_calls.cpp.
#include <algorithm>
#include <cctype>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess::detail {

void Analyzer::push(FrameKind k, uint32_t line) { push_frame(k, line); }

void Analyzer::push_call(uint32_t line) {
  ArgInfo callee = std::move(prim_.val);
  std::string method = std::move(prim_.method);
  const bool one = prim_.attrs == 1 || prim_.attrs == 2;
  std::string receiver = one ? std::move(prim_.receiver) : std::string();
  prim_.active = false;
  if (Frame* f = push_frame(FrameKind::call, line)) {
    f->callee = std::move(callee);
    f->method = std::move(method);
    f->receiver = std::move(receiver);
  }
}

Frame* Analyzer::push_frame(FrameKind k, uint32_t line) {
  if (frames_.size() + overflow_ >= limits_.max_nesting && !nesting_reported_) {
    nesting_reported_ = true;
    sink_.on_detector(Detector::deep_nesting, line, std::to_string(limits_.max_nesting));
  }
  if (overflow_ || frames_.size() >= kMaxFrames) {
    ++overflow_;
    return nullptr;
  }
  // Built in place: a frame is ~300 bytes of strings and arguments, moved twice otherwise.
  Frame& f = frames_.emplace_back();
  f.kind = k;
  f.line = line;
  return &f;
}

// Moves the finished primary into the current argument of the top frame.
void Analyzer::flush() {
  last_flushed_raw_.clear();
  last_flushed_single_ = false;
  last_flushed_item_of_.clear();
  if (!prim_.active) return;
  prim_.active = false;
  if (overflow_) return;
  Primary p = std::move(prim_);
  prim_ = Primary{};
  if (is_name_kind(p.val.kind)) {
    detail::canonicalize(p.val.text);
    sink_.on_reference(p.val.text, p.line);
    // The environment as a value (json.dumps(os.environ), {"env": os.environ}): all of it.
    if (p.val.text == "os.environ" || p.val.text == "os.environb") mark_flow(p.val, flow_environ, p.line);
    // A function of the file's own passed as a value (a callback, `backup.snapshot`): whoever
    // calls it gets what it returns.
    if (!returns_.empty() && (p.val.text.starts_with("local:") || p.val.text.find('.') != std::string::npos))
      if (const auto own = own_method(p.val.text))
        if (const auto r = returns_.find(own->name + "()"); r != returns_.end())
          mark_flow(p.val, r->second.flows, r->second.flow_line);
  } else if (p.val.kind == Kind::string && !p.method.empty()) {
    p.val.dynamic = true;  // an unread attribute of a string: 'x'.upper
  } else if (p.val.kind == Kind::string && p.pieces > 0) {
    // Literals only: a name that holds a string was read when it was bound.
    if (!bare_strings_) on_string_value(p.val, p.line, p.pieces > 1);
    mark_flow(p.val, system_path_flow(p.val.text), p.line);
  }
  Frame& f = frames_.back();
  last_flushed_single_ = f.cur.kind == Kind::none && !p.raw_name.empty();
  last_flushed_raw_ = std::move(p.raw_name);
  last_flushed_item_of_ = std::move(p.item_of);
  add_operand(f, std::move(p.val));
}

void Analyzer::to_expr(ArgInfo& a) {
  if (a.kind == Kind::expr) return;
  if (a.kind != Kind::string) a.text.clear();
  a.kind = Kind::expr;
}

void Analyzer::add_operand(Frame& f, ArgInfo&& v) {
  ArgInfo& c = f.cur;
  // `rootdir + "/var/lib/dpkg/status"` is a path under rootdir: a system path only when the value
  // starts as one. A comprehension's iterable (`[p for p in root.glob("*")]`) gives its items.
  if (f.after_plus && c.kind != Kind::none && !(c.flows & flow_system))
    v.flows &= static_cast<uint8_t>(~flow_system);
  if (c.kind == Kind::none) {
    std::string kw = std::move(c.keyword);
    const bool dyn = c.dynamic;
    c = std::move(v);
    c.keyword = std::move(kw);
    c.dynamic |= dyn;
  } else if (f.after_plus && c.kind == Kind::string && v.kind == Kind::string) {
    // A cut constant is no longer the constant: treat it as computed.
    if (!append_capped(c.text, v.text, kMaxText)) c.dynamic = true;
    c.folded = true;
    c.dynamic |= v.dynamic;
    c.decoded |= v.decoded;
    carry_flow(c, v);
    if (!c.dynamic) mark_flow(c, system_path_flow(c.text), f.line);  // os.sep + "etc"
  } else if (f.after_plus && f.path_join && c.kind == Kind::string && !(v.kind == Kind::expr && has_alternatives(v.text))) {
    // Path("/proc") / name: still a path, its unknown piece "{}" as os.path.join writes it.
    append_capped(c.text, "{}", kMaxText);
    c.dynamic = true;
    c.decoded |= v.decoded;
    carry_flow(c, v);
  } else {
    // A name that holds several values, joined with more: its values become one group (after
    // a constant: `dir + name` with an unknown dir is no path that starts with name).
    const bool alt = f.after_plus && v.kind == Kind::expr && has_alternatives(v.text) &&
                     (c.kind == Kind::string || has_alternatives(c.text));
    to_expr(c);
    c.dynamic = true;
    if (f.after_plus && has_alternatives(c.text) && (alt || v.kind == Kind::string)) c.text = as_group(c.text);
    if (v.kind == Kind::string || (f.flag_chain && is_name_kind(v.kind))) append_capped(c.text, v.text, kMaxText);
    else if (alt) append_capped(c.text, as_group(v.text), kMaxText);
    c.decoded |= v.decoded;
    carry_flow(c, v);
  }
  f.after_plus = false;
  f.path_join = false;
}

void Analyzer::finish_arg(Frame& f) {
  if (f.cond) {
    std::string kw = std::move(f.cond_then.keyword);
    // Two constants, one or the other: both values, as a loop's name holds them; still a
    // constant (no input chose the text), so its rules read each.
    const bool both = f.cond == 2 && f.cond_then.kind == Kind::string && !f.cond_then.dynamic &&
                      f.cur.kind == Kind::string && !f.cur.dynamic && !has_alternatives(f.cur.text) &&
                      !has_alternatives(f.cond_then.text);
    // `sys.argv[1] if len(sys.argv) > 1 else "/usr"`, `os.getenv("ROOT") or "/srv"`: with no
    // input the program uses the path it spells; the value is either (the first unknown).
    const bool fallback_path = f.cond == 2 && f.cur.kind == Kind::string && !f.cur.dynamic &&
                               absolute_path(f.cur.text) && !has_alternatives(f.cur.text) &&
                               f.cond_then.kind != Kind::string && !f.cond_then.text.starts_with("local:");
    // `session or requests.Session()`: a parameter the caller may leave out (None) or the object
    // made here; the one made here is the one known.
    const bool made_here = f.cond == 2 && f.cond_then.kind == Kind::name && f.cond_then.params &&
                           !f.cond_then.flows && f.cur.kind == Kind::call && !f.cur.text.starts_with("local:");
    if (made_here) {
      carry_flow(f.cur, f.cond_then);
    } else if (both) {
      ArgInfo v{{}, Kind::expr, std::move(f.cond_then.text), false, f.cond_then.folded || f.cur.folded,
                f.cond_then.decoded || f.cur.decoded};
      v.text += kAlternative;
      append_capped(v.text, f.cur.text, kMaxText);
      f.cur = std::move(v);
    } else if (fallback_path) {
      ArgInfo v{{}, Kind::expr, "{}", true, f.cur.folded, f.cond_then.decoded || f.cur.decoded};
      v.text += kAlternative;
      append_capped(v.text, f.cur.text, kMaxText);
      carry_flow(v, f.cond_then);
      f.cur = std::move(v);
    } else {
      f.cur = std::move(f.cond_then);
    }
    f.cur.keyword = std::move(kw);
    f.cond = 0;
  }
  if (f.cur.kind != Kind::none || !f.cur.keyword.empty()) {
    // A call's positional argument that is one name: a function that fills it (lst.append(...))
    // fills the caller's (see note_mutation).
    if (!mutations_.empty() && f.kind == FrameKind::call && f.cur.keyword.empty() && last_flushed_single_ &&
        !last_flushed_raw_.empty() && f.args.size() < 32)
      f.arg_names.emplace_back(static_cast<uint8_t>(f.args.size()), last_flushed_raw_);
    if (f.args.size() < kMaxArgs) f.args.push_back(std::move(f.cur));
  }
  f.cur = ArgInfo{};
  f.after_plus = false;
  f.flag_chain = false;
}

void Analyzer::close_frame() {
  if (overflow_) {
    --overflow_;
    return;
  }
  if (frames_.size() <= 1) return;  // a stray closer
  Frame f = std::move(frames_.back());
  frames_.pop_back();
  restore_comprehension(f);
  // An f-string collects its text in cur; its fields report into it directly.
  if (f.kind != FrameKind::fstring) finish_arg(f);
  if (f.kind == FrameKind::call)
    for (const auto& a : f.args)
      if (a.kind == Kind::string && a.folded) on_string_value(a, f.line, true);
  if (f.kind == FrameKind::group && frames_.size() == 1 && !class_name_.empty()) bind_class_base(f.args);
  if (((frames_.size() == 1 && targets_.size() == 1) || (header_ == Header::for_ && !header_colon_)) &&
      (f.kind == FrameKind::list || f.kind == FrameKind::group || f.kind == FrameKind::brace))
    capture_items(f);
  // What the frame's values carry goes to the value it makes: a call's result (its receiver
  // and arguments), an item or slice of a value, a container.
  // One variable of the environment (os.environ["HOME"], env.get("TOKEN")) is a setting, not
  // the environment.
  ArgInfo carried;
  {
    ArgInfo base;
    carry_flow(base, f.callee);
    const std::string_view ct = f.callee.text;
    if (f.kind == FrameKind::subscript ||
        (f.kind == FrameKind::call && (ct.ends_with(".get") || ct.ends_with(".pop") || ct.ends_with(".setdefault"))))
      base.flows &= static_cast<uint8_t>(~flow_environ);
    carry_flow(carried, base);
  }
  for (const auto& a : f.args) carry_flow(carried, a);
  // A system path stays one through what builds, finds or opens paths; any other call (a string
  // method, a count, the file's own function, whose summary maps it) makes something else of it.
  if (f.kind == FrameKind::call && (carried.flows & flow_system) && is_name_kind(f.callee.kind) &&
      !keeps_system_path(detail::canonical(f.callee.text)) && !own_holder(detail::canonical(f.callee.text)))
    carried.flows &= static_cast<uint8_t>(~flow_system);
  if (f.kind == FrameKind::call && !f.receiver.empty()) mutate_receiver(f);
  Primary result;
  result.active = true;
  result.line = f.line;
  switch (f.kind) {
    case FrameKind::call: result.val = close_call(f); break;
    case FrameKind::subscript:
      result.val = close_subscript(f);
      // A known item of a table: its own text says whether it is a system path, not its table's.
      if (std::exchange(item_known_, false)) carried.flows &= static_cast<uint8_t>(~flow_system);
      result.item_of = std::move(f.receiver);
      break;
    case FrameKind::group:
      if (f.args.size() == 1 && f.args[0].keyword.empty()) {
        result.val = std::move(f.args[0]);
        break;
      }
      [[fallthrough]];
    case FrameKind::list:
      check_fragments(f.args, f.line);
      check_code_list(f.args, f.line);
      check_python_c(f.args, f.line);
      result.val = container(f.args);
      break;
    case FrameKind::brace:
      // method: "os.environ.copy()" when the literal unpacks the environment ({**os.environ}).
      result.val = f.method.empty() ? ArgInfo{{}, Kind::container, {}, true, false, any_decoded(f.args)}
                                    : ArgInfo{{}, Kind::call, f.method, true, false, false};
      if (!f.method.empty()) mark_flow(result.val, flow_environ, f.line);
      break;
    case FrameKind::fstring: {
      result.val = ArgInfo{{}, Kind::string, std::move(f.cur.text), f.cur.dynamic, false, f.cur.decoded};
      carry_flow(result.val, f.cur);
      mark_flow(result.val, system_path_flow(result.val.text), f.line);
      // The string rules read it with "{}" where its fields are: f"{a}:{b}" is no "::".
      if (!result.val.text.empty()) {
        if (bare_strings_) deferred_strings_.emplace_back(f.method, f.line);
        else emit_string(f.method, f.line);
      }
      break;
    }
    case FrameKind::field: {
      // The field's value becomes part of the enclosing f-string.
      Frame& parent = frames_.back();
      if (parent.kind == FrameKind::fstring) {
        append_capped(parent.method, "{}", kMaxText);
        // f"of={disk}": a constant or the values of a loop's name stand in the text where the
        // field is (the string rules still read "{}" there).
        if (f.args.size() == 1 && !f.in_spec && f.args[0].keyword.empty()) {
          const ArgInfo& v = f.args[0];
          if (v.kind == Kind::string && !v.dynamic) append_capped(parent.cur.text, v.text, kMaxText);
          else if (v.kind == Kind::expr && has_alternatives(v.text)) append_capped(parent.cur.text, as_group(v.text), kMaxText);
        }
        parent.cur.dynamic = true;
        parent.cur.decoded |= any_decoded(f.args);
        for (const auto& a : f.args) carry_flow(parent.cur, a);
      }
      return;
    }
    case FrameKind::statement: break;
  }
  carry_flow(result.val, carried);
  prim_ = std::move(result);
}

bool Analyzer::any_decoded(const std::vector<ArgInfo>& args) {
  for (const auto& a : args)
    if (a.decoded) return true;
  return false;
}

ArgInfo Analyzer::container(std::vector<ArgInfo>& items) {
  ArgInfo c;
  c.kind = Kind::container;
  bool first = true;
  for (auto& a : items) {
    // A separator between every two items, empty ones too: "-".join(["", "b"]) is "-b", and
    // ("", port) must not read as (port).
    if (!first) append_capped(c.text, "\x1f", kMaxText);
    first = false;
    if (a.kind == Kind::string) append_capped(c.text, a.text, kMaxText);
    // A non-constant item reads "{}", as in paths: ("", port) is the empty host, (host, port)
    // is not. A name that holds several values (a loop's) is their group.
    if (a.kind != Kind::string && a.kind != Kind::literal) {
      c.dynamic = true;
      append_capped(c.text, a.kind == Kind::expr && has_alternatives(a.text) ? as_group(a.text) : "{}", kMaxText);
    }
    c.dynamic |= a.dynamic;
    c.decoded |= a.decoded;
  }
  return c;
}

// A table of the file's own functions (ACTIONS = {"delete": delete}) read with a key not known
// here (ACTIONS[t.action](path)): any of them, as alternatives that a call applies one by one
// (close_call). A constant key names its item (constant_item), a function as any other value.
std::optional<ArgInfo> Analyzer::own_function_item(const std::string& table, const ArgInfo& key) const {
  const auto it = items_.find(table);
  if (table.empty() || it == items_.end() || !it->second.dict) return std::nullopt;
  if (key.kind == Kind::string && !key.dynamic) return std::nullopt;
  const Items& items = it->second;
  std::string alts;
  size_t n = 0;
  for (size_t i = 0; i < items.keys.size() && i < items.values.size(); ++i) {
    const ArgInfo& v = items.values[i];
    if (!is_name_kind(v.kind) || !v.text.starts_with("local:")) continue;
    if (++n > kMaxOwnAlternatives) return std::nullopt;
    if (!alts.empty()) alts += kAlternative;
    alts += v.text;
  }
  if (n == 1) return ArgInfo{{}, Kind::name, std::move(alts), true};
  if (n == 0) return std::nullopt;
  return ArgInfo{{}, Kind::expr, std::move(alts), true};
}

// TABLE["key"] of a dict literal the file bound: that item's value (SOURCES["release"] is the
// path it holds, which open() then reads).
std::optional<ArgInfo> Analyzer::constant_item(const std::string& table, const ArgInfo& key) const {
  if (table.empty() || key.kind != Kind::string || key.dynamic) return std::nullopt;
  const auto it = items_.find(table);
  if (it == items_.end() || !it->second.dict) return std::nullopt;
  const Items& items = it->second;
  for (size_t i = 0; i < items.keys.size() && i < items.values.size(); ++i)
    if (items.keys[i].kind == Kind::string && items.keys[i].text == key.text && items.values[i].kind != Kind::expr)
      return items.values[i];
  return std::nullopt;
}

ArgInfo Analyzer::close_subscript(Frame& f) {
  ArgInfo& base = f.callee;
  const ArgInfo key = f.args.empty() ? ArgInfo{} : f.args[0];
  if (base.kind == Kind::string && (f.sig == "::-1" || f.sig == ":::-1")) {
    sink_.on_detector(Detector::reversed_string, f.line, {});
    ArgInfo r = std::move(base);
    std::reverse(r.text.begin(), r.text.end());
    r.folded = true;
    return r;
  }
  // Reversed text that is not a constant here (`return s[::-1]`): an encoding if it runs.
  if (f.sig == "::-1" || f.sig == ":::-1") return ArgInfo{{}, Kind::expr, {}, true, false, true};
  if (base.kind == Kind::container) {
    if (auto fn = own_function_item(f.receiver, key)) return std::move(*fn);
    if (auto v = constant_item(f.receiver, key)) {
      // The item's own text says whether it is a system path; data the table holds stays with
      // every item (items keep no flows of their own).
      ArgInfo data;
      carry_flow(data, base);
      data.flows &= static_cast<uint8_t>(~flow_system);
      carry_flow(*v, data);
      mark_flow(*v, system_path_flow(v->text), f.line);
      item_known_ = true;
      return std::move(*v);
    }
  }
  if (!is_name_kind(base.kind)) return ArgInfo{{}, Kind::expr, {}, true, false, base.decoded || key.decoded};
  const std::string bq = detail::canonical(base.text);
  const bool const_key = key.kind == Kind::string && !key.dynamic;
  if (const_key) {
    if (bq == "globals()") {
      if (key.text == "__builtins__") {
        sink_.on_detector(Detector::builtins_dict, f.line, "globals()['__builtins__']");
        return ArgInfo{{}, Kind::name, "builtins", true};
      }
      return ArgInfo{{}, Kind::name, key.text, true};
    }
    if (bq == "builtins" || bq == "__builtins__" || bq == "__builtin__") {
      sink_.on_detector(Detector::builtins_dict, f.line, key.text);
      if (key.folded || key.decoded) sink_.on_reference("<computed>." + key.text, f.line);
      return ArgInfo{{}, Kind::name, key.text, true};
    }
    if (bq == "sys.modules") return ArgInfo{{}, Kind::name, key.text, true};
    if (modules_.count(bq)) {
      // os.__dict__['system'], vars(os)['system']: the attribute, as getattr reads it.
      if (key.folded || key.decoded) computed_name(key.text, f.line);
      ArgInfo v{{}, Kind::name, detail::canonical(bq + "." + key.text), true};
      if (v.text.size() > kMaxQual) v.text.resize(kMaxQual);
      sink_.on_reference(v.text, f.line);
      return v;
    }
  } else if (key.kind != Kind::none && (bq == "globals()" || modules_.count(bq))) {
    namespace_key(key, f.line);
  }
  std::string sq = bq + "[]";
  std::span<const ArgInfo> args(&key, key.kind == Kind::none ? 0 : 1);
  sink_.on_call(CallEvent{sq, f.line, args, false, true, depth_ > 0});
  return ArgInfo{{}, Kind::name, std::move(sq), true, false, base.decoded};
}

// Python 2 statements, `exec code` and `print x`: a statement that starts with the bare name and
// goes on with a name or a string, which Python 3 rejects. The file cannot run as Python 3
// (the python2 detector), and `exec code` is still read as the call it was.
void Analyzer::python2_statement(uint32_t line, bool before_name) {
  if (!prim_.active || frames_.back().kind != FrameKind::statement || frames_.back().cur.kind != Kind::none ||
      frames_.size() != 1 || !frames_.back().args.empty())
    return;
  if (prim_.raw_name != "exec" && prim_.raw_name != "print") return;
  if (prim_.line != line) return;  // the name ended its own line: a bare expression statement
  (void)before_name;
  // Only the file itself: docstrings read as code hold prose and doctest lines.
  if (depth_ == 0) sink_.on_detector(Detector::python2, line, prim_.raw_name + " statement");
  if (prim_.raw_name == "exec") push_call(line);
}

void Analyzer::on_colon(Frame& top) {
  if (top.kind == FrameKind::field) {
    top.in_spec = true;
  } else if (top.kind == FrameKind::statement && header_ != Header::none && !header_colon_) {
    header_colon_ = true;
    on_header_colon();
  } else if (top.kind == FrameKind::statement && frames_.size() == 1 && header_ == Header::none &&
             targets_.empty() && annotated_.empty() && top.args.empty() && last_flushed_single_ &&
             !last_flushed_raw_.empty() && top.cur.kind != Kind::none) {
    // `NAME: TYPE = value` (see on_assign): what follows up to '=' is the annotation.
    annotated_ = last_flushed_raw_;
    top.cur.dynamic = true;
  } else if (top.kind == FrameKind::brace && top.cur.kind != Kind::none && top.args.size() < kMaxArgs) {
    // A dict's key: an item of its own, so that its keys and values stay apart.
    finish_arg(top);
    top.key_mask |= 1u << (top.args.size() - 1);
  } else {
    top.cur.dynamic = true;
  }
}

void Analyzer::on_assign(Frame& top) {
  // `NAME: TYPE = value`: NAME is the target, the annotation no part of the value.
  if (frames_.size() == 1 && !annotated_.empty() && targets_.empty()) {
    targets_.push_back(std::move(annotated_));
    annotated_.clear();
    top.cur = ArgInfo{};
    top.args.clear();
    top.after_plus = false;
    return;
  }
  // d[key] = value: d holds what value carries (see end_statement).
  if (frames_.size() == 1 && !last_flushed_item_of_.empty()) item_target_ = last_flushed_item_of_;
  // flush() ran: a bare NAME just before '=' is now the whole current argument.
  if (top.kind == FrameKind::call || top.kind == FrameKind::statement) {
    if (!last_flushed_raw_.empty() && top.cur.kind != Kind::none && last_flushed_single_) {
      if (top.kind == FrameKind::call) {
        top.cur = ArgInfo{};
        top.cur.keyword = last_flushed_raw_;
      } else {
        if (targets_.empty() && !unpack_names_.empty() && unpack_names_.size() == top.args.size()) {
          unpack_ = unpack_names_;
          unpack_.push_back(last_flushed_raw_);
          top.args.clear();
        }
        if (targets_.size() < 4) targets_.push_back(last_flushed_raw_);
        top.cur = ArgInfo{};
      }
      top.after_plus = false;
      return;
    }
    top.cur = ArgInfo{};
    top.args.clear();
    return;
  }
  top.cur.dynamic = true;
}

void Analyzer::bind(const std::string& name, const ArgInfo& value) {
  if (symbols_.size() >= kMaxSymbols && !symbols_.count(name)) return;
  ArgInfo v = value;
  v.keyword.clear();
  if (is_name_kind(v.kind)) detail::canonicalize(v.text);
  if (v.kind == Kind::string && v.folded) on_string_value(v, stmt_line_, true);
  // Every use of a name copies its value: keep long constants short, and read them as
  // code once here in case they are exec'd later.
  if (v.kind == Kind::string && v.text.size() > kMaxSymbolText) {
    if (!v.dynamic && looks_like_text(v.text)) enqueue(v.text, stmt_line_, depth_ + 1);
    v.text.resize(kMaxSymbolText);
    v.dynamic = true;
  }
  dotted_symbols_ |= name.find('.') != std::string::npos;
  symbols_[name] = std::move(v);
}

void Analyzer::on_header_colon() {
  bool body;
  if (header_ == Header::while_) {
    body = while_sig_ == "True" || while_sig_ == "1" || while_sig_ == "notFalse" || while_sig_ == "not0" ||
           while_sig_ == "notNone";
  } else if (header_ == Header::for_) {
    body = header_unbounded_;
  } else {
    body = false;
  }
  header_unbounded_ = body;
  Block b;
  if (header_ == Header::while_ || header_ == Header::for_) b.kind = BlockKind::loop;
  else if (header_ == Header::def_ && !def_name_.empty()) b.kind = BlockKind::function;
  b.header_unbounded = body;
  b.name = def_name_;
  if (b.kind == BlockKind::function) {
    b.params = std::move(def_params_);
    b.defaults = std::move(def_defaults_);
    b.classes = std::move(def_classes_);
    b.kwargs = def_kwargs_;
  }
  def_params_.clear();
  def_kwargs_ = kNoKwargs;
  def_defaults_.clear();
  def_classes_.clear();
  if (header_ == Header::def_ && !def_is_function_ && !class_header_.empty()) {
    b.class_body = true;
    b.name = "local:" + class_header_;
    if (classes_.size() < kMaxSymbols) classes_.insert(b.name);
  }
  if (b.kind == BlockKind::function && static_pending_ && static_methods_.size() < kMaxSymbols)
    static_methods_.insert(b.name);
  static_pending_ = false;
  if (b.kind == BlockKind::function && decorated_.size() < kMaxSymbols) {
    if (!decorators_pending_.empty()) decorated_[b.name] = std::move(decorators_pending_);
    // A def inside a function (a decorator's wrapper): what the outer one may hand out.
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
      if (it->kind == BlockKind::function) {
        if (auto& in = inner_[it->name]; in.size() < 8) in.push_back(b.name);
        break;
      }
  }
  decorators_pending_.clear();
  header_block_ = std::move(b);
}

// Token-level facts that need no frame: environment unpacking and Python 2 except clauses.
void Analyzer::token_hooks(const Token& t, uint32_t line) {
  // `{**os.environ}` / `dict(**os.environ)`: the whole environment is copied, as by .copy().
  if (unpack_env_ && t.kind != TokKind::name && !(t.kind == TokKind::op && t.text == ".")) {
    unpack_env_ = false;
    if (prim_.active && is_name_kind(prim_.val.kind)) {
      const std::string q = detail::canonical(prim_.val.text);
      if (q == "os.environ" || q == "os.environb") {
        report_call(q + ".copy", {}, line);
        // The dict literal is then a copy of the environment wherever it goes.
        if (frames_.back().kind == FrameKind::brace) frames_.back().method = "os.environ.copy()";
      }
    }
  }
  if (t.kind == TokKind::op && t.text == "**") unpack_env_ = true;
  if (header_ == Header::for_ && !header_colon_) for_header_token(t);
  // `except E, e:` is Python 2 only. Python 3.14 reads `except A, B:` as two exception types
  // (PEP 758), so only a lower-case name last, the Python 2 binding, says Python 2.
  if (except_comma_ == 2) {
    if (t.kind == TokKind::op && t.text == ":") sink_.on_detector(Detector::python2, line, "except E, e");
    except_comma_ = 0;
  } else if (except_comma_ == 1) {
    const bool binding = t.kind == TokKind::name && !t.text.empty() && (std::islower(static_cast<unsigned char>(t.text[0])) || t.text[0] == '_');
    except_comma_ = binding ? 2 : 0;
  }
  if (except_stmt_ && depth_ == 0 && t.kind == TokKind::op && t.text == "," && frames_.size() == 1 && !header_colon_) {
    except_stmt_ = false;
    except_comma_ = 1;
  }
}

}  // namespace sandboxrun::assess::detail
