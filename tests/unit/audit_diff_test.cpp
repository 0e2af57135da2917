// The line diff behind run_start's diff_from and `audit show --diff`: minimal counts (checked
// against an LCS table), unified output that patches the old text into the new one, and the
// cost bound.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "audit/diff.hpp"

namespace {

using sandboxrun::audit::count_line_changes;
using sandboxrun::audit::unified_diff;

std::vector<std::string> lines_of(const std::string& t) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < t.size();) {
    size_t nl = t.find('\n', pos);
    size_t end = nl == std::string::npos ? t.size() : nl + 1;
    out.push_back(t.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// Longest common subsequence of lines, by the O(nm) table.
size_t lcs(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::vector<size_t>> t(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t[a.size()][b.size()];
}

// Applies a unified diff to `old_text`; fails the test on a hunk that does not fit.
std::string patch(const std::string& old_text, const std::string& diff) {
  auto old_lines = lines_of(old_text);
  auto d = lines_of(diff);
  std::string out;
  size_t at = 0;  // next old line to copy
  size_t i = 2;   // past the ---/+++ lines
  std::string* last = nullptr;
  while (i < d.size()) {
    unsigned a = 0, b = 0, c = 0, e = 0;
    const std::string& h = d[i];
    if (std::sscanf(h.c_str(), "@@ -%u,%u +%u,%u @@", &a, &b, &c, &e) == 4) {
    } else if (std::sscanf(h.c_str(), "@@ -%u +%u,%u @@", &a, &c, &e) == 3) {
      b = 1;
    } else if (std::sscanf(h.c_str(), "@@ -%u,%u +%u @@", &a, &b, &c) == 3) {
      e = 1;
    } else if (std::sscanf(h.c_str(), "@@ -%u +%u @@", &a, &c) == 2) {
      b = e = 1;
    } else {
      ADD_FAILURE() << "not a hunk header: " << h;
      return {};
    }
    size_t start = b == 0 ? a : a - 1;
    while (at < start) out += old_lines[at++];
    ++i;
    size_t seen_old = 0, seen_new = 0;
    while (i < d.size() && d[i].rfind("@@", 0) != 0) {
      const std::string& l = d[i++];
      if (l.rfind("\\ No newline", 0) == 0) {
        if (last == &out) out.pop_back();
        continue;
      }
      std::string body = l.substr(1);
      if (l[0] == ' ' || l[0] == '-') {
        EXPECT_LT(at, old_lines.size());
        std::string want = old_lines[at];
        bool want_nl = !want.empty() && want.back() == '\n';
        std::string got = body;
        if (!want_nl && i < d.size() && d[i].rfind("\\ No newline", 0) == 0) got.pop_back();
        EXPECT_EQ(got, want) << "context or removed line does not match at old line " << at + 1;
        ++at;
        ++seen_old;
      }
      if (l[0] == ' ' || l[0] == '+') {
        out += body;
        last = &out;
        ++seen_new;
      } else {
        last = nullptr;
      }
    }
    EXPECT_EQ(seen_old, b) << h;
    EXPECT_EQ(seen_new, e) << h;
  }
  while (at < old_lines.size()) out += old_lines[at++];
  return out;
}

TEST(AuditDiff, CountsTheChangedLines) {
  auto c = count_line_changes("a\nb\nc\n", "a\nB\nc\n");
  EXPECT_EQ(c.added, 1u);
  EXPECT_EQ(c.removed, 1u);
  EXPECT_FALSE(c.approximate);
  c = count_line_changes("a\nb\n", "a\nb\n");
  EXPECT_EQ(c.added + c.removed, 0u);
  c = count_line_changes("", "x\ny\n");
  EXPECT_EQ(c.added, 2u);
  EXPECT_EQ(c.removed, 0u);
  c = count_line_changes("a\nb\nc\nd\n", "b\nc\nd\ne\n");
  EXPECT_EQ(c.added, 1u);
  EXPECT_EQ(c.removed, 1u);
  // The last line without its newline is another line.
  c = count_line_changes("a\nb\n", "a\nb");
  EXPECT_EQ(c.added, 1u);
  EXPECT_EQ(c.removed, 1u);
}

TEST(AuditDiff, UnifiedOutputHasDiffUsForm) {
  EXPECT_EQ(unified_diff("a\nb\nc\n", "a\nB\nc\n", "old", "new"),
            "--- old\n+++ new\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
  EXPECT_EQ(unified_diff("same\n", "same\n", "old", "new"), "");
  EXPECT_EQ(unified_diff("a\n", "a", "o", "n"), "--- o\n+++ n\n@@ -1 +1 @@\n-a\n+a\n\\ No newline at end of file\n");
  EXPECT_EQ(unified_diff("", "x\n", "o", "n"), "--- o\n+++ n\n@@ -0,0 +1 @@\n+x\n");
  // Changes further apart than twice the context are separate hunks.
  std::string a, b;
  for (int i = 1; i <= 20; ++i) {
    a += std::to_string(i) + "\n";
    b += (i == 2 || i == 18 ? "x" : std::to_string(i)) + "\n";
  }
  std::string d = unified_diff(a, b, "o", "n");
  EXPECT_NE(d.find("@@ -1,5 +1,5 @@\n 1\n-2\n+x\n 3\n"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -15,6 +15,6 @@\n"), std::string::npos) << d;
}

TEST(AuditDiff, RandomPairsGiveMinimalCountsAndPatchesThatApply) {
  std::mt19937 rng(20261124);
  const char* pool[] = {"a\n", "b\n", "c\n", "import os\n", "print(x)\n", "\n"};
  for (int round = 0; round < 400; ++round) {
    auto make = [&] {
      std::string t;
      int n = static_cast<int>(rng() % 14);
      for (int i = 0; i < n; ++i) {
        std::string l = pool[rng() % 6];
        t += l;
      }
      if (rng() % 4 == 0) t += "tail";  // no newline at the end
      return t;
    };
    std::string a = make(), b = make();
    auto c = count_line_changes(a, b);
    auto la = lines_of(a), lb = lines_of(b);
    size_t common = lcs(la, lb);
    ASSERT_FALSE(c.approximate);
    EXPECT_EQ(c.removed, la.size() - common) << a << "|" << b;
    EXPECT_EQ(c.added, lb.size() - common) << a << "|" << b;
    std::string d = unified_diff(a, b, "o", "n");
    if (a == b) {
      EXPECT_EQ(d, "");
      continue;
    }
    EXPECT_EQ(patch(a, d), b) << "old:\n" << a << "\nnew:\n" << b << "\ndiff:\n" << d;
  }
}

TEST(AuditDiff, FilesThatDifferEverywhereAreCountedWithinTheBound) {
  std::string a = "head\n", b = "head\n";
  for (int i = 0; i < 100000; ++i) {
    a += "old " + std::to_string(i) + "\n";
    b += "new " + std::to_string(i) + "\n";
  }
  a += "foot\n";
  b += "foot\n";
  auto t0 = std::chrono::steady_clock::now();
  auto c = count_line_changes(a, b);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(c.approximate);
  EXPECT_EQ(c.added, 100000u);
  EXPECT_EQ(c.removed, 100000u);
  EXPECT_LT(took, std::chrono::seconds(5));
  // The same bound for the printed diff: still a diff that applies.
  std::string d = unified_diff(a, b, "o", "n");
  EXPECT_EQ(patch(a, d), b);
}

}  // namespace
