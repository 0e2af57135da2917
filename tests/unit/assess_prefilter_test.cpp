// The regex prefilter: what it derives from an expression, that it never turns away a text the
// expression matches (over every regex of the shipped rules and the strings of the project's
// corpus), and that it gives up on syntax it does not read.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include "assess/assess_rules.hpp"
#include "assess/regex_prefilter.hpp"

using namespace sandboxrun::assess;

namespace {

const std::filesystem::path kRoot = SANDBOXRUN_SOURCE_DIR;

RegexPrefilter filter(std::string_view re) {
  const bool icase = re.starts_with("(?i)");
  if (icase) re.remove_prefix(4);
  return regex_prefilter(re, icase);
}

std::regex compile(std::string_view re) {
  auto flags = std::regex::ECMAScript;
  if (re.starts_with("(?i)")) {
    re.remove_prefix(4);
    flags |= std::regex::icase;
  }
  return std::regex(std::string(re), flags);
}

bool has(const RegexPrefilter& f, const std::string& needle) {
  return std::find(f.needles.begin(), f.needles.end(), needle) != f.needles.end();
}

}  // namespace

TEST(AssessPrefilter, AlternativesBecomeNeedlesAndTurnAwayOtherTexts) {
  const auto f = filter("(?i)(nanopool|minergate|mining-?pool|xmr-?stak)");
  EXPECT_TRUE(f.icase);
  for (const char* n : {"nanopool", "minergate", "mining-pool", "miningpool", "xmr-stak", "xmrstak"})
    EXPECT_TRUE(has(f, n)) << n;
  EXPECT_TRUE(f.may_match("stratum+tcp://NanoPool.org:14444"));
  EXPECT_TRUE(f.may_match("XMRSTAK"));
  EXPECT_FALSE(f.may_match("service.load"));
  EXPECT_FALSE(f.may_match(""));
}

TEST(AssessPrefilter, ExactRunsAfterAnUnknownPartStayWhole) {
  const auto f = filter("[A-Za-z0-9_-]\\.pth$|(site|user)customize\\.py$");
  EXPECT_TRUE(has(f, ".pth"));
  EXPECT_TRUE(has(f, "sitecustomize.py"));
  EXPECT_FALSE(f.may_match("service.0"));
  EXPECT_TRUE(f.may_match("evil.pth"));
}

TEST(AssessPrefilter, MinimumLengthTurnsAwayShortTexts) {
  const auto f = filter("^[48][0-9AB][1-9A-HJ-NP-Za-km-z]{93}$");
  EXPECT_EQ(f.min_length, 95u);
  EXPECT_TRUE(f.needles.empty());
  EXPECT_FALSE(f.may_match("4AB"));
  EXPECT_TRUE(f.may_match(std::string(95, 'x')));
}

TEST(AssessPrefilter, RepetitionsAndOptionalPartsAreNeverSkippedOver) {
  // a(b)*c must not require "ac": "abbc" matches.
  const auto star = filter("a(b)*c");
  for (const auto& n : star.needles) EXPECT_NE(n, "ac");
  EXPECT_TRUE(star.may_match("abbbc"));
  EXPECT_TRUE(filter("x{2,3}y").may_match("xxy"));
  EXPECT_TRUE(filter("(ba)?sh\\s+-i").may_match("bash  -i"));
  EXPECT_TRUE(filter("(ab|)c").may_match("c"));
  EXPECT_TRUE(filter("a+?b").may_match("aab"));
  // Lookaheads consume nothing: what they look for is not required of the match itself.
  const auto look = filter("^(?!tempfile\\.)[A-Za-z_][A-Za-z0-9_.]*$");
  EXPECT_TRUE(look.needles.empty());
  EXPECT_TRUE(look.may_match("os.path"));
}

TEST(AssessPrefilter, HexEscapesAreTheirCharacterAndNeedlesHoldingAnotherAreDropped) {
  EXPECT_EQ(filter("\\x41bc").needles, std::vector<std::string>{"Abc"});
  EXPECT_EQ(filter("(?i)\\x41bc").needles, std::vector<std::string>{"abc"});
  // The shipped shell-argument pattern: 15 spellings around "sh", all holding "sh".
  const auto f = filter("(^|/|\\x1f)(ba|da|z|k)?sh(\\x1f|\\s|$)");
  EXPECT_EQ(f.needles, std::vector<std::string>{"sh"});
  EXPECT_TRUE(f.may_match("/bin/bash\x1f-c"));
  EXPECT_FALSE(f.may_match("True"));
  EXPECT_EQ(filter("(bash|sh|ash)x").needles, std::vector<std::string>{"shx"});
}

TEST(AssessPrefilter, GivesUpOnSyntaxItDoesNotRead) {
  for (const char* re : {"(a)\\1", "\\x4", "\\xg1bc", "[[:alpha:]]abc", "(?<=a)b", "a{2", "\\cJabc", "(?i:abc)"}) {
    const auto f = filter(re);
    EXPECT_TRUE(f.needles.empty()) << re;
    EXPECT_EQ(f.min_length, 0u) << re;
    EXPECT_TRUE(f.may_match("")) << re;
  }
}

// Every regex of the shipped rules against every line and quoted string of the corpus: where
// std::regex finds a match, the filter must let the text through.
TEST(AssessPrefilter, NeverTurnsAwayAMatchOfTheShippedRules) {
  const RuleSet rules = RuleSet::load(kRoot / "policies/assess-rules.yaml");
  std::vector<std::string> patterns;
  for (const Rule& r : rules.rules()) {
    if (r.regex) patterns.push_back(r.regex->text);
    for (const auto& a : r.args)
      if (a.regex) patterns.push_back(a.regex->text);
  }
  ASSERT_GT(patterns.size(), 50u);

  std::vector<std::string> texts;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kRoot / "tests/fixtures/assess")) {
    if (!e.is_regular_file() || e.path().extension() != ".py") continue;
    std::ifstream in(e.path(), std::ios::binary);
    for (std::string line; std::getline(in, line);) {
      texts.push_back(line);
      // The quoted parts: most string rules are anchored to a whole literal.
      for (char q : {'"', '\''})
        for (size_t a = line.find(q); a != std::string::npos;) {
          const size_t b = line.find(q, a + 1);
          if (b == std::string::npos) break;
          texts.push_back(line.substr(a + 1, b - a - 1));
          a = line.find(q, b + 1);
        }
    }
  }
  ASSERT_GT(texts.size(), 1000u);

  size_t matched = 0, turned_away = 0;
  for (const auto& p : patterns) {
    const auto f = filter(p);
    const std::regex re = compile(p);
    for (const auto& t : texts) {
      const bool may = f.may_match(t);
      turned_away += !may;
      if (!std::regex_search(t, re)) continue;
      ++matched;
      EXPECT_TRUE(may) << "the filter of " << p << " turned away a match: " << t;
    }
  }
  // Not vacuous: many matches were checked, and the filter does turn most texts away.
  EXPECT_GT(matched, 200u);
  EXPECT_GT(turned_away, patterns.size() * texts.size() / 2);
}
