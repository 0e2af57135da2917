// Token stream -> facts. A bracket stack (bounded) follows calls and their arguments; a
// symbol table follows imports, aliases and string constants; a block stack follows
// unbounded loops. Code hidden in exec'd literals and decoded strings is queued and analyzed
// after the file, iteratively, within fragment limits. This file reads tokens, statements,
// and imports; analyzer_values.cpp builds the values of calls and subscripts, analyzer_loops.cpp
// follows blocks and loops, analyzer_checks.cpp checks what no single rule can.
#include <algorithm>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess {

namespace detail {

void Analyzer::run(std::string_view source) {
  string_budget_ = 2 * uint64_t(source.size()) + limits_.max_fragment_bytes + (64 << 10);
  lookahead_budget_ = 2 * uint64_t(source.size()) + (64 << 10);
  scan_lines(source);
  own_serialized_ = detail::pickles_own_objects(source);
  if (auto enc = detail::unusual_source_encoding(source)) sink_.on_detector(Detector::source_encoding, 1, *enc);
  if (auto what = detail::foreign_format(source)) sink_.on_detector(Detector::not_python, 1, *what);
  analyze_text(source, 0, 0);
  if (doc_referenced_)
    for (auto& d : docstrings_) enqueue(std::move(d.first), d.second, 1);
  docstrings_.clear();
  while (!queue_.empty()) {
    Fragment f = std::move(queue_.front());
    queue_.pop_front();
    analyze_text(f.text, f.origin_line, f.depth);
  }
}

void Analyzer::analyze_text(std::string_view text, uint32_t origin_line, uint32_t depth) {
  origin_line_ = origin_line;
  depth_ = depth;
  frames_.assign(1, Frame{});
  no_for_until_ = nullptr;
  overflow_ = 0;
  nesting_reported_ = false;
  prim_ = Primary{};
  blocks_.clear();
  block_overflow_ = 0;
  header_block_.reset();
  suite_on_line_ = false;
  start_statement();
  TokenizerLimits tl;
  tl.wide_gap = limits_.wide_gap;
  Tokenizer tok(text, tl);
  tok_ = &tok;
  for (;;) {
    Token t = tok.next();
    if (t.kind == TokKind::end) break;
    on_token(t);
  }
  end_statement();
  tok_ = nullptr;
  while (!blocks_.empty()) pop_block();
  // Only the file itself: a fragment (an exec'd literal, decoded text) may well be a snippet.
  if (depth == 0 && tok.open_brackets() > 0)
    sink_.on_detector(Detector::syntax_error, last_line_, "a bracket opened before the end is never closed");
}

void Analyzer::start_statement() {
  item_target_.clear();
  stmt_fresh_ = true;
  await_pending_ = false;
  prev_plain_name_ = prev_lt_ = false;
  import_mode_ = false;
  header_ = Header::none;
  header_colon_ = false;
  header_unbounded_ = false;
  def_name_.clear();
  class_name_.clear();
  class_header_.clear();
  while_sig_.clear();
  targets_.clear();
  aug_target_.clear();
  annotated_.clear();
  self_refs_ = 0;
  saw_plus_ = saw_mul_ = doubles_ = false;
  def_pending_ = false;
  return_fn_.clear();
  yields_ = false;
  except_stmt_ = false;
  except_comma_ = 0;
  unpack_names_.clear();
  unpack_.clear();
  comp_for_depth_ = comp_in_depth_ = 0;
  for_phase_ = 0;
  for_targets_ok_ = true;
  for_targets_.clear();
  for_iter_sig_.clear();
  stmt_items_set_ = false;
  as_pending_ = false;
  bare_strings_ = true;
  deferred_strings_.clear();
  dot_pending_ = false;
  prev_string_ = false;
}

void Analyzer::on_token(const Token& t) {
  switch (t.kind) {
    case TokKind::comment:
    case TokKind::nl:
    case TokKind::end:
      return;
    case TokKind::indent:
      push_block(header_block_ ? std::move(*header_block_) : Block{});
      header_block_.reset();
      return;
    case TokKind::dedent:
      pop_block();
      return;
    case TokKind::newline:
      end_statement();
      return;
    default:
      break;
  }
  const uint32_t line = line_of(t);
  last_line_ = line;
  if ((t.flags & tokflag::unterminated) && depth_ == 0 && (t.kind == TokKind::string || t.kind == TokKind::fstring_end))
    sink_.on_detector(Detector::syntax_error, line, "a string literal is never closed");
  if (t.flags & tokflag::folded) sink_.on_detector(Detector::unicode_identifier, line, t.text);
  if (t.flags & tokflag::wide_gap) sink_.on_detector(Detector::wide_gap, line, t.text.substr(0, 40));

  if (t.kind != TokKind::string && bare_strings_) {
    bare_strings_ = false;
    for (auto& [v, l] : deferred_strings_) emit_string(v, l);
    deferred_strings_.clear();
  }
  if (import_mode_) {
    if (t.kind == TokKind::op && t.text == ";") {
      end_statement();
      return;
    }
    if ((t.kind == TokKind::name || t.kind == TokKind::op) && import_tokens_.size() < kMaxImportTokens)
      import_tokens_.emplace_back(t.text);
    return;
  }
  const bool fresh = stmt_fresh_;
  stmt_fresh_ = false;
  check_syntax(t, line, fresh);
  if (header_block_ && header_colon_ && !suite_on_line_) {
    // `while True: os.fork()`: the suite is on the header's line.
    push_block(std::move(*header_block_));
    header_block_.reset();
    suite_on_line_ = true;
  }
  if (fresh && !suite_on_line_) header_block_.reset();  // no INDENT came for it
  if (fresh) {
    stmt_line_ = line;
    decorator_ = t.kind == TokKind::op && t.text == "@";
    if (t.kind == TokKind::name && (t.text == "import" || t.text == "from")) {
      import_mode_ = true;
      import_tokens_.assign(1, std::string(t.text));
      return;
    }
    if (t.kind == TokKind::name) {
      if (t.text == "while") header_ = Header::while_;
      else if (t.text == "for") header_ = Header::for_;
      else if (t.text == "def" || t.text == "class" || t.text == "async") header_ = Header::def_;
      else if (is_keyword(t.text)) header_ = Header::other;
      except_stmt_ = t.text == "except";
    }
    if (header_ == Header::while_) return;
  }
  if (header_ == Header::while_ && !header_colon_ && !(t.kind == TokKind::op && t.text == ":")) {
    if (t.text != "(" && t.text != ")") append_capped(while_sig_, t.text, 32);
  }
  if (frames_.back().kind == FrameKind::subscript && !overflow_ && t.text != "]")
    append_capped(frames_.back().sig, t.text, 16);
  token_hooks(t, line);
  lambda_token(t);
  const bool was_dot = dot_pending_;
  const bool was_string = prev_string_;
  dot_pending_ = false;
  prev_string_ = false;
  switch (t.kind) {
    case TokKind::name: on_name(t, line, was_dot); break;
    case TokKind::number:
      flush();
      prim_ = Primary{true, ArgInfo{{}, Kind::literal, std::string(t.text)}, {}, {}, line};
      break;
    case TokKind::string: on_string_token(t, line, was_string); break;
    case TokKind::fstring_start:
      flush();
      push(FrameKind::fstring, line);
      break;
    case TokKind::fstring_middle: {
      Frame& f = frames_.back();
      if (f.kind == FrameKind::fstring && !overflow_) {
        const std::string piece = fstring_middle_value(t.text, (t.flags & tokflag::raw) != 0);
        append_capped(f.cur.text, piece, kMaxText);
        append_capped(f.method, piece, kMaxText);
      }
      break;
    }
    case TokKind::fstring_end: close_frame(); prev_string_ = true; break;
    case TokKind::op: on_op(t, line); break;
    default:  // error bytes: whatever they touch is not a constant
      flush();
      frames_.back().cur.dynamic = true;
      break;
  }
}

void Analyzer::on_name(const Token& t, uint32_t line, bool was_dot) {
  std::string_view name = t.text;
  if (is_keyword(name)) {
    on_keyword(name, line);
    return;
  }
  if (def_pending_) {
    def_pending_ = false;
    const std::string sym = "local:" + std::string(name);
    if (def_is_function_) def_name_ = sym;
    else if (frames_.size() == 1) class_name_ = class_header_ = name;
    bind(std::string(name), ArgInfo{{}, Kind::name, sym, true});
    // A method: self.NAME is it, not another class's attribute of that name (a dataclass's
    // `dmi: dict = field(...)` above `def dmi(self)` of another class).
    if (def_is_function_ && !blocks_.empty() && blocks_.back().class_body && dotted_symbols_)
      symbols_.erase("self." + std::string(name));
    return;
  }
  if (as_pending_) {
    as_pending_ = false;
    bind(std::string(name), as_value_);
    return;
  }
  // path=HOSTS_FILE: the constant the name holds is the default.
  // reader=_read_bytes: a function of the file's is the default too.
  if (default_next_ && !was_dot && header_ == Header::def_ && frames_.size() == 2)
    if (const ArgInfo v = resolve(name); v.kind == Kind::string || (v.kind == Kind::name && v.text.starts_with("local:")))
      note_def_default(v.text);
  if (annotation_next_ && header_ == Header::def_ && def_is_function_ && frames_.size() == 2 && !was_dot)
    note_param_class(name);
  if (param_next_ && header_ == Header::def_ && def_is_function_ && frames_.size() == 2 && !was_dot) {
    if (def_params_.size() < 32) {
      if (kwargs_next_) def_kwargs_ = def_params_.size();
      def_params_.emplace_back(name);
    }
    param_next_ = false;
  }
  // A docstring may hold code that exec(__doc__) runs; ArgumentParser(description=__doc__) shows it.
  if (name == "__doc__") {
    const std::string_view kw = frames_.back().cur.keyword;
    if (kw != "description" && kw != "epilog" && kw != "usage" && kw != "help") doc_referenced_ = true;
  }
  if (was_dot && prim_.active) {
    if (prim_.val.kind == Kind::string) {
      prim_.method.assign(name);
      return;
    }
    if (!is_name_kind(prim_.val.kind)) {
      ArgInfo unknown{{}, Kind::name, "?", true};
      carry_flow(unknown, prim_.val);
      prim_.val = std::move(unknown);
    }
    prim_.val.kind = Kind::name;
    // s.lines.append(...), self.lines.append(...): the receiver is the attribute s.lines.
    if (prim_.attrs == 0) prim_.first_attr = name;
    if (prim_.attrs == 1) prim_.receiver += "." + prim_.first_attr;
    if (prim_.attrs < 3) ++prim_.attrs;
    append_capped(prim_.val.text, ".", kMaxQual);
    append_capped(prim_.val.text, name, kMaxQual);
    // `self.run` is a name of its own: `self.run = os.system` binds it, as `run = ...` would;
    // so is `profile.raw = ...` on an object of the program's (a module's attribute is not).
    if (prim_.raw_name == "self" || (prim_.attrs == 1 && !prim_.raw_name.empty() &&
                                     prim_.raw_name.find('.') == std::string::npos && !modules_.count(prim_.raw_name)))
      prim_.raw_name += "." + std::string(name);
    else prim_.raw_name.clear();
    // An attribute the file assigned: `self.run = os.system`, a class's `cmd = "rm -rf /"`.
    if (dotted_symbols_) {
      if (auto raw = prim_.raw_name.starts_with("self.") ? symbols_.end() : symbols_.find(prim_.raw_name);
          raw != symbols_.end()) {
        prim_.val = raw->second;
      } else if (auto it = symbols_.find(prim_.val.text); it != symbols_.end()) {
        prim_.val = it->second;
      } else if (std::string_view q = prim_.val.text; q.starts_with("local:") && q.find("().") != std::string_view::npos) {
        // obj.attr where obj = local:Cls(): what the class's methods set as self.attr.
        if (auto own = symbols_.find("self." + std::string(name)); own != symbols_.end()) prim_.val = own->second;
      }
    }
    // args.root of an option with a path default; os.sep.
    if (auto d = arg_default_value(prim_.val, line)) prim_.val = std::move(*d);
    else if (name == "sep" && (prim_.val.text == "os.sep" || prim_.val.text == "os.path.sep"))
      prim_.val = ArgInfo{{}, Kind::string, "/"};
    return;
  }
  if (frames_.size() == 1 && ((!targets_.empty() && name == targets_[0]) || name == aug_target_)) ++self_refs_;
  python2_statement(line, true);
  flush();
  prim_ = Primary{true, resolve(name), std::string(name), {}, line};
  prim_.receiver = name;
}

ArgInfo Analyzer::resolve(std::string_view name) const {
  if (auto it = symbols_.find(name); it != symbols_.end()) return it->second;
  return ArgInfo{{}, Kind::name, std::string(name), true};
}

void Analyzer::on_keyword(std::string_view kw, uint32_t line) {
  comprehension_iterable_end();
  if (kw == "True" || kw == "False" || kw == "None") {
    flush();
    prim_ = Primary{true, ArgInfo{{}, Kind::literal, std::string(kw)}, {}, {}, line};
    return;
  }
  flush();
  if (kw == "def" || kw == "class") {
    def_pending_ = true;
    def_is_function_ = kw == "def";
    def_params_.clear();
    def_defaults_.clear();
    param_next_ = default_next_ = default_in_path_ = default_ref_ = annotation_next_ = false;
    def_classes_.clear();
    return;
  }
  if (kw == "break") mark_exit(false);
  // A generator's yield is what a call of it gives, as a return is.
  if (kw == "return" || kw == "yield") {
    if (kw == "return") mark_exit(true);
    // A generator's loop stops at each yield until it is asked for more: its consumer bounds it.
    if (kw == "yield")
      for (auto it = blocks_.rbegin(); it != blocks_.rend() && it->kind != BlockKind::function; ++it)
        if (it->kind == BlockKind::loop) it->exits = true;
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
      if (it->kind == BlockKind::function) {
        return_fn_ = it->name + "()";
        yields_ = kw == "yield" && frames_.size() == 1;
        break;
      }
  }
  // A comprehension's `for ... in`: its iterable ends at the next keyword or bracket.
  if (kw == "for" && frames_.size() > 1) comp_for_depth_ = frames_.size();
  if (kw == "in" && comp_for_depth_ == frames_.size()) comp_in_depth_ = frames_.size();
  if (kw == "as") {
    as_pending_ = true;
    as_value_ = frames_.back().cur;
    return;
  }
  Frame& f = frames_.back();
  if (value_keyword(kw, f)) return;
  // Operators spelled as words make the current argument an expression.
  if (f.cur.kind != Kind::none) {
    f.cur.dynamic = true;
    to_expr(f.cur);
  } else if (kw == "lambda" || kw == "not" || kw == "await" || kw == "yield") {
    f.cur.dynamic = true;
  }
  if (kw == "await") await_pending_ = true;
  f.after_plus = false;
}

void Analyzer::on_op(const Token& t, uint32_t line) {
  std::string_view op = t.text;
  // Single-character operators by value: this runs for every operator token.
  const char c = op.size() == 1 ? op[0] : '\0';
  if (header_ == Header::def_ && def_is_function_ && !header_colon_) note_def_param_op(op);
  Frame& top = frames_.back();
  if (c == ':' && header_ == Header::for_ && !header_colon_ && frames_.size() == 1) {
    if (for_phase_ == 1) report_environ_walk();  // `for key in os.environ:`
    bind_loop_targets();
    const ArgInfo& iter = iterated(prim_.active ? prim_.val : top.cur);
    bind_loop_to_value(iter);
    // `for line in f:` over a value that carries host data: each item carries it.
    if (for_targets_ok_) carry_into_targets(iter);
  }
  // `bytes(b ^ key for b in data)`, `chr(ord(c) ^ k)`: bytes decoded with an XOR key.
  if (c == '^') {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      if (it->kind != FrameKind::call || !is_name_kind(it->callee.kind)) continue;
      const std::string q = detail::canonical(it->callee.text);
      if (q == "bytes" || q == "bytearray" || q == "chr") {
        sink_.on_detector(Detector::xor_decode, line, q);
        break;
      }
    }
  }
  if (c == '.') {
    if (prim_.active) dot_pending_ = true;
    return;
  }
  const size_t open_frames = frames_.size();
  if (c == '(') {
    if (prim_.active) push_call(prim_.line);
    else push(FrameKind::group, line);
    if (frames_.size() > open_frames) prebind_comprehension(frames_.back(), t.text.data());
    return;
  }
  if (c == '[') {
    if (prim_.active) {
      ArgInfo base = std::move(prim_.val);
      // NAME[...] or self.NAME[...]: the container a later `= value` stores into.
      std::string of = prim_.attrs == 0 ? prim_.receiver : (prim_.raw_name.starts_with("self.") ? prim_.raw_name : "");
      prim_.active = false;
      if (Frame* f = push_frame(FrameKind::subscript, prim_.line)) {
        f->callee = std::move(base);
        f->receiver = std::move(of);
      }
    } else {
      push(FrameKind::list, line);
      if (frames_.size() > open_frames) prebind_comprehension(frames_.back(), t.text.data());
    }
    return;
  }
  if (c == '{') {
    flush();
    const bool field = top.kind == FrameKind::fstring || (top.kind == FrameKind::field && top.in_spec);
    push(field ? FrameKind::field : FrameKind::brace, line);
    if (!field && frames_.size() > open_frames) prebind_comprehension(frames_.back(), t.text.data());
    return;
  }
  if (c == ')' || c == ']' || c == '}') {
    comprehension_iterable_end();
    flush();
    close_frame();
    return;
  }
  flush();
  if (overflow_) return;
  if (c == ',') {
    // `a, b = ...`: remember the names before the '=' so that each can take its item.
    if (frames_.size() == 1 && header_ == Header::none && targets_.empty()) {
      if (!last_flushed_raw_.empty() && last_flushed_single_ && top.cur.kind != Kind::none && unpack_names_.size() < 4)
        unpack_names_.push_back(last_flushed_raw_);
      else
        unpack_names_.push_back({});  // not a plain name: its position still counts
    }
    finish_arg(top);
    return;
  }
  if (c == '=') {
    on_assign(top);
    return;
  }
  if (c == ':') {
    on_colon(top);
    return;
  }
  if (c == ';' && top.kind == FrameKind::statement) {
    end_statement(true);
    return;
  }
  if (c == '+') {
    top.after_plus = true;
    saw_plus_ |= frames_.size() == 1;
    return;
  }
  // Path("/usr/bin") / name: a str has no '/', so a path constant on its left is a Path joined.
  if (c == '/' && top.cur.kind == Kind::string && !top.cur.text.empty() &&
      (top.cur.text[0] == '/' || top.cur.text[0] == '~')) {
    append_capped(top.cur.text, "/", kMaxText);
    top.after_plus = true;
    top.path_join = true;
    return;
  }
  if (frames_.size() == 1 && top.kind == FrameKind::statement) {
    if (op == "*=" || op == "**=" || op == "<<=") doubles_ = true;
    if (op == "+=") aug_target_ = last_flushed_raw_;
    if (c == '*' && !targets_.empty()) saw_mul_ = true;
  }
  if (value_operator(op, top)) return;
  // Any other operator: the argument is computed.
  if (top.cur.kind != Kind::none) {
    top.cur.dynamic = true;
    to_expr(top.cur);
  }
  top.after_plus = false;
}

// `suite_continues`: a ';' inside a one-line suite (`while 1: os.fork(); break`).
void Analyzer::end_statement(bool suite_continues) {
  if (import_mode_) {
    parse_import();
  } else {
    flush();
    while (frames_.size() > 1 || overflow_) {
      close_frame();
      flush();
    }
    // A value that doubles itself (x = x + x, x = x * 2, x += x, x *= 2): reported as a call of
    // "<grow>", so that rules can ask whether it repeats without end (a memory bomb).
    if (doubles_ || (self_refs_ >= 2 && saw_plus_) || (self_refs_ >= 1 && saw_mul_ && !targets_.empty()) ||
        (!aug_target_.empty() && self_refs_ >= 1))
      report_call("<grow>", {}, stmt_line_);
    Frame& s = frames_.back();
    finish_arg(s);
    // `@staticmethod` (among the decorators before a def): its calls through self give no self.
    if (decorator_ && s.args.size() == 1 && s.args[0].text == "staticmethod") {
      static_pending_ = true;
    } else if (decorator_ && s.args.size() == 1 && s.args[0].kind == Kind::name && s.args[0].text.starts_with("local:")) {
      if (decorators_pending_.size() < 8) decorators_pending_.push_back(s.args[0].text);
    } else if (!decorator_ && header_ != Header::def_) {
      static_pending_ = false;
      decorators_pending_.clear();
    }
    if (!aug_target_.empty() && targets_.empty() && s.args.size() == 1) augment(s.args[0]);
    note_return(s);
    if (unpack_.size() > 1) {
      // `HOST, PORT = "", 9009`: each name takes its item (the last name was bound below to
      // the whole tuple; it is rebound here).
      targets_.clear();
      for (size_t i = 0; i < unpack_.size(); ++i) {
        if (unpack_[i].empty()) continue;
        const bool item = s.args.size() == unpack_.size() &&
                          (s.args[i].kind == Kind::string || is_name_kind(s.args[i].kind));
        // `fd, path = tempfile.mkstemp()`: each item comes from the call.
        const bool from_call = s.args.size() == 1 && s.args[0].kind == Kind::call;
        if (item) {
          bind(unpack_[i], s.args[i]);
        } else if (from_call) {
          bind(unpack_[i], s.args[0]);
        } else if (s.args.size() == 1 && (s.args[0].flows || s.args[0].params || s.args[0].path_params)) {
          // `loadavg, mem = snapshot()` of a function returning a tuple of host data: each
          // name carries what the tuple carries.
          ArgInfo v{{}, Kind::expr, {}, true, false, s.args[0].decoded};
          carry_flow(v, s.args[0]);
          bind(unpack_[i], v);
        } else {
          symbols_.erase(unpack_[i]);
        }
      }
    }
    if (!targets_.empty()) {
      const ArgInfo assigned = s.args.size() == 1 ? s.args[0] : container(s.args);
      for (const auto& t : targets_) {
        ArgInfo value = assigned;
        // `self.root = root` in __init__: every other method reaches it through its own self
        // (parameter 0), and a call of one of them gives that self as the receiver, which holds
        // what the constructor was given.
        if (t.starts_with("self.") && (value.params || value.path_params)) {
          if (value.params) value.params = 1;
          if (value.path_params) value.path_params = 1;
        }
        // `profile.raw = f.read()`: the object holds it too (returned or sent as a whole).
        if (const size_t dot = t.find('.'); dot != std::string::npos && !t.starts_with("self.") && value.flows) {
          ArgInfo o = resolve(std::string_view(t).substr(0, dot));
          carry_flow(o, value);
          bind(t.substr(0, dot), o);
        }
        // Computed strings keep their constant pieces: a path or command built in steps
        // still reaches the call that uses it.
        // A tuple keeps its text too: LISTEN = ("", 5140) reaches bind(LISTEN).
        // A number or flag keeps its value (OPEN = 0o777, SHELL = True); None stands for a module
        // or object missing here (`except ImportError: ssl = None`) and binds nothing.
        if (value.kind == Kind::string || is_name_kind(value.kind) ||
            (value.kind == Kind::literal && value.text != "None") ||
            (value.kind == Kind::container && targets_.size() == 1) ||
            (value.kind == Kind::expr && (has_alternatives(value.text) || is_flag_chain(value.text)))) {
          bind(t, value);
          if (targets_.size() == 1) remember_items(t, value);
          // A class body's name is the class's attribute too: `Action.verb` reads it, and so
          // does `self.verb` in its methods.
          if (!blocks_.empty() && blocks_.back().class_body && t.find('.') == std::string::npos) {
            bind(blocks_.back().name + "." + t, value);
            bind("self." + t, value);
            if (targets_.size() == 1) remember_items("self." + t, value);
          }
        } else if (value.decoded || value.flows || value.params || value.path_params) {
          ArgInfo v{{}, Kind::expr, {}, true, false, value.decoded};
          carry_flow(v, value);
          bind(t, v);
        } else {
          symbols_.erase(t);
        }
      }
    }
    end_lambda();
    if (!item_target_.empty() && s.args.size() == 1) taint_name(item_target_, s.args[0]);
    if (bare_strings_ && !deferred_strings_.empty()) {
      for (auto& [v, l] : deferred_strings_) {
        if (doc_bytes_ + v.size() > kMaxDocBytes) break;
        doc_bytes_ += v.size();
        docstrings_.emplace_back(std::move(v), l);
      }
    }
  }
  if (suite_on_line_ && !suite_continues) {
    pop_block();
    suite_on_line_ = false;
  }
  end_lambda();  // import statements and the like
  const bool keep_header = header_colon_;
  frames_.assign(1, Frame{});
  prim_ = Primary{};
  start_statement();
  if (suite_continues) header_colon_ = keep_header;
}

void Analyzer::enqueue(std::string text, uint32_t line, uint32_t depth) {
  if (depth > limits_.max_fragment_depth || text.empty()) return;
  // Code a name holds one of several values of (a loop over a list of statements): each its own line.
  std::replace(text.begin(), text.end(), kAlternative, '\n');
  std::replace(text.begin(), text.end(), kGroup, ' ');
  if (fragment_bytes_ + text.size() > limits_.max_fragment_bytes) return;
  fragment_bytes_ += text.size();
  queue_.push_back(Fragment{std::move(text), origin_line_ ? origin_line_ : line, depth});
}

}  // namespace detail

void analyze(std::string_view source, const AnalyzerLimits& limits, EventSink& sink) {
  detail::Analyzer(limits, sink).run(source);
}

}  // namespace sandboxrun::assess
