// Python 3 tokenizer for the assessor (the token kinds of CPython 3.12's tokenize module).
// Byte-oriented and total: every input, including binary data and invalid UTF-8, yields a
// finite token stream in one linear pass. No recursion: f-string nesting, brackets and
// indentation live in bounded explicit stacks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sandboxrun::assess {

enum class TokKind : uint8_t {
  name,
  number,
  string,          // a complete literal, prefix and quotes included
  fstring_start,   // f"  (prefix and opening quote)
  fstring_middle,  // literal text of an f-string ("{{" kept as written)
  fstring_end,     // closing quote
  op,
  newline,  // end of a logical line
  nl,       // a line break that does not end a statement (blank line, inside brackets)
  indent,
  dedent,
  comment,
  error,  // a byte Python would reject; tokenizing continues after it
  end,
};

// Token::flags bits.
namespace tokflag {
inline constexpr uint8_t raw = 1;           // r prefix: backslashes are literal
inline constexpr uint8_t bytes = 2;         // b prefix
inline constexpr uint8_t fstring = 4;       // f (or t) prefix
inline constexpr uint8_t triple = 8;        // ''' or """
inline constexpr uint8_t unterminated = 16; // string ran to end of line/file without a quote
inline constexpr uint8_t wide_gap = 32;     // preceded on its line by a long run of blanks
inline constexpr uint8_t folded = 64;       // name spelled with Unicode that NFKC folds to ASCII
}  // namespace tokflag

struct Token {
  TokKind kind = TokKind::end;
  uint8_t flags = 0;
  uint32_t line = 0;      // 1-based line of the first byte
  std::string_view text;  // source bytes; for a folded name, its ASCII spelling (valid until next())
};

struct TokenizerLimits {
  uint32_t wide_gap = 80;          // blanks before a token that set tokflag::wide_gap
  uint32_t max_indent_levels = 1000;
  uint32_t max_fstring_nesting = 64;  // deeper f-strings are read as plain strings
};

class Tokenizer {
 public:
  explicit Tokenizer(std::string_view source, TokenizerLimits limits = {});

  // The next token; TokKind::end forever once the input is exhausted.
  Token next();
  // Brackets still open where the input ended (a file Python would reject: "was never closed").
  uint32_t open_brackets() const noexcept { return modes_.empty() ? 0 : modes_.front().depth + (modes_.size() > 1); }

 private:
  enum class Mode : uint8_t { code, fstring, field, spec };
  struct Frame {
    Mode mode;
    char quote = 0;
    bool triple = false;
    bool raw = false;
    uint32_t depth = 0;  // brackets open inside a replacement field
  };

  Token make(TokKind kind, size_t begin, uint8_t flags = 0);
  Token next_code();
  Token next_fstring_text();
  bool at_line_start_indent(Token& out);
  void newline_at(size_t pos);  // pos is the '\r' or '\n'; advances past it
  // At a backslash inside string text: steps over the escape (a backslash-newline continues the
  // line). With keep_braces (f-string text) a backslash never hides a following '{' or '}'.
  void skip_escape(bool keep_braces);
  void scan_string_body(char quote, bool triple, uint8_t& flags);
  Token scan_string(size_t begin, uint8_t flags);
  Token scan_name(size_t begin);
  Token scan_number(size_t begin);
  Token scan_op(size_t begin);
  bool in_field() const noexcept { return modes_.size() > 1; }
  uint32_t& depth() noexcept { return modes_.back().depth; }

  std::string_view src_;
  TokenizerLimits limits_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  uint32_t tok_line_ = 1;  // line of the token being scanned
  size_t line_begin_ = 0;
  bool at_line_start_ = true;
  bool line_has_code_ = false;  // a token other than comment/NL on this logical line
  bool eof_newline_done_ = false;
  uint32_t pending_dedents_ = 0;
  uint32_t gap_ = 0;  // blanks skipped before the current token
  std::vector<uint32_t> indents_{0};
  std::vector<Frame> modes_{Frame{Mode::code}};
  std::string folded_;  // storage for folded names
};

// Value of a complete string literal token (prefix, quotes and escapes resolved; bytes kept
// as bytes, \N{...} left as written). Fails soft: malformed escapes are kept literally.
std::string string_value(const Token& tok);
// Value of an f-string middle ("{{" -> "{"), escapes resolved unless raw.
std::string fstring_middle_value(std::string_view text, bool raw);

bool is_keyword(std::string_view name) noexcept;
// The value of a hexadecimal digit (either case), or -1.
int hex_digit(char c) noexcept;

}  // namespace sandboxrun::assess
