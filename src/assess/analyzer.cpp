// Token stream -> facts. A bracket stack (bounded) follows calls and their arguments; a
// symbol table follows imports, aliases and string constants; a block stack follows
// unbounded loops. Code hidden in exec'd literals and decoded strings is queued and analyzed
// after the file, iteratively, within fragment limits.
#include <algorithm>
#include <charconv>
#include <optional>
#include <deque>
#include <unordered_map>
#include <vector>

#include "internal.hpp"
#include "sandboxrun/assess_analyzer.hpp"
#include "sandboxrun/assess_tokenizer.hpp"

namespace sandboxrun::assess {

namespace {

constexpr size_t kMaxFrames = 256;        // brackets analyzed; deeper ones are only counted
constexpr size_t kMaxArgs = 32;           // arguments kept per call
constexpr size_t kMaxText = 16 * 1024;    // bytes an argument's text may grow to by joining pieces
constexpr size_t kMaxSymbolText = 1024;   // bytes of a string constant kept per name
constexpr size_t kMaxQual = 512;          // bytes of a qualified name
constexpr size_t kMaxSymbols = 1 << 16;   // names bound per file
constexpr size_t kMaxBlocks = 1024;       // indentation blocks followed
constexpr size_t kMaxImportTokens = 4096; // tokens of one import statement
constexpr size_t kMaxDocBytes = 1 << 20;  // docstring bytes kept for __doc__ analysis

using Kind = ArgInfo::Kind;

enum class FrameKind : uint8_t { statement, call, group, list, subscript, brace, fstring, field };
enum class Header : uint8_t { none, while_, for_, def_, other };

struct Frame {
  FrameKind kind = FrameKind::statement;
  uint32_t line = 0;
  ArgInfo callee;      // call: what is called; subscript: the base
  std::string method;  // call of a method on a string constant ('..'.decode)
  std::vector<ArgInfo> args;
  ArgInfo cur;  // the argument being read
  bool after_plus = false;
  bool in_spec = false;  // field: after the ':' of a format spec
  std::string sig;       // subscript: its tokens, to recognise [::-1]
};

struct Primary {
  bool active = false;
  ArgInfo val;
  std::string raw_name;  // the source spelling when the primary is one bare name
  std::string method;    // attribute read on a string constant
  uint32_t line = 0;
};

// A call whose rules care about loops waits in its innermost loop or function block until
// that block ends and it is known whether the block repeats without end.
struct Deferred {
  std::string qual;
  uint32_t line;
  std::vector<ArgInfo> args;
  bool from_decoded;
};

enum class BlockKind : uint8_t { plain, loop, function };

struct Block {
  BlockKind kind = BlockKind::plain;
  bool header_unbounded = false;  // loop: `while True:`, `for _ in itertools.count():`
  bool exits = false;             // loop: break/return/exit seen; function: return seen
  bool recursive = false;         // function: calls itself
  std::string name;               // function: its symbol ("local:f")
  std::vector<Deferred> pending;
};

constexpr size_t kMaxPending = 256;  // deferred calls per block; later ones are reported at once

struct Fragment {
  std::string text;
  uint32_t origin_line;
  uint32_t depth;
};

// Appends up to `cap` bytes in total; false when something was cut.
bool append_capped(std::string& dst, std::string_view src, size_t cap) {
  const bool all = dst.size() + src.size() <= cap;
  if (dst.size() < cap) dst.append(src.substr(0, cap - dst.size()));
  return all;
}

bool is_name_kind(Kind k) noexcept { return k == Kind::name || k == Kind::call; }

std::optional<uint32_t> parse_int(std::string_view s) {
  uint32_t v = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

class Analyzer {
 public:
  Analyzer(const AnalyzerLimits& limits, EventSink& sink) : limits_(limits), sink_(sink) {}

  void run(std::string_view source) {
    scan_lines(source);
    if (auto enc = detail::unusual_source_encoding(source)) sink_.on_detector(Detector::source_encoding, 1, *enc);
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

 private:
  // ---- per text --------------------------------------------------------------------------
  void analyze_text(std::string_view text, uint32_t origin_line, uint32_t depth) {
    origin_line_ = origin_line;
    depth_ = depth;
    frames_.assign(1, Frame{});
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
    for (;;) {
      Token t = tok.next();
      if (t.kind == TokKind::end) break;
      on_token(t);
    }
    end_statement();
    while (!blocks_.empty()) pop_block();
  }

  uint32_t line_of(const Token& t) const noexcept { return origin_line_ ? origin_line_ : t.line; }

  void start_statement() {
    stmt_fresh_ = true;
    import_mode_ = false;
    header_ = Header::none;
    header_colon_ = false;
    header_unbounded_ = false;
    def_name_.clear();
    while_sig_.clear();
    targets_.clear();
    def_pending_ = false;
    as_pending_ = false;
    bare_strings_ = true;
    deferred_strings_.clear();
    dot_pending_ = false;
    prev_string_ = false;
  }

  // ---- blocks: loops and functions --------------------------------------------------------
  void push_block(Block&& b) {
    if (blocks_.size() < kMaxBlocks) blocks_.push_back(std::move(b));
    else ++block_overflow_;
  }

  void pop_block() {
    if (block_overflow_ > 0) {
      --block_overflow_;
      return;
    }
    if (blocks_.empty()) return;
    Block b = std::move(blocks_.back());
    blocks_.pop_back();
    const bool endless = (b.kind == BlockKind::loop && b.header_unbounded && !b.exits) ||
                         (b.kind == BlockKind::function && b.recursive && !b.exits);
    if (endless || b.kind == BlockKind::function) {
      // A function body runs when called, not where it is defined: its calls stop here.
      for (auto& d : b.pending) emit_deferred(d, endless);
      return;
    }
    // A bounded loop inside an endless one still repeats without end: hand the calls out.
    if (Block* outer = candidate()) {
      for (auto& d : b.pending) {
        if (outer->pending.size() < kMaxPending) outer->pending.push_back(std::move(d));
        else emit_deferred(d, outer->header_unbounded);
      }
    } else {
      for (auto& d : b.pending) emit_deferred(d, false);
    }
  }

  Block* candidate() {
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
      if (it->kind != BlockKind::plain) return &*it;
    return nullptr;
  }

  void emit_deferred(const Deferred& d, bool endless) {
    sink_.on_call(CallEvent{d.qual, d.line, d.args, endless, false, d.from_decoded});
  }

  // break: leaves the innermost loop. return: leaves every loop up to the function.
  void mark_exit(bool is_return) {
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
      if (it->kind == BlockKind::loop) {
        it->exits = true;
        if (!is_return) return;
      } else if (it->kind == BlockKind::function) {
        if (is_return) it->exits = true;
        return;
      }
    }
  }

  void on_token(const Token& t) {
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
    if (header_block_ && header_colon_ && !suite_on_line_) {
      // `while True: os.fork()`: the suite is on the header's line.
      push_block(std::move(*header_block_));
      header_block_.reset();
      suite_on_line_ = true;
    }
    if (fresh && !suite_on_line_) header_block_.reset();  // no INDENT came for it
    if (fresh) {
      stmt_line_ = line;
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
      }
      if (header_ == Header::while_) return;
    }
    if (header_ == Header::while_ && !header_colon_ && !(t.kind == TokKind::op && t.text == ":")) {
      if (t.text != "(" && t.text != ")") append_capped(while_sig_, t.text, 32);
    }
    if (frames_.back().kind == FrameKind::subscript && !overflow_ && t.text != "]")
      append_capped(frames_.back().sig, t.text, 16);
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
        if (f.kind == FrameKind::fstring && !overflow_)
          append_capped(f.cur.text, fstring_middle_value(t.text, (t.flags & tokflag::raw) != 0), kMaxText);
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

  // ---- names -----------------------------------------------------------------------------
  void on_name(const Token& t, uint32_t line, bool was_dot) {
    std::string_view name = t.text;
    if (is_keyword(name)) {
      on_keyword(name, line);
      return;
    }
    if (def_pending_) {
      def_pending_ = false;
      const std::string sym = "local:" + std::string(name);
      if (def_is_function_) def_name_ = sym;
      bind(std::string(name), ArgInfo{{}, Kind::name, sym, true});
      return;
    }
    if (as_pending_) {
      as_pending_ = false;
      bind(std::string(name), as_value_);
      return;
    }
    if (name == "__doc__") doc_referenced_ = true;
    if (was_dot && prim_.active) {
      if (prim_.val.kind == Kind::string) {
        prim_.method.assign(name);
        return;
      }
      if (!is_name_kind(prim_.val.kind)) prim_.val = ArgInfo{{}, Kind::name, "?", true};
      prim_.val.kind = Kind::name;
      append_capped(prim_.val.text, ".", kMaxQual);
      append_capped(prim_.val.text, name, kMaxQual);
      prim_.raw_name.clear();
      return;
    }
    flush();
    prim_ = Primary{true, resolve(name), std::string(name), {}, line};
  }

  ArgInfo resolve(std::string_view name) const {
    if (auto it = symbols_.find(name); it != symbols_.end()) return it->second;
    return ArgInfo{{}, Kind::name, std::string(name), true};
  }

  void on_keyword(std::string_view kw, uint32_t line) {
    if (kw == "True" || kw == "False" || kw == "None") {
      flush();
      prim_ = Primary{true, ArgInfo{{}, Kind::literal, std::string(kw)}, {}, {}, line};
      return;
    }
    flush();
    if (kw == "def" || kw == "class") {
      def_pending_ = true;
      def_is_function_ = kw == "def";
      return;
    }
    if (kw == "break") mark_exit(false);
    if (kw == "return") mark_exit(true);
    if (kw == "as") {
      as_pending_ = true;
      as_value_ = frames_.back().cur;
      return;
    }
    // Operators spelled as words make the current argument an expression.
    Frame& f = frames_.back();
    if (f.cur.kind != Kind::none) {
      f.cur.dynamic = true;
      to_expr(f.cur);
    } else if (kw == "lambda" || kw == "not" || kw == "await" || kw == "yield") {
      f.cur.dynamic = true;
    }
    f.after_plus = false;
  }

  void bind(const std::string& name, const ArgInfo& value) {
    if (symbols_.size() >= kMaxSymbols && !symbols_.count(name)) return;
    ArgInfo v = value;
    v.keyword.clear();
    if (is_name_kind(v.kind)) v.text = detail::canonical(v.text);
    // Every use of a name copies its value: keep long constants short, and read them as
    // code once here in case they are exec'd later.
    if (v.kind == Kind::string && v.text.size() > kMaxSymbolText) {
      if (!v.dynamic && looks_like_text(v.text)) enqueue(v.text, stmt_line_, depth_ + 1);
      v.text.resize(kMaxSymbolText);
      v.dynamic = true;
    }
    symbols_[name] = std::move(v);
  }

  // ---- strings -----------------------------------------------------------------------------
  void on_string_token(const Token& t, uint32_t line, bool was_string) {
    std::string value = string_value(t);
    if (value.size() >= limits_.entropy_min_length && detail::is_entropy_blob(value, limits_))
      sink_.on_detector(Detector::entropy_blob, line, std::to_string(value.size()) + " bytes");
    if (bare_strings_) {
      deferred_strings_.emplace_back(value, line);
    } else {
      emit_string(value, line);
    }
    if (was_string && prim_.active && prim_.val.kind == Kind::string) {
      append_capped(prim_.val.text, value, kMaxText);  // implicit concatenation
    } else {
      // Python 2 `exec "code"`: treat as a call.
      if (prim_.active && prim_.raw_name == "exec" && frames_.back().kind == FrameKind::statement &&
          frames_.back().cur.kind == Kind::none) {
        push_call(line);
      }
      flush();
      prim_ = Primary{true, ArgInfo{{}, Kind::string, std::move(value)}, {}, {}, line};
    }
    prev_string_ = true;
  }

  void emit_string(const std::string& v, uint32_t line) { sink_.on_string(v, line); }

  // ---- operators ---------------------------------------------------------------------------
  void on_op(const Token& t, uint32_t line) {
    std::string_view op = t.text;
    // Single-character operators by value: this runs for every operator token.
    const char c = op.size() == 1 ? op[0] : '\0';
    Frame& top = frames_.back();
    if (c == '.') {
      if (prim_.active) dot_pending_ = true;
      return;
    }
    if (c == '(') {
      if (prim_.active) push_call(prim_.line);
      else push(FrameKind::group, line);
      return;
    }
    if (c == '[') {
      if (prim_.active) {
        Frame f;
        f.kind = FrameKind::subscript;
        f.line = prim_.line;
        f.callee = std::move(prim_.val);
        prim_.active = false;
        push_frame(std::move(f));
      } else {
        push(FrameKind::list, line);
      }
      return;
    }
    if (c == '{') {
      flush();
      const bool field = top.kind == FrameKind::fstring || (top.kind == FrameKind::field && top.in_spec);
      push(field ? FrameKind::field : FrameKind::brace, line);
      return;
    }
    if (c == ')' || c == ']' || c == '}') {
      flush();
      close_frame();
      return;
    }
    flush();
    if (overflow_) return;
    if (c == ',') {
      finish_arg(top);
      return;
    }
    if (c == '=') {
      on_assign(top);
      return;
    }
    if (c == ':') {
      if (top.kind == FrameKind::field) {
        top.in_spec = true;
      } else if (top.kind == FrameKind::statement && header_ != Header::none && !header_colon_) {
        header_colon_ = true;
        on_header_colon();
      } else {
        top.cur.dynamic = true;
      }
      return;
    }
    if (c == ';' && top.kind == FrameKind::statement) {
      end_statement(true);
      return;
    }
    if (c == '+') {
      top.after_plus = true;
      return;
    }
    // Any other operator: the argument is computed.
    if (top.cur.kind != Kind::none) {
      top.cur.dynamic = true;
      to_expr(top.cur);
    }
    top.after_plus = false;
  }

  void on_assign(Frame& top) {
    // flush() ran: a bare NAME just before '=' is now the whole current argument.
    if (top.kind == FrameKind::call || top.kind == FrameKind::statement) {
      if (!last_flushed_raw_.empty() && top.cur.kind != Kind::none && last_flushed_single_) {
        if (top.kind == FrameKind::call) {
          top.cur = ArgInfo{};
          top.cur.keyword = last_flushed_raw_;
        } else {
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

  void on_header_colon() {
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
    header_block_ = std::move(b);
  }

  // ---- frames ------------------------------------------------------------------------------
  void push(FrameKind k, uint32_t line) {
    Frame f;
    f.kind = k;
    f.line = line;
    push_frame(std::move(f));
  }

  void push_call(uint32_t line) {
    Frame f;
    f.kind = FrameKind::call;
    f.line = line;
    f.callee = std::move(prim_.val);
    f.method = std::move(prim_.method);
    prim_.active = false;
    push_frame(std::move(f));
  }

  void push_frame(Frame&& f) {
    if (frames_.size() + overflow_ >= limits_.max_nesting && !nesting_reported_) {
      nesting_reported_ = true;
      sink_.on_detector(Detector::deep_nesting, f.line, std::to_string(limits_.max_nesting));
    }
    if (overflow_ || frames_.size() >= kMaxFrames) {
      ++overflow_;
      return;
    }
    frames_.push_back(std::move(f));
  }

  // Moves the finished primary into the current argument of the top frame.
  void flush() {
    last_flushed_raw_.clear();
    last_flushed_single_ = false;
    if (!prim_.active) return;
    prim_.active = false;
    if (overflow_) return;
    Primary p = std::move(prim_);
    prim_ = Primary{};
    if (is_name_kind(p.val.kind)) {
      p.val.text = detail::canonical(p.val.text);
      sink_.on_reference(p.val.text, p.line);
    } else if (p.val.kind == Kind::string && !p.method.empty()) {
      p.val.dynamic = true;  // an unread attribute of a string: 'x'.upper
    }
    Frame& f = frames_.back();
    last_flushed_single_ = f.cur.kind == Kind::none && !p.raw_name.empty();
    last_flushed_raw_ = std::move(p.raw_name);
    add_operand(f, std::move(p.val));
  }

  static void to_expr(ArgInfo& a) {
    if (a.kind == Kind::expr) return;
    if (a.kind != Kind::string) a.text.clear();
    a.kind = Kind::expr;
  }

  static void add_operand(Frame& f, ArgInfo&& v) {
    ArgInfo& c = f.cur;
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
    } else {
      to_expr(c);
      c.dynamic = true;
      if (v.kind == Kind::string) append_capped(c.text, v.text, kMaxText);
      c.decoded |= v.decoded;
    }
    f.after_plus = false;
  }

  static void finish_arg(Frame& f) {
    if (f.cur.kind != Kind::none || !f.cur.keyword.empty()) {
      if (f.args.size() < kMaxArgs) f.args.push_back(std::move(f.cur));
    }
    f.cur = ArgInfo{};
    f.after_plus = false;
  }

  void close_frame() {
    if (overflow_) {
      --overflow_;
      return;
    }
    if (frames_.size() <= 1) return;  // a stray closer
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    // An f-string collects its text in cur; its fields report into it directly.
    if (f.kind != FrameKind::fstring) finish_arg(f);
    Primary result;
    result.active = true;
    result.line = f.line;
    switch (f.kind) {
      case FrameKind::call: result.val = close_call(f); break;
      case FrameKind::subscript: result.val = close_subscript(f); break;
      case FrameKind::group:
        if (f.args.size() == 1 && f.args[0].keyword.empty()) {
          result.val = std::move(f.args[0]);
          break;
        }
        [[fallthrough]];
      case FrameKind::list: result.val = container(f.args); break;
      case FrameKind::brace: result.val = ArgInfo{{}, Kind::container, {}, true, false, any_decoded(f.args)}; break;
      case FrameKind::fstring: {
        result.val = ArgInfo{{}, Kind::string, std::move(f.cur.text), f.cur.dynamic, false, f.cur.decoded};
        if (!result.val.text.empty()) {
          if (bare_strings_) deferred_strings_.emplace_back(result.val.text, f.line);
          else emit_string(result.val.text, f.line);
        }
        break;
      }
      case FrameKind::field: {
        // The field's value becomes part of the enclosing f-string.
        Frame& parent = frames_.back();
        if (parent.kind == FrameKind::fstring) {
          parent.cur.dynamic = true;
          parent.cur.decoded |= any_decoded(f.args);
        }
        return;
      }
      case FrameKind::statement: break;
    }
    prim_ = std::move(result);
  }

  static bool any_decoded(const std::vector<ArgInfo>& args) {
    for (const auto& a : args)
      if (a.decoded) return true;
    return false;
  }

  static ArgInfo container(std::vector<ArgInfo>& items) {
    ArgInfo c;
    c.kind = Kind::container;
    for (auto& a : items) {
      if (!c.text.empty()) append_capped(c.text, "\x1f", kMaxText);
      if (a.kind == Kind::string) append_capped(c.text, a.text, kMaxText);
      if (a.kind != Kind::string && a.kind != Kind::literal) c.dynamic = true;
      c.dynamic |= a.dynamic;
      c.decoded |= a.decoded;
    }
    return c;
  }

  ArgInfo close_call(Frame& f) {
    auto& args = f.args;
    const bool decoded_args = any_decoded(args);
    if (f.callee.kind == Kind::string) {
      // A method of a string constant: decode/encode/strip keep the value, others compute.
      ArgInfo r = std::move(f.callee);
      // Joins with short separators only: a long one would multiply text without source.
      if (f.method == "join" && r.text.size() <= 16 && !args.empty() && args[0].kind == Kind::container) {
        std::string joined;
        for (char c : args[0].text) {
          if (c == '\x1f') append_capped(joined, r.text, kMaxText);
          else joined += c;
        }
        r.text = std::move(joined);
        r.folded = true;
        r.dynamic = args[0].dynamic;
      } else if (f.method != "decode" && f.method != "encode" && f.method != "strip" && f.method != "lower" &&
                 f.method != "upper") {
        r.dynamic = true;
      }
      r.decoded |= decoded_args;
      return r;
    }
    if (!is_name_kind(f.callee.kind)) return ArgInfo{{}, Kind::expr, {}, true, false, decoded_args};

    const std::string qual = detail::canonical(f.callee.text);
    if (header_ == Header::for_ && !header_colon_ &&
        (qual == "itertools.count" || qual == "itertools.cycle" ||
         (qual == "itertools.repeat" && args.size() == 1) || (qual == "iter" && args.size() == 2)))
      header_unbounded_ = true;
    if (qual == "sys.exit" || qual == "os._exit" || qual == "exit" || qual == "quit") {
      for (auto& b : blocks_) b.exits = b.exits || b.kind == BlockKind::loop;
    }
    if (qual.starts_with("local:")) {
      for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
        if (it->kind == BlockKind::function) {
          it->recursive = it->recursive || it->name == qual;
          break;
        }
    }
    Block* loop = sink_.loop_sensitive(qual) ? candidate() : nullptr;
    if (loop && loop->pending.size() < kMaxPending) {
      loop->pending.push_back(Deferred{qual, f.line, args, depth_ > 0});
    } else {
      sink_.on_call(CallEvent{qual, f.line, args, loop && loop->header_unbounded, false, depth_ > 0});
    }

    ArgInfo r{{}, Kind::call, qual, true, false, decoded_args};
    append_capped(r.text, "()", kMaxQual);
    const ArgInfo* a0 = args.empty() ? nullptr : &args[0];
    const bool const0 = a0 && a0->kind == Kind::string && !a0->dynamic;

    if (qual == "__import__" || qual == "importlib.import_module" || qual == "importlib.__import__") {
      if (const0) {
        sink_.on_import(a0->text, f.line);
        if (a0->folded || a0->decoded) sink_.on_detector(Detector::dynamic_import, f.line, a0->text);
        std::string mod = a0->text;
        if (qual != "importlib.import_module") mod = mod.substr(0, mod.find('.'));
        return ArgInfo{{}, Kind::name, std::move(mod), true};
      }
      sink_.on_detector(Detector::dynamic_import, f.line, "non-constant module name");
      return r;
    }
    if (qual == "getattr" && args.size() >= 2) {
      const ArgInfo& n = args[1];
      if (n.kind == Kind::string && !n.dynamic) {
        if (n.folded || n.decoded) sink_.on_detector(Detector::getattr_computed, f.line, n.text);
        if (is_name_kind(args[0].kind)) {
          ArgInfo v{{}, Kind::name, detail::canonical(args[0].text + "." + n.text), true};
          if (v.text.size() > kMaxQual) v.text.resize(kMaxQual);
          sink_.on_reference(v.text, f.line);
          return v;
        }
      } else {
        sink_.on_detector(Detector::getattr_dynamic, f.line, {});
      }
      return r;
    }
    if ((qual == "globals" || qual == "locals" || qual == "vars") && args.empty())
      return ArgInfo{{}, Kind::call, "globals()", true};
    if (qual == "vars" && a0 && is_name_kind(a0->kind) &&
        (a0->text == "builtins" || a0->text == "__builtins__" || a0->text == "__builtin__")) {
      sink_.on_detector(Detector::builtins_dict, f.line, "vars(builtins)");
      return ArgInfo{{}, Kind::name, "builtins", true};
    }
    if (qual == "chr" && a0 && a0->kind == Kind::literal) {
      if (auto v = parse_int(a0->text); v && *v < 0x80) return ArgInfo{{}, Kind::string, std::string(1, static_cast<char>(*v)), false, true};
    }
    if (auto text = detail::decode_constant_call(qual, args)) {
      if (looks_like_text(*text)) {
        sink_.on_detector(Detector::decoded_payload, f.line, qual);
        enqueue(*text, f.line, depth_ + 1);
      }
      return ArgInfo{{}, Kind::string, std::move(*text), false, true, true};
    }
    if (is_decoder(qual)) r.decoded = true;
    // Decoded text was queued when it was decoded.
    if ((qual == "exec" || qual == "eval" || qual == "compile") && const0 && !a0->decoded && a0->keyword.empty())
      enqueue(a0->text, f.line, depth_ + 1);
    return r;
  }

  ArgInfo close_subscript(Frame& f) {
    ArgInfo& base = f.callee;
    const ArgInfo key = f.args.empty() ? ArgInfo{} : f.args[0];
    if (base.kind == Kind::string && (f.sig == "::-1" || f.sig == ":::-1")) {
      sink_.on_detector(Detector::reversed_string, f.line, {});
      ArgInfo r = std::move(base);
      std::reverse(r.text.begin(), r.text.end());
      r.folded = true;
      return r;
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
        return ArgInfo{{}, Kind::name, key.text, true};
      }
      if (bq == "sys.modules") return ArgInfo{{}, Kind::name, key.text, true};
    }
    std::string sq = bq + "[]";
    std::span<const ArgInfo> args(&key, key.kind == Kind::none ? 0 : 1);
    sink_.on_call(CallEvent{sq, f.line, args, false, true, depth_ > 0});
    return ArgInfo{{}, Kind::name, std::move(sq), true, false, base.decoded};
  }

  // ---- statements --------------------------------------------------------------------------
  // `suite_continues`: a ';' inside a one-line suite (`while 1: os.fork(); break`).
  void end_statement(bool suite_continues = false) {
    if (import_mode_) {
      parse_import();
    } else {
      flush();
      while (frames_.size() > 1 || overflow_) {
        close_frame();
        flush();
      }
      Frame& s = frames_.back();
      finish_arg(s);
      if (!targets_.empty()) {
        ArgInfo value = s.args.size() == 1 ? s.args[0] : container(s.args);
        for (const auto& t : targets_) {
          if ((value.kind == Kind::string && !value.dynamic) || is_name_kind(value.kind)) {
            bind(t, value);
          } else if (value.decoded) {
            bind(t, ArgInfo{{}, Kind::expr, {}, true, false, true});
          } else {
            symbols_.erase(t);
          }
        }
      }
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
    const bool keep_header = header_colon_;
    frames_.assign(1, Frame{});
    prim_ = Primary{};
    start_statement();
    if (suite_continues) header_colon_ = keep_header;
  }

  void parse_import() {
    const auto& tk = import_tokens_;
    const uint32_t line = stmt_line_;
    auto dotted = [&](size_t& i) {
      std::string name;
      while (i < tk.size() && (tk[i] == "." || tk[i] == "...")) name += tk[i++];
      while (i < tk.size() && tk[i] != "," && tk[i] != "as" && tk[i] != "import" && tk[i] != "(" && tk[i] != ")") {
        append_capped(name, tk[i++], kMaxQual);
      }
      return name;
    };
    size_t i = 1;
    if (tk[0] == "import") {
      while (i < tk.size()) {
        std::string mod = dotted(i);
        std::string as;
        if (i + 1 < tk.size() && tk[i] == "as") {
          as = tk[i + 1];
          i += 2;
        }
        if (!mod.empty()) {
          sink_.on_import(mod, line);
          if (!as.empty()) bind(as, ArgInfo{{}, Kind::name, mod, true});
          else bind(mod.substr(0, mod.find('.')), ArgInfo{{}, Kind::name, mod.substr(0, mod.find('.')), true});
        }
        ++i;  // ','
      }
      return;
    }
    std::string mod = dotted(i);
    if (i < tk.size() && tk[i] == "import") ++i;
    if (!mod.empty()) sink_.on_import(mod, line);
    while (i < tk.size()) {
      if (tk[i] == "(" || tk[i] == ")" || tk[i] == ",") {
        ++i;
        continue;
      }
      if (tk[i] == "*") {
        sink_.on_star_import(mod);
        ++i;
        continue;
      }
      std::string name = tk[i++];
      std::string as = name;
      if (i + 1 < tk.size() && tk[i] == "as") {
        as = tk[i + 1];
        i += 2;
      }
      std::string full = mod.empty() || mod.back() == '.' ? mod + name : mod + "." + name;
      sink_.on_import(full, line);
      bind(as, ArgInfo{{}, Kind::name, full, true});
    }
  }

  // ---- whole file --------------------------------------------------------------------------
  void scan_lines(std::string_view s) {
    uint32_t line = 1;
    size_t begin = 0;
    while (begin <= s.size()) {
      size_t end = s.find('\n', begin);
      if (end == std::string_view::npos) end = s.size();
      if (end - begin > limits_.long_line) {
        sink_.on_detector(Detector::long_line, line, std::to_string(end - begin) + " bytes");
        return;  // one is evidence enough
      }
      begin = end + 1;
      ++line;
    }
  }

  void enqueue(std::string text, uint32_t line, uint32_t depth) {
    if (depth > limits_.max_fragment_depth || text.empty()) return;
    if (fragment_bytes_ + text.size() > limits_.max_fragment_bytes) return;
    fragment_bytes_ += text.size();
    queue_.push_back(Fragment{std::move(text), origin_line_ ? origin_line_ : line, depth});
  }

  const AnalyzerLimits& limits_;
  EventSink& sink_;

  // File state, shared with the fragments (exec'd code runs in the same globals).
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, ArgInfo, NameHash, std::equal_to<>> symbols_;
  std::deque<Fragment> queue_;
  uint64_t fragment_bytes_ = 0;
  std::vector<std::pair<std::string, uint32_t>> docstrings_;
  size_t doc_bytes_ = 0;
  bool doc_referenced_ = false;

  // Text state.
  uint32_t origin_line_ = 0;
  uint32_t depth_ = 0;
  std::vector<Frame> frames_;
  uint32_t overflow_ = 0;
  bool nesting_reported_ = false;
  Primary prim_;
  std::vector<Block> blocks_;
  uint32_t block_overflow_ = 0;
  std::optional<Block> header_block_;  // opened by the next INDENT, or a same-line suite
  bool suite_on_line_ = false;

  // Statement state.
  bool stmt_fresh_ = true;
  uint32_t stmt_line_ = 0;
  bool import_mode_ = false;
  std::vector<std::string> import_tokens_;
  Header header_ = Header::none;
  bool header_colon_ = false;
  bool header_unbounded_ = false;
  std::string def_name_;  // the function a `def` header names
  bool def_is_function_ = false;
  std::string while_sig_;
  std::vector<std::string> targets_;
  bool def_pending_ = false;
  bool as_pending_ = false;
  ArgInfo as_value_;
  bool bare_strings_ = true;
  std::vector<std::pair<std::string, uint32_t>> deferred_strings_;
  bool dot_pending_ = false;
  bool prev_string_ = false;
  std::string last_flushed_raw_;
  bool last_flushed_single_ = false;
};

}  // namespace

void analyze(std::string_view source, const AnalyzerLimits& limits, EventSink& sink) {
  Analyzer(limits, sink).run(source);
}

}  // namespace sandboxrun::assess
