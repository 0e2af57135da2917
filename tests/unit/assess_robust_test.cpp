// Hostile inputs: nothing crashes, hangs or grows without bound. Time limits here are hang
// guards only (generous), not performance assertions.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

namespace {

using assess_fixture::config;

// Assesses and fails if it took longer than `limit`: a hang guard sized for the sanitizer
// build on a loaded 2-CPU CI machine (a release build takes ~1.5 s for the largest input).
Assessment guarded(std::string_view src, std::chrono::seconds limit = std::chrono::seconds(90)) {
  auto t0 = std::chrono::steady_clock::now();
  Assessment a = assess_source(src, config());
  auto dt = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(dt, limit) << "assessment of " << src.size() << " bytes took too long";
  return a;
}

}  // namespace

TEST(AssessRobust, EmptyAndWhitespace) {
  EXPECT_EQ(guarded("").level, RiskLevel::low);
  EXPECT_EQ(guarded("\n\n   \n\t\n").level, RiskLevel::low);
  EXPECT_EQ(guarded("\xEF\xBB\xBF").level, RiskLevel::low);  // BOM only
}

TEST(AssessRobust, BinaryNulAndInvalidUtf8) {
  std::mt19937 rng(42);
  std::string bin(1 << 20, '\0');
  for (auto& c : bin) c = static_cast<char>(rng());
  guarded(bin);
  guarded(std::string(4096, '\0'));
  guarded("\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc import os\nos.system(x)\n");
  // A NUL inside a call does not hide it.
  Assessment a = guarded(std::string("import os\nos.system(\"rm -rf /\"\0)\n", 33));
  EXPECT_EQ(a.level, RiskLevel::blocked);
}

TEST(AssessRobust, Python2Syntax) {
  Assessment a = guarded("print 'hi'\nexec \"import os; os.setuid(0)\"\nx = `y`\nraise E, 'v'\n0777L\n");
  EXPECT_EQ(a.level, RiskLevel::blocked);  // the Python 2 exec statement is still exec
}

TEST(AssessRobust, HundredThousandNestedBrackets) {
  for (const char* open : {"(", "[", "{"}) {
    std::string s = "x = ";
    for (int i = 0; i < 100000; ++i) s += open;
    guarded(s);
    s += std::string(100000, open[0] == '(' ? ')' : open[0] == '[' ? ']' : '}');
    s += "\nimport os\nos.system(c)\n";
    Assessment a = guarded(s);
    bool nesting = false, call = false;
    for (const auto& f : a.findings) nesting |= f.rule == "SR-OBF-011", call |= f.rule == "SR-PROC-001";
    EXPECT_TRUE(nesting);
    EXPECT_TRUE(call) << "analysis resumes after the nesting";
  }
  // Nested calls and f-strings.
  std::string calls;
  for (int i = 0; i < 100000; ++i) calls += "f(";
  guarded(calls);
  std::string fs;
  for (int i = 0; i < 50000; ++i) fs += "f'{";
  guarded(fs);
  std::string indents;
  for (int i = 0; i < 20000; ++i) indents += std::string(i % 2000, ' ') + "if x:\n";
  guarded(indents);
}

TEST(AssessRobust, TenMegabyteFile) {
  std::string big;
  big.reserve(10 << 20);
  const std::string chunk =
      "def handler_{n}(request):\n"
      "    data = request.get_json()\n"
      "    result = [x * 2 for x in data.get('values', []) if x]\n"
      "    return {{'ok': True, 'n': len(result), 's': f\"{{len(result)}} items\"}}\n\n";
  for (int n = 0; big.size() < (10u << 20); ++n) big += chunk;
  Assessment a = guarded(big);
  EXPECT_EQ(a.level, RiskLevel::low);
  // Ten megabytes in one line, one string, one comment, one unterminated triple quote.
  guarded("x = '" + std::string(10 << 20, 'a') + "'\n");
  guarded("# " + std::string(10 << 20, 'a'));
  guarded("'''" + std::string(10 << 20, '\n'));
  guarded(std::string(10 << 20, '('));
  guarded(std::string(5 << 20, 'a') + std::string(5 << 20, '.'));
}

TEST(AssessRobust, OversizedInputIsCutAndFlagged) {
  SecurityConfig small = config();
  small.max_bytes = 1000;
  Assessment a = assess_source(std::string(5000, '\n') + "import os\nos.setuid(0)\n", small);
  EXPECT_GE(a.level, RiskLevel::high);
  ASSERT_FALSE(a.notes.empty());
  EXPECT_NE(a.notes[0].find("first"), std::string::npos);
}

TEST(AssessRobust, FewSourceBytesCannotMultiplyWork) {
  // A 64 KiB constant built by doubling, then used a million times in 7 MB of source.
  std::string s = "s = 'a'\n";
  for (int i = 0; i < 16; ++i) s += "s = s + s\n";
  s.reserve(s.size() + 7'000'000);
  while (s.size() < 7'000'000) s += "f(s+s)\n";
  guarded(s);
  // Joins with a long separator.
  std::string j = "sep = '" + std::string(1000, 'x') + "'\n";
  while (j.size() < 3'000'000) j += "sep.join(['a','a','a','a','a','a','a','a','a','a','a','a'])\n";
  guarded(j);
}

TEST(AssessRobust, LongExecdConstantIsStillRead) {
  const std::string pad(20000, ' ');
  const std::string body = "'''" + pad + "\nimport os\nos.setuid(0)\n'''";
  EXPECT_EQ(guarded("code = " + body + "\nexec(code)\n").level, RiskLevel::blocked);
  EXPECT_EQ(guarded("exec(" + body + ")\n").level, RiskLevel::blocked);
}

TEST(AssessRobust, DecodeBombsAreBounded) {
  // exec of exec of exec ... of base64: only max_fragment_depth levels are followed.
  std::string code = "import os\nos.setuid(0)\n";
  for (int i = 0; i < 12; ++i) {
    std::string esc;
    for (char c : code) esc += c == '\n' ? std::string("\\n") : c == '"' ? std::string("\\\"") : c == '\\' ? std::string("\\\\") : std::string(1, c);
    code = "exec(\"" + esc + "\")\n";
  }
  guarded(code);
}
