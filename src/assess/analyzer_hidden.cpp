// String literals as they are read (patterns are not behaviour; long random-looking blobs are
// evidence). Code and names hidden in pieces or out of view: long lines and blank-line padding,
// values chosen by conditionals or grown with +=, string values joined from pieces reported
// whole, the code of `python -c '...'` command lines is analyzed as code, identifier fragments in
// a list are reported joined, and namespace lookups with computed keys are evidence like
// getattr's.
#include <algorithm>
#include <optional>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess::detail {

// A literal read as the pattern of a regex or glob match (re.compile(r"/dev/tcp/..."), a linter's
// signature) describes text to look for: it names a command or a path without running or
// opening it, so the string rules do not see it. Only the literal written at the call itself.
bool Analyzer::pattern_argument() const {
  const Frame& f = frames_.back();
  if (f.kind != FrameKind::call || !is_name_kind(f.callee.kind) || !f.cur.keyword.empty()) return false;
  // This runs for every literal inside a call: the function's own name first, the canonical
  // module only for the few that match.
  const std::string_view raw = f.callee.text;
  const std::string_view fn = raw.substr(raw.rfind('.') + 1);
  const size_t index = f.args.size();
  const bool regex_fn = fn == "compile" || fn == "search" || fn == "match" || fn == "fullmatch" ||
                        fn == "findall" || fn == "finditer" || fn == "sub" || fn == "subn" || fn == "split";
  const bool glob_fn = fn == "fnmatch" || fn == "fnmatchcase" || fn == "filter" || fn == "translate";
  if (!regex_fn && !glob_fn) return false;
  const std::string q = detail::canonical(raw);
  if (regex_fn) return index == 0 && (q == "re." + std::string(fn) || q == "regex." + std::string(fn));
  if (q == "fnmatch.translate") return index == 0;
  return index == 1 && q == "fnmatch." + std::string(fn);
}

void Analyzer::on_string_token(const Token& t, uint32_t line, bool was_string) {
  std::string value = string_value(t);
  note_def_default(value);
  if (value.size() >= limits_.entropy_min_length && detail::is_entropy_blob(value, limits_))
    sink_.on_detector(Detector::entropy_blob, line, std::to_string(value.size()) + " bytes");
  if (bare_strings_) {
    deferred_strings_.emplace_back(value, line);
  } else if (!pattern_argument()) {
    emit_string(value, line);
  }
  if (was_string && prim_.active && prim_.val.kind == Kind::string) {
    append_capped(prim_.val.text, value, kMaxText);  // implicit concatenation
  } else {
    python2_statement(line, false);
    flush();
    prim_ = Primary{true, ArgInfo{{}, Kind::string, std::move(value)}, {}, {}, line};
  }
  ++prim_.pieces;
  prev_string_ = true;
}

namespace {

constexpr size_t kMaxFragment = 6;      // bytes of one identifier fragment
constexpr size_t kMaxCommandFragment = 12;  // and of one piece of a command line
constexpr size_t kMaxAssembled = 40;    // bytes of a joined name

// A character code written as a number literal (printable ASCII only).
std::optional<char> parse_code(const ArgInfo& a) {
  if (a.kind != ArgInfo::Kind::literal || a.text.empty() || a.text.size() > 3) return std::nullopt;
  int v = 0;
  for (char c : a.text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v < 0x20 || v > 0x7e) return std::nullopt;
  return static_cast<char>(v);
}

// Base64 text long enough to hold a statement, and nothing else (no blanks: prose has them).
bool is_base64_text(std::string_view s) noexcept {
  if (s.size() < 24) return false;
  size_t pad = 0;
  for (char c : s) {
    const bool b64 = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                     c == '/' || c == '-' || c == '_';
    if (c == '=') ++pad;
    else if (!b64 || pad) return false;
  }
  return pad <= 2;
}

bool is_ident_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The interpreter of a `python -c` command: python, python3, python3.12, /usr/bin/python3.
bool is_python(std::string_view s) noexcept {
  if (const size_t slash = s.rfind('/'); slash != std::string_view::npos) s.remove_prefix(slash + 1);
  if (!s.starts_with("python")) return false;
  s.remove_prefix(6);
  return s.find_first_not_of("0123456789.") == std::string_view::npos;
}

// The CODE of `python3 -c 'CODE'` (or "CODE", or CODE to the end) inside a command line.
std::optional<std::string> python_c_code(std::string_view text) {
  for (size_t at = text.find("python"); at != std::string_view::npos; at = text.find("python", at + 6)) {
    size_t p = at;
    while (p < text.size() && text[p] != ' ' && text[p] != '\t') ++p;
    size_t word = at;
    while (word > 0 && text[word - 1] != ' ' && text[word - 1] != '\t' && text[word - 1] != '(' &&
           text[word - 1] != ';' && text[word - 1] != '&' && text[word - 1] != '|' && text[word - 1] != '"' &&
           text[word - 1] != '\'')
      --word;
    if (!is_python(text.substr(word, p - word))) continue;
    // Options may come before -c (python3 -u -c ...).
    for (;;) {
      while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
      if (p + 1 < text.size() && text[p] == '-' && text[p + 1] == 'c' && (p + 2 == text.size() || text[p + 2] == ' ')) {
        p += 2;
        break;
      }
      if (p < text.size() && text[p] == '-' && p + 1 < text.size() && text[p + 1] != 'c') {
        while (p < text.size() && text[p] != ' ') ++p;
        continue;
      }
      p = std::string_view::npos;
      break;
    }
    if (p == std::string_view::npos) continue;
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
    if (p >= text.size()) return std::nullopt;
    const char q = text[p];
    if (q != '\'' && q != '"') return std::string(text.substr(p));
    size_t e = p + 1;
    while (e < text.size() && !(text[e] == q && text[e - 1] != '\\')) ++e;
    return std::string(text.substr(p + 1, e - p - 1));
  }
  return std::nullopt;
}

}  // namespace

void Analyzer::on_string_value(const ArgInfo& v, uint32_t line, bool whole) {
  // Values are copied wherever a name is used: a small fixed budget for joined values keeps
  // a few source bytes (f(s+s) a million times) from multiplying the work; literals are read
  // once each, within a budget in proportion to the input.
  uint64_t& budget = whole ? whole_budget_ : string_budget_;
  if (v.text.empty() || v.text.size() > budget) return;
  budget -= v.text.size();
  if (whole) sink_.on_string(v.text, line);
  // A base64 constant that holds code is read as code wherever it is decoded (a payload
  // decoded in one function and executed in another); prose and binary data are not.
  if (!v.dynamic && is_base64_text(v.text)) {
    std::string text;
    if (decode_base64(v.text, text) && looks_like_text(text) &&
        (text.find('\n') != std::string::npos || text.find(';') != std::string::npos) && text.find('(') != std::string::npos)
      enqueue(std::move(text), line, depth_ + 1);
  }
  if (v.text.find("python") == std::string::npos) return;
  if (auto code = python_c_code(v.text)) enqueue(std::move(*code), line, depth_ + 1);
}

void Analyzer::check_fragments(const std::vector<ArgInfo>& items, uint32_t line) {
  if (items.size() < 2) return;
  std::string joined;
  size_t longest = 0;
  // Pieces of a name (['se', 'tu', 'id']) or its character codes ((101, 120, 101, 99)).
  const bool codes = items[0].kind == Kind::literal;
  for (const auto& a : items) {
    if (!a.keyword.empty() || a.dynamic) return;
    if (codes) {
      auto v = parse_code(a);
      if (!v) return;
      joined += *v;
    } else {
      if (a.kind != Kind::string || a.text.empty() || a.text.size() > kMaxCommandFragment) return;
      longest = std::max(longest, a.text.size());
      joined += a.text;
    }
    if (joined.size() > kMaxAssembled) return;
  }
  if (joined.size() < 4 || (joined[0] >= '0' && joined[0] <= '9')) return;
  if (!std::all_of(joined.begin(), joined.end(), is_ident_char) || longest > kMaxFragment) {
    // A command line cut into pieces (("r", "m", " -", "rf", " --no-", ...)): the string rules
    // read it whole, as they read "a" + "b".
    if (!codes && items.size() >= 4 && joined.find(' ') != std::string::npos)
      on_string_value(ArgInfo{{}, Kind::string, joined, true, true}, line, true);
    return;
  }
  sink_.on_reference("<assembled>." + joined, line);
}

void Analyzer::check_code_list(const std::vector<ArgInfo>& items, uint32_t line) {
  if (items.size() < 3) return;
  std::string joined;
  for (const auto& a : items) {
    if (a.kind != Kind::string || a.dynamic || !a.keyword.empty()) return;
    // A whole statement in one item is not cut into pieces (`['-c', CODE, '--flag']`).
    if (a.text.find("import") != std::string::npos && a.text.find('(') != std::string::npos) return;
    if (!append_capped(joined, a.text, kMaxText)) return;
  }
  // Python statements cut into pieces: an import and a call, more than one statement.
  if (joined.find("import") != std::string::npos && joined.find('(') != std::string::npos &&
      (joined.find(';') != std::string::npos || joined.find('\n') != std::string::npos))
    sink_.on_detector(Detector::code_fragments, line, std::to_string(items.size()) + " pieces");
}

void Analyzer::check_python_c(const std::vector<ArgInfo>& items, uint32_t line) {
  for (size_t i = 0; i + 2 < items.size(); ++i) {
    const ArgInfo& exe = items[i];
    const bool python = (exe.kind == Kind::string && is_python(exe.text)) ||
                        (is_name_kind(exe.kind) && exe.text == "sys.executable");
    if (!python) continue;
    // The first "-c" among the options that follow.
    for (size_t k = i + 1; k + 1 < items.size(); ++k) {
      if (items[k].kind != Kind::string || !items[k].text.starts_with("-")) break;
      if (items[k].text == "-c") {
        if (items[k + 1].kind == Kind::string && !items[k + 1].text.empty())
          enqueue(items[k + 1].text, line, depth_ + 1);
        return;
      }
    }
  }
}

void Analyzer::scan_lines(std::string_view s) {
  uint32_t line = 1, blanks = 0;
  size_t begin = 0;
  bool long_seen = false, padding_seen = false;
  while (begin <= s.size() && !(long_seen && padding_seen)) {
    size_t end = s.find('\n', begin);
    if (end == std::string_view::npos) end = s.size();
    if (!long_seen && end - begin > limits_.long_line) {
      sink_.on_detector(Detector::long_line, line, std::to_string(end - begin) + " bytes");
      long_seen = true;  // one is evidence enough
    }
    // Code after a long run of blank lines sits where no reader scrolls (trailing padding).
    const std::string_view l = s.substr(begin, end - begin);
    if (l.find_first_not_of(" \t\r\f") == std::string_view::npos) {
      ++blanks;
    } else {
      if (!padding_seen && blanks >= limits_.blank_run) {
        sink_.on_detector(Detector::blank_padding, line, std::to_string(blanks) + " blank lines");
        padding_seen = true;
      }
      blanks = 0;
    }
    begin = end + 1;
    ++line;
  }
}

bool Analyzer::value_keyword(std::string_view kw, Frame& f) {
  // `"cls" if nt else "clear"`: either constant (both are read, see finish_arg).
  const bool const_string = kw == "if" && f.cur.kind == Kind::string && !f.cur.dynamic;
  // `0o777 if d else 0o666`: a number too.
  const bool number = kw == "if" && f.cur.kind == Kind::literal;
  if ((kw == "if" || kw == "or") && f.cond == 0 && (is_name_kind(f.cur.kind) || const_string || number)) {
    // `run = os.system if quiet else os.popen`, `sh = os.getenv("SHELL") or "/bin/sh"`: the
    // value is the first one (the callable, the setting).
    f.cond = kw == "if" ? 1 : 2;
    f.cond_then = std::move(f.cur);
    f.cur = ArgInfo{};
    f.cur.keyword = f.cond_then.keyword;
    return true;
  }
  if (kw == "else" && f.cond == 1) {
    f.cond = 2;
    f.cur = ArgInfo{};
    return true;
  }
  if (kw == "lambda" && f.cur.kind == Kind::none) {
    if (lambda_state_ == 0) {
      lambda_state_ = 1;
      lambda_depth_ = frames_.size();
      lambda_fn_ = frames_.size() == 1 && targets_.size() == 1 && targets_[0].find('.') == std::string::npos
                       ? "local:" + targets_[0]
                       : std::string();
    }
    // A function written in place: no text of its own, and never code from input.
    f.cur.kind = Kind::expr;
    f.cur.text = "<lambda>";
    f.cur.dynamic = true;
    f.after_plus = false;
    return true;
  }
  return false;
}

bool Analyzer::value_operator(std::string_view op, Frame& top) {
  if (op == "+=" && frames_.size() == 1 && top.kind == FrameKind::statement && !last_flushed_raw_.empty() &&
      last_flushed_single_) {
    // `name += piece`: what follows is the piece alone (see augment()).
    aug_target_ = last_flushed_raw_;
    top.cur = ArgInfo{};
    top.after_plus = false;
    return true;
  }
  // `prog %= args`, `n *= 2`: the name no longer holds the constant it was bound to.
  if (op.size() >= 2 && op.back() == '=' && op != "==" && op != "!=" && op != "<=" && op != ">=" && op != "+=" &&
      frames_.size() == 1 && !last_flushed_raw_.empty() && last_flushed_single_) {
    if (auto it = symbols_.find(last_flushed_raw_); it != symbols_.end()) it->second.dynamic = true;
    return false;
  }
  // os.O_WRONLY | os.O_CREAT: flags keep their names ("os.O_WRONLY|os.O_CREAT").
  if (op == "|" && (is_name_kind(top.cur.kind) || top.flag_chain)) {
    if (is_name_kind(top.cur.kind)) top.cur.kind = Kind::expr;
    top.cur.dynamic = true;
    append_capped(top.cur.text, "|", kMaxText);
    top.flag_chain = true;
    top.after_plus = false;
    return true;
  }
  return false;
}

void Analyzer::augment(const ArgInfo& piece) {
  const auto it = symbols_.find(aug_target_);
  if (it == symbols_.end()) return;
  ArgInfo v = it->second;
  if (v.kind == Kind::string && piece.kind == Kind::string) {
    if (!append_capped(v.text, piece.text, kMaxSymbolText)) v.dynamic = true;
    v.folded = v.folded || !piece.dynamic;
    v.dynamic = v.dynamic || piece.dynamic;
  } else if (v.kind == Kind::string) {
    v.dynamic = true;  // its constant pieces stay readable
  } else {
    v = ArgInfo{{}, Kind::expr, {}, true};
  }
  v.decoded = v.decoded || piece.decoded;
  carry_flow(v, it->second);
  carry_flow(v, piece);
  bind(aug_target_, v);
}

void Analyzer::namespace_key(const ArgInfo& key, uint32_t line) {
  if (key.folded || key.decoded) computed_name(key.text, line);
  else sink_.on_detector(Detector::getattr_dynamic, line, {});
}

void Analyzer::computed_name(const std::string& name, uint32_t line) {
  sink_.on_detector(Detector::getattr_computed, line, name);
  // The attribute it reaches, whatever it is reached on (attrgetter("request.urlopen")).
  std::string_view last = name;
  last = last.substr(last.rfind('.') + 1);
  if (!last.empty() && last.size() <= 64) sink_.on_reference("<computed>." + std::string(last), line);
}

}  // namespace sandboxrun::assess::detail
