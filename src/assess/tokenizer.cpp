// Python 3 tokenizer: one forward pass, explicit bounded stacks, byte-oriented (see header).
#include "assess/assess_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace sandboxrun::assess {

namespace {

bool is_ident_start(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
bool is_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
bool is_ident_char(unsigned char c) noexcept { return is_ident_start(c) || is_digit(c); }
bool is_newline(char c) noexcept { return c == '\n' || c == '\r'; }

// ASCII character that NFKC maps a code point to, for the blocks used to disguise names
// (fullwidth forms, mathematical alphanumerics); 0 when not one of those.
char ascii_fold(uint32_t cp) noexcept {
  if (cp >= 0xFF10 && cp <= 0xFF19) return static_cast<char>('0' + (cp - 0xFF10));
  if (cp >= 0xFF21 && cp <= 0xFF3A) return static_cast<char>('A' + (cp - 0xFF21));
  if (cp >= 0xFF41 && cp <= 0xFF5A) return static_cast<char>('a' + (cp - 0xFF41));
  if (cp == 0xFF3F) return '_';
  if (cp >= 0x1D400 && cp <= 0x1D6A3) {
    uint32_t i = (cp - 0x1D400) % 52;
    return static_cast<char>(i < 26 ? 'A' + i : 'a' + (i - 26));
  }
  if (cp >= 0x1D7CE && cp <= 0x1D7FF) return static_cast<char>('0' + (cp - 0x1D7CE) % 10);
  return 0;
}

// Folds disguised characters of an identifier to ASCII; true when anything changed.
bool fold_name(std::string_view w, std::string& out) {
  out.clear();
  bool changed = false;
  for (size_t i = 0; i < w.size();) {
    auto c = static_cast<unsigned char>(w[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xC0 && c < 0xE0) len = 2, cp = c & 0x1Fu;
    else if (c >= 0xE0 && c < 0xF0) len = 3, cp = c & 0x0Fu;
    else if (c >= 0xF0 && c < 0xF8) len = 4, cp = c & 0x07u;
    bool ok = len != 0 && i + len <= w.size();
    for (size_t k = 1; ok && k < len; ++k) {
      auto d = static_cast<unsigned char>(w[i + k]);
      if ((d & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    if (!ok) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (char a = ascii_fold(cp)) {
      out += a;
      changed = true;
    } else {
      out.append(w.substr(i, len));
    }
    i += len;
  }
  return changed;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Resolves backslash escapes as Python does; `braces` also undoubles "{{" and "}}".
std::string unescape(std::string_view s, bool raw, bool bytes, bool braces) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (braces && (c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c != '\\' || raw || i + 1 >= s.size()) {
      out += c;
      continue;
    }
    char d = s[++i];
    switch (d) {
      case '\n': break;
      case '\r':
        if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
        break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': case '\'': case '"': out += d; break;
      case 'x': {
        int h1 = i + 1 < s.size() ? hex_digit(s[i + 1]) : -1;
        int h2 = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
        if (h1 < 0 || h2 < 0) {
          out += "\\x";
          break;
        }
        uint32_t v = static_cast<uint32_t>(h1 * 16 + h2);
        if (bytes) out += static_cast<char>(v);
        else append_utf8(out, v);
        i += 2;
        break;
      }
      case 'u': case 'U': {
        size_t n = d == 'u' ? 4 : 8;
        uint32_t v = 0;
        bool ok = !bytes && i + n < s.size();
        for (size_t k = 1; ok && k <= n; ++k) {
          int h = i + k < s.size() ? hex_digit(s[i + k]) : -1;
          if (h < 0) ok = false;
          else v = v * 16 + static_cast<uint32_t>(h);
        }
        if (!ok) {
          out += '\\';
          out += d;
          break;
        }
        append_utf8(out, v);
        i += n;
        break;
      }
      default:
        if (d >= '0' && d <= '7') {
          uint32_t v = static_cast<uint32_t>(d - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            v = v * 8 + static_cast<uint32_t>(s[++i] - '0');
          if (bytes) out += static_cast<char>(v & 0xFF);
          else append_utf8(out, v);
        } else {
          out += '\\';
          out += d;
        }
    }
  }
  return out;
}

constexpr std::array<std::string_view, 35> kKeywords = {
    "False", "None",   "True",     "and",   "as",   "assert", "async", "await", "break",
    "class", "continue", "def",    "del",   "elif", "else",   "except", "finally", "for",
    "from",  "global", "if",       "import", "in",  "is",     "lambda", "nonlocal", "not",
    "or",    "pass",   "raise",    "return", "try", "while",  "with",  "yield"};

// Length of the operator at the start of `c1 c2 c3` (longest match), 1 when single.
size_t op_length(char c1, char c2, char c3) noexcept {
  if (c1 == '.' && c2 == '.' && c3 == '.') return 3;
  const bool doubling = (c1 == '*' || c1 == '/' || c1 == '<' || c1 == '>') && c2 == c1;
  if (doubling) return c3 == '=' ? 3 : 2;  // ** // << >> and **= //= <<= >>=
  if (c2 == '=') {
    switch (c1) {
      case '+': case '-': case '*': case '/': case '%': case '&': case '|': case '^': case '@':
      case '<': case '>': case '=': case '!': case ':':
        return 2;
      default:
        break;
    }
  }
  return c1 == '-' && c2 == '>' ? 2 : 1;
}

}  // namespace

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// An open-addressed table of the keywords, built at compile time: this runs for every name
// token, and a lookup is one hash of three bytes and usually one comparison.
constexpr size_t kKeywordSlots = 64;
constexpr size_t keyword_hash(std::string_view k) noexcept {
  return (static_cast<unsigned char>(k[0]) * 31u + static_cast<unsigned char>(k[k.size() - 1]) * 7u + k.size()) %
         kKeywordSlots;
}
constexpr std::array<std::string_view, kKeywordSlots> kKeywordTable = [] {
  std::array<std::string_view, kKeywordSlots> t{};
  for (std::string_view k : kKeywords) {
    size_t h = keyword_hash(k);
    while (!t[h].empty()) h = (h + 1) % kKeywordSlots;
    t[h] = k;
  }
  return t;
}();

bool is_keyword(std::string_view name) noexcept {
  if (name.size() < 2 || name.size() > 8) return false;  // keywords are 2..8 bytes
  for (size_t h = keyword_hash(name);; h = (h + 1) % kKeywordSlots) {
    const std::string_view k = kKeywordTable[h];
    if (k.empty()) return false;
    if (k.size() == name.size() && std::memcmp(k.data(), name.data(), k.size()) == 0) return true;
  }
}

Tokenizer::Tokenizer(std::string_view source, TokenizerLimits limits) : src_(source), limits_(limits) {
  // A UTF-8 byte order mark is not part of the first token.
  if (src_.size() >= 3 && src_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = line_begin_ = 3;
}

Token Tokenizer::make(TokKind kind, size_t begin, uint8_t flags) {
  return Token{kind, flags, tok_line_, src_.substr(begin, pos_ - begin)};
}

void Tokenizer::newline_at(size_t pos) {
  pos_ = pos + ((src_[pos] == '\r' && pos + 1 < src_.size() && src_[pos + 1] == '\n') ? 2 : 1);
  line_begin_ = pos_;
  ++line_;
}

Token Tokenizer::next() {
  if (pending_dedents_ > 0) {
    --pending_dedents_;
    tok_line_ = line_;
    return make(TokKind::dedent, pos_);
  }
  Mode m = modes_.back().mode;
  if (m == Mode::fstring || m == Mode::spec) return next_fstring_text();
  return next_code();
}

bool Tokenizer::at_line_start_indent(Token& out) {
  at_line_start_ = false;
  size_t p = pos_;
  uint32_t col = 0;
  const size_t n = src_.size();
  while (p < n) {
    char c = src_[p];
    if (c == ' ') ++col;
    else if (c == '\t') col = (col / 8 + 1) * 8;
    else if (c == '\f') col = 0;
    else break;
    ++p;
  }
  pos_ = p;
  // Blank and comment-only lines do not change the indentation.
  if (p >= n || src_[p] == '#' || is_newline(src_[p])) return false;
  tok_line_ = line_;
  if (col > indents_.back()) {
    if (indents_.size() >= limits_.max_indent_levels) return false;
    indents_.push_back(col);
    out = make(TokKind::indent, line_begin_);
    return true;
  }
  uint32_t count = 0;
  while (col < indents_.back()) {
    indents_.pop_back();
    ++count;
  }
  if (count == 0) return false;
  pending_dedents_ = count - 1;
  out = make(TokKind::dedent, pos_);
  return true;
}

Token Tokenizer::next_code() {
  const size_t n = src_.size();
  for (;;) {
    if (at_line_start_ && !in_field() && depth() == 0) {
      Token t;
      if (at_line_start_indent(t)) return t;
    }
    size_t gap_begin = pos_;
    while (pos_ < n) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\f') {
        ++pos_;
      } else if (c == '\\' && pos_ + 1 < n && is_newline(src_[pos_ + 1])) {
        newline_at(pos_ + 1);  // explicit line joining
      } else {
        break;
      }
    }
    gap_ = static_cast<uint32_t>(std::min<size_t>(pos_ - gap_begin, UINT32_MAX));
    tok_line_ = line_;
    if (pos_ >= n) {
      if (!eof_newline_done_) {
        eof_newline_done_ = true;
        modes_.resize(1);
        if (line_has_code_) {
          line_has_code_ = false;
          return make(TokKind::newline, pos_);
        }
      }
      if (indents_.size() > 1) {
        indents_.pop_back();
        return make(TokKind::dedent, pos_);
      }
      return make(TokKind::end, pos_);
    }
    const size_t b = pos_;
    const auto c = static_cast<unsigned char>(src_[pos_]);
    if (c == '#') {
      while (pos_ < n && !is_newline(src_[pos_])) ++pos_;
      return make(TokKind::comment, b);
    }
    if (is_newline(static_cast<char>(c))) {
      // A single-quoted f-string cannot span lines: the field and its string end here.
      if (in_field() && !modes_.back().triple) modes_.resize(1);
      newline_at(pos_);
      if (in_field() || depth() > 0) return make(TokKind::nl, b);
      at_line_start_ = true;
      if (!line_has_code_) return make(TokKind::nl, b);
      line_has_code_ = false;
      return make(TokKind::newline, b);
    }
    line_has_code_ = true;
    const uint8_t gap_flag = gap_ >= limits_.wide_gap ? tokflag::wide_gap : 0;
    Token t;
    if (is_ident_start(c)) {
      t = scan_name(b);
    } else if (is_digit(c) || (c == '.' && pos_ + 1 < n && is_digit(static_cast<unsigned char>(src_[pos_ + 1])))) {
      t = scan_number(b);
    } else if (c == '"' || c == '\'') {
      t = scan_string(b, 0);
    } else if (in_field() && depth() == 0 && modes_.back().mode == Mode::field && (c == '}' || c == ':')) {
      ++pos_;
      if (c == '}') {
        modes_.pop_back();
      } else {
        Frame spec = modes_.back();
        spec.mode = Mode::spec;
        modes_.push_back(spec);
      }
      t = make(TokKind::op, b);
    } else {
      t = scan_op(b);
    }
    t.flags |= gap_flag;
    return t;
  }
}

Token Tokenizer::scan_name(size_t b) {
  const size_t n = src_.size();
  bool ascii = true;
  while (pos_ < n && is_ident_char(static_cast<unsigned char>(src_[pos_]))) {
    if (static_cast<unsigned char>(src_[pos_]) >= 0x80) ascii = false;
    ++pos_;
  }
  std::string_view word = src_.substr(b, pos_ - b);
  if (pos_ < n && (src_[pos_] == '"' || src_[pos_] == '\'') && word.size() <= 2) {
    uint8_t f = 0;
    int u = 0, r = 0, bb = 0, ff = 0;
    for (char ch : word) {
      switch (ch | 0x20) {
        case 'r': ++r; f |= tokflag::raw; break;
        case 'b': ++bb; f |= tokflag::bytes; break;
        case 'f': case 't': ++ff; f |= tokflag::fstring; break;
        case 'u': ++u; break;
        default: u = 9;
      }
    }
    bool valid = r <= 1 && bb <= 1 && ff <= 1 && bb + ff <= 1 && (u == 0 || word.size() == 1);
    if (valid) return scan_string(b, f);
  }
  if (!ascii && fold_name(word, folded_)) {
    Token t = make(TokKind::name, b, tokflag::folded);
    t.text = folded_;
    return t;
  }
  return make(TokKind::name, b);
}

Token Tokenizer::scan_number(size_t b) {
  const size_t n = src_.size();
  while (pos_ < n) {
    auto c = static_cast<unsigned char>(src_[pos_]);
    if (is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.') {
      ++pos_;
      // Exponent sign: 1e-5, 2E+3 (not in hex literals, where e is a digit).
      if ((c == 'e' || c == 'E') && pos_ < n && (src_[pos_] == '-' || src_[pos_] == '+') &&
          !(pos_ - b > 1 && (src_[b + 1] == 'x' || src_[b + 1] == 'X')))
        ++pos_;
    } else {
      break;
    }
  }
  return make(TokKind::number, b);
}

Token Tokenizer::scan_string(size_t b, uint8_t flags) {
  const size_t n = src_.size();
  const char q = src_[pos_];
  const bool triple = pos_ + 2 < n && src_[pos_ + 1] == q && src_[pos_ + 2] == q;
  pos_ += triple ? 3 : 1;
  if (triple) flags |= tokflag::triple;
  if ((flags & tokflag::fstring) && modes_.size() < limits_.max_fstring_nesting) {
    modes_.push_back(Frame{Mode::fstring, q, triple, (flags & tokflag::raw) != 0, 0});
    return make(TokKind::fstring_start, b, flags);
  }
  scan_string_body(q, triple, flags);
  return make(TokKind::string, b, flags);
}

void Tokenizer::skip_escape(bool keep_braces) {
  if (pos_ + 1 >= src_.size()) {
    ++pos_;
  } else if (is_newline(src_[pos_ + 1])) {
    newline_at(pos_ + 1);
  } else {
    pos_ += (keep_braces && (src_[pos_ + 1] == '{' || src_[pos_ + 1] == '}')) ? 1 : 2;
  }
}

void Tokenizer::scan_string_body(char q, bool triple, uint8_t& flags) {
  const size_t n = src_.size();
  while (pos_ < n) {
    char c = src_[pos_];
    if (c == '\\') {
      skip_escape(false);
    } else if (c == q) {
      if (!triple) {
        ++pos_;
        return;
      }
      if (pos_ + 2 < n && src_[pos_ + 1] == q && src_[pos_ + 2] == q) {
        pos_ += 3;
        return;
      }
      ++pos_;
    } else if (is_newline(c)) {
      if (!triple) break;
      newline_at(pos_);
    } else {
      ++pos_;
    }
  }
  flags |= tokflag::unterminated;
}

Token Tokenizer::next_fstring_text() {
  const size_t n = src_.size();
  const Frame f = modes_.back();
  const size_t b = pos_;
  tok_line_ = line_;
  auto closes = [&](size_t p) {
    return src_[p] == f.quote && (!f.triple || (p + 2 < n && src_[p + 1] == f.quote && src_[p + 2] == f.quote));
  };
  while (pos_ < n) {
    char c = src_[pos_];
    if (c == '\\') {
      skip_escape(true);  // f"\{x}" still opens a field
    } else if (c == '{' || c == '}') {
      if (f.mode == Mode::fstring && pos_ + 1 < n && src_[pos_ + 1] == c) {
        pos_ += 2;
      } else if (c == '{' || f.mode == Mode::spec) {
        break;
      } else {
        ++pos_;  // a lone '}' (a SyntaxError in Python): keep it as text
      }
    } else if (closes(pos_)) {
      break;
    } else if (is_newline(c)) {
      if (!f.triple) break;
      newline_at(pos_);
    } else {
      ++pos_;
    }
  }
  if (pos_ > b) return make(TokKind::fstring_middle, b, f.raw ? tokflag::raw : 0);
  if (pos_ >= n) {
    modes_.resize(1);
    return next_code();
  }
  const char c = src_[pos_];
  if (c == '{') {
    ++pos_;
    Frame field = f;
    field.mode = Mode::field;
    field.depth = 0;
    modes_.push_back(field);
    return make(TokKind::op, b);
  }
  if (c == '}') {  // end of a format spec, and of its replacement field
    ++pos_;
    modes_.pop_back();
    if (modes_.back().mode == Mode::field) modes_.pop_back();
    return make(TokKind::op, b);
  }
  while (modes_.back().mode != Mode::fstring) modes_.pop_back();
  modes_.pop_back();
  if (closes(pos_)) {
    pos_ += f.triple ? 3 : 1;
    return make(TokKind::fstring_end, b);
  }
  return make(TokKind::fstring_end, b, tokflag::unterminated);  // newline in a one-line f-string
}

Token Tokenizer::scan_op(size_t b) {
  const size_t n = src_.size();
  const size_t len = op_length(src_[pos_], pos_ + 1 < n ? src_[pos_ + 1] : '\0', pos_ + 2 < n ? src_[pos_ + 2] : '\0');
  if (len > 1) {
    pos_ += len;
    return make(TokKind::op, b);
  }
  const char c = src_[pos_++];
  switch (c) {
    case '(': case '[': case '{':
      ++depth();
      return make(TokKind::op, b);
    case ')': case ']': case '}':
      if (depth() > 0) --depth();
      return make(TokKind::op, b);
    case '+': case '-': case '*': case '/': case '%': case '@': case '&': case '|': case '^':
    case '~': case '<': case '>': case ',': case ':': case ';': case '.': case '=': case '!':
      return make(TokKind::op, b);
    default:
      return make(TokKind::error, b);
  }
}

std::string string_value(const Token& tok) {
  std::string_view t = tok.text;
  size_t p = 0;
  while (p < t.size() && t[p] != '"' && t[p] != '\'') ++p;
  if (p >= t.size()) return {};
  const bool triple = (tok.flags & tokflag::triple) != 0;
  const size_t open = triple ? 3 : 1;
  std::string_view body = t.substr(std::min(t.size(), p + open));
  if (!(tok.flags & tokflag::unterminated)) body = body.substr(0, body.size() >= open ? body.size() - open : 0);
  return unescape(body, (tok.flags & tokflag::raw) != 0, (tok.flags & tokflag::bytes) != 0, false);
}

std::string fstring_middle_value(std::string_view text, bool raw) { return unescape(text, raw, false, true); }

}  // namespace sandboxrun::assess
