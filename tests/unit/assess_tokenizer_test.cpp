// Tokenizer: Python 3 lexical structure, including the corners analysis depends on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "assess/assess_tokenizer.hpp"

using namespace sandboxrun::assess;

namespace {

struct Tok {
  TokKind kind;
  std::string text;
  uint32_t line;
  uint8_t flags;
};

std::vector<Tok> lex(std::string_view src) {
  std::vector<Tok> out;
  Tokenizer t(src);
  for (int guard = 0; guard < 100000; ++guard) {
    Token k = t.next();
    if (k.kind == TokKind::end) break;
    out.push_back({k.kind, std::string(k.text), k.line, k.flags});
  }
  return out;
}

std::vector<TokKind> kinds(std::string_view src) {
  std::vector<TokKind> v;
  for (const auto& t : lex(src)) v.push_back(t.kind);
  return v;
}

std::vector<std::string> names(std::string_view src) {
  std::vector<std::string> v;
  for (const auto& t : lex(src))
    if (t.kind == TokKind::name) v.push_back(t.text);
  return v;
}

const Tok& first_of(const std::vector<Tok>& v, TokKind k) {
  for (const auto& t : v)
    if (t.kind == k) return t;
  static Tok none{TokKind::end, {}, 0, 0};
  return none;
}

}  // namespace

TEST(AssessTokenizer, StringPrefixesAnyCase) {
  for (const char* p : {"r", "R", "b", "B", "u", "U", "rb", "Rb", "bR", "BR", "br"}) {
    std::string src = std::string("x = ") + p + "'os.system(1)'\n";
    auto v = lex(src);
    ASSERT_EQ(v.size(), 4u) << src;
    EXPECT_EQ(v[2].kind, TokKind::string) << src;
    EXPECT_EQ(names(src), std::vector<std::string>{"x"}) << src;
  }
  for (const char* p : {"f", "F", "fr", "rF", "Rf", "FR"}) {
    std::string src = std::string(p) + "'a{b}c'\n";
    EXPECT_EQ(lex(src)[0].kind, TokKind::fstring_start) << src;
  }
  // Not a prefix: a name followed by a string.
  EXPECT_EQ(names("ub'x'\n"), std::vector<std::string>{"ub"});
}

TEST(AssessTokenizer, TripleQuotedStringsSpanLines) {
  auto v = lex("s = '''a\nb ' '' \\''' c\n'''\nexec\n");
  const Tok& s = first_of(v, TokKind::string);
  EXPECT_TRUE(s.flags & tokflag::triple);
  EXPECT_EQ(s.line, 1u);
  // The name after the string is on line 4 and is a name, not string content.
  EXPECT_EQ(v[v.size() - 2].text, "exec");
  EXPECT_EQ(v[v.size() - 2].line, 4u);
  EXPECT_EQ(names("x = \"\"\"eval(1)\n\"\"\"\n"), std::vector<std::string>{"x"});
}

TEST(AssessTokenizer, EscapedQuotesDoNotEndStrings) {
  EXPECT_EQ(names(R"(x = "a\"eval(1)\"b"; y = r'\'' + z)"), (std::vector<std::string>{"x", "y", "z"}));
}

TEST(AssessTokenizer, CommentsAreNotCode) {
  auto v = lex("x = 1  # os.system('rm -rf /')\n");
  EXPECT_EQ(names("x = 1  # os.system('rm -rf /')\n"), std::vector<std::string>{"x"});
  EXPECT_EQ(first_of(v, TokKind::comment).text, "# os.system('rm -rf /')");
}

TEST(AssessTokenizer, FStringFieldsAreCodeIncludingNested) {
  auto n = names("f'{a} {b(c)!r:>{width}} {{not_a_field}} {f\"{inner}\"}'\n");
  EXPECT_EQ(n, (std::vector<std::string>{"a", "b", "c", "r", "width", "inner"}));
  auto v = lex("f'x{y}z'\n");
  std::vector<TokKind> expect{TokKind::fstring_start, TokKind::fstring_middle, TokKind::op, TokKind::name,
                              TokKind::op, TokKind::fstring_middle, TokKind::fstring_end, TokKind::newline};
  EXPECT_EQ(kinds("f'x{y}z'\n"), expect);
  EXPECT_EQ(fstring_middle_value("a{{b}}\\n", false), "a{b}\n");
}

TEST(AssessTokenizer, FStringDictInsideField) {
  EXPECT_EQ(names("f'{ {\"k\": v}[\"k\"] }' + w\n"), (std::vector<std::string>{"v", "w"}));
}

TEST(AssessTokenizer, UnterminatedStringsEndAtLineEnd) {
  auto v = lex("x = 'abc\ny = 1\n");
  EXPECT_TRUE(first_of(v, TokKind::string).flags & tokflag::unterminated);
  EXPECT_EQ(names("x = 'abc\ny = 1\n"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(names("x = f'abc{\ny = 1\n"), (std::vector<std::string>{"x", "y"}));
}

TEST(AssessTokenizer, LineContinuationAndImplicitJoining) {
  auto v = lex("x = 1 + \\\n    2\ny = (1,\n     2)\nz\n");
  int newlines = 0;
  for (const auto& t : v) newlines += t.kind == TokKind::newline;
  EXPECT_EQ(newlines, 3);  // only logical line ends
  EXPECT_EQ(first_of(v, TokKind::indent).kind, TokKind::end);  // no indentation inside brackets
  EXPECT_EQ(v.back().line, 5u);
}

TEST(AssessTokenizer, IndentationAndDedent) {
  auto k = kinds("if a:\n    b\n    if c:\n        d\n\n# c\ne\n");
  int indents = 0, dedents = 0;
  for (auto x : k) indents += x == TokKind::indent, dedents += x == TokKind::dedent;
  EXPECT_EQ(indents, 2);
  EXPECT_EQ(dedents, 2);
  // Unclosed blocks are closed at the end of input.
  auto k2 = kinds("while True:\n  os.fork()");
  EXPECT_EQ(k2.back(), TokKind::dedent);
}

TEST(AssessTokenizer, CrlfAndLoneCr) {
  auto v = lex("a\r\nb\rc\n");
  EXPECT_EQ(names("a\r\nb\rc\n"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(v.back().line, 3u);
}

TEST(AssessTokenizer, NumbersAndOperators) {
  auto v = lex("x = 0x1F + 1e-5 ** 2 // 3 != 4 -> 0o777 ... := 1_000j\n");
  for (const auto& t : v) EXPECT_NE(t.kind, TokKind::error) << t.text;
  EXPECT_EQ(names("x = 0x1F + 1e-5\n"), std::vector<std::string>{"x"});
}

TEST(AssessTokenizer, FoldsDisguisedIdentifiers) {
  // Fullwidth "ｅｖａｌ" and mathematical bold "𝐞𝐯𝐚𝐥" are eval to Python (NFKC).
  auto v = lex("\xef\xbd\x85\xef\xbd\x96\xef\xbd\x81\xef\xbd\x8c(1)\n");
  EXPECT_EQ(v[0].text, "eval");
  EXPECT_TRUE(v[0].flags & tokflag::folded);
  auto m = lex("\xf0\x9d\x90\x9e\xf0\x9d\x90\xaf\xf0\x9d\x90\x9a\xf0\x9d\x90\xa5(1)\n");
  EXPECT_EQ(m[0].text, "eval");
  // Ordinary non-ASCII names are kept as they are.
  EXPECT_EQ(names("caf\xc3\xa9 = 1\n"), std::vector<std::string>{"caf\xc3\xa9"});
}

TEST(AssessTokenizer, StringValues) {
  auto value = [](std::string_view src) { return string_value(Tokenizer(src).next()); };
  EXPECT_EQ(value(R"('a\x41\101\n\u00e9')"), "aAA\n\xc3\xa9");
  EXPECT_EQ(value(R"(r'a\x41')"), "a\\x41");
  EXPECT_EQ(value(R"(b'\xff\x00')"), std::string("\xff\x00", 2));
  EXPECT_EQ(value("'''tri'ple'''"), "tri'ple");
  EXPECT_EQ(value("'unterminated"), "unterminated");
  EXPECT_EQ(value(R"('bad \q \x4')"), "bad \\q \\x4");
}

TEST(AssessTokenizer, WideGapFlag) {
  auto v = lex(std::string("x = 1") + std::string(100, ' ') + "; y()\n");
  bool flagged = false;
  for (const auto& t : v) flagged |= (t.flags & tokflag::wide_gap) != 0;
  EXPECT_TRUE(flagged);
  auto c = lex(std::string("x = 1") + std::string(100, ' ') + "# aligned comment\n");
  for (const auto& t : c) EXPECT_FALSE(t.flags & tokflag::wide_gap) << t.text;
}

TEST(AssessTokenizer, ErrorBytesDoNotStopTokenizing) {
  auto v = lex(std::string("a $ ` \x01 b\0c\n", 12));
  EXPECT_EQ(names(std::string("a $ ` \x01 b\0c\n", 12)), (std::vector<std::string>{"a", "b", "c"}));
  int errors = 0;
  for (const auto& t : v) errors += t.kind == TokKind::error;
  EXPECT_EQ(errors, 4);
}

TEST(AssessTokenizer, KeywordsAreExactlyPythonsHardKeywords) {
  // keyword.kwlist of Python 3.11; the soft keywords (match, case, _, type) are names.
  for (std::string_view k :
       {"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
        "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
        "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"})
    EXPECT_TRUE(is_keyword(k)) << k;
  for (std::string_view n : {"", "a", "i", "false", "none", "Fals", "Nonee", "iff", "fo", "form", "defs", "nonlocals",
                             "yielder", "ass", "asserts", "match", "case", "_", "type", "print", "self", "exec", "eval",
                             "wit", "whilE", "els", "elsif", "continues"})
    EXPECT_FALSE(is_keyword(n)) << n;
}
