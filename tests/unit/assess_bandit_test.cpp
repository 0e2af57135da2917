// Bandit bridge: report parsing, missing/failing/hanging Bandit as notes, and (when the
// Debian package is installed) a real run merged into assess_file.
#include <gtest/gtest.h>

#include <chrono>

#include "sandboxrun/assess.hpp"
#include "assess/assess_bandit.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using namespace sandboxrun::assess;
using test_util::TempDir;

namespace {

bool any_note(const std::vector<std::string>& notes, std::string_view needle) {
  for (const auto& n : notes)
    if (n.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(AssessBandit, ParsesReport) {
  BanditSettings s;
  const char* report = R"({"errors": [], "results": [
    {"test_id": "B602", "test_name": "subprocess_popen_with_shell_equals_true", "issue_severity": "HIGH",
     "issue_confidence": "HIGH", "line_number": 3, "issue_text": "subprocess call with shell=True"},
    {"test_id": "B602", "test_name": "subprocess_popen_with_shell_equals_true", "issue_severity": "LOW",
     "issue_confidence": "HIGH", "line_number": 9, "issue_text": "again"},
    {"test_id": "B404", "test_name": "blacklist", "issue_severity": "LOW",
     "issue_confidence": "HIGH", "line_number": 1, "issue_text": "import subprocess"}]})";
  BanditResult r = parse_bandit_report(report, s);
  ASSERT_EQ(r.findings.size(), 3u);
  EXPECT_EQ(r.findings[0].rule, "bandit:B602");
  EXPECT_EQ(r.findings[0].severity, "high");
  EXPECT_EQ(r.findings[0].line, 3);
  EXPECT_NE(r.findings[0].message.find("shell=True"), std::string::npos);
  EXPECT_EQ(r.score, s.score_high + s.score_low);  // once per test id, by its worst severity
  EXPECT_TRUE(r.notes.empty());
}

TEST(AssessBandit, BadReportIsANote) {
  BanditResult r = parse_bandit_report("Traceback (most recent call last):", BanditSettings{});
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(any_note(r.notes, "not a JSON report"));
}

TEST(AssessBandit, MissingBanditIsANote) {
  TempDir d;
  auto py = d.write("x.py", "import pickle\npickle.loads(b)\n");
  BanditSettings s;
  s.command = "bandit-that-does-not-exist-" + std::to_string(::getpid());
  BanditResult r = run_bandit(py, s);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(any_note(r.notes, "not found"));
}

TEST(AssessBandit, FailingBanditIsANote) {
  TempDir d;
  auto py = d.write("x.py", "x = 1\n");
  BanditSettings s;
  s.command = d.write("fake-bandit", "#!/bin/sh\necho 'boom: bad option' >&2\nexit 2\n", 0755).string();
  BanditResult r = run_bandit(py, s);
  EXPECT_TRUE(any_note(r.notes, "exit 2: boom: bad option")) << (r.notes.empty() ? "" : r.notes[0]);
}

TEST(AssessBandit, HangingBanditIsKilledAtTheTimeout) {
  TempDir d;
  auto py = d.write("x.py", "x = 1\n");
  BanditSettings s;
  // Keeps its stdout open and never exits; so does the child it leaves behind.
  s.command = d.write("slow-bandit", "#!/bin/sh\nsleep 60 &\nsleep 60\n", 0755).string();
  s.timeout = std::chrono::milliseconds(300);
  auto t0 = std::chrono::steady_clock::now();
  BanditResult r = run_bandit(py, s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(any_note(r.notes, "timed out"));
}

TEST(AssessBandit, ArgumentsReachBanditWithoutAShell) {
  TempDir d;
  // A file name a shell would expand or split.
  auto py = d.write("a b;$(touch pwned).py", "x = 1\n");
  BanditSettings s;
  s.command = d.write("echo-bandit",
                      "#!/bin/sh\nprintf '{\"results\": [{\"test_id\": \"B000\", \"issue_severity\": \"LOW\", "
                      "\"line_number\": 1, \"issue_text\": \"%s|%s|%s|%s|%s\"}]}' \"$1\" \"$2\" \"$3\" \"$4\" \"$5\"\n",
                      0755)
                  .string();
  BanditResult r = run_bandit(py, s);
  ASSERT_EQ(r.findings.size(), 1u) << (r.notes.empty() ? "" : r.notes[0]);
  EXPECT_NE(r.findings[0].message.find("-f|json|-q|" + py.string() + "|"), std::string::npos) << r.findings[0].message;
  EXPECT_FALSE(std::filesystem::exists("pwned"));
}

TEST(AssessBandit, RealBanditMergesIntoAssessFile) {
  if (!find_executable("bandit")) GTEST_SKIP() << "bandit is not installed (apt-get install bandit)";
  const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
  SecurityConfig cfg = load_security_config(root / "config/security.yaml", root);
  cfg.bandit.enabled = true;
  TempDir d;
  auto py = d.write("x.py", "import subprocess\nsubprocess.call(cmd, shell=True)\n");
  Assessment a = assess_file(py, cfg);
  bool bandit = false, builtin = false;
  for (const auto& f : a.findings) {
    bandit |= f.rule == "bandit:B602";
    builtin |= f.rule == "SR-PROC-003";
  }
  EXPECT_TRUE(bandit) << a.to_json().dump(1);
  EXPECT_TRUE(builtin);
}

TEST(AssessBandit, DisabledBanditIsNotRun) {
  const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
  SecurityConfig cfg = load_security_config(root / "config/security.yaml", root);
  cfg.bandit.enabled = false;
  cfg.bandit.command = "/nonexistent/bandit";
  TempDir d;
  Assessment a = assess_file(d.write("x.py", "x = 1\n"), cfg);
  EXPECT_TRUE(a.notes.empty());
}
