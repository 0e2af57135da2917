// Semgrep bridge, tested with a stand-in script that prints Semgrep's documented JSON output
// ({"results": [{check_id, path, start: {line}, extra: {message, severity}}], "errors": []}).
#include <gtest/gtest.h>

#include "sandboxrun/assess.hpp"
#include "sandboxrun/assess_bandit.hpp"
#include "sandboxrun/error.hpp"
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

SecurityConfig project_config() {
  const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
  return load_security_config(root / "config/security.yaml", root);
}

}  // namespace

TEST(AssessSemgrep, ParsesReport) {
  SemgrepSettings s;
  BanditResult r = parse_semgrep_report(
      R"({"results": [{"check_id": "python.lang.security.audit.eval", "path": "x.py", "start": {"line": 3},
                        "extra": {"message": "eval of data", "severity": "ERROR"}},
                       {"check_id": "python.lang.security.audit.eval", "path": "x.py", "start": {"line": 5},
                        "extra": {"message": "eval again", "severity": "WARNING"}},
                       {"check_id": "python.style", "path": "x.py", "start": {"line": 1},
                        "extra": {"message": "style", "severity": "INFO"}}],
          "errors": [{"message": "partial parse"}]})",
      s);
  ASSERT_EQ(r.findings.size(), 3u);
  EXPECT_EQ(r.findings[0].rule, "semgrep:python.lang.security.audit.eval");
  EXPECT_EQ(r.findings[0].severity, "high");
  EXPECT_EQ(r.findings[0].line, 3);
  EXPECT_EQ(r.score, s.score_error + s.score_info);  // once per check id, by its worst severity
  EXPECT_TRUE(any_note(r.notes, "partial parse"));
  EXPECT_TRUE(any_note(parse_semgrep_report("not json", s).notes, "not a JSON report"));
}

TEST(AssessSemgrep, StandInMergesIntoAssessFileWithPacksAndNoShell) {
  TempDir d;
  SecurityConfig cfg = project_config();
  cfg.semgrep.enabled = true;
  cfg.semgrep.configs = {"p/python", "my rules.yml"};
  // The stand-in echoes its arguments in the message, so the test sees what reached it.
  cfg.semgrep.command =
      d.write("semgrep",
              "#!/bin/sh\nprintf '{\"results\": [{\"check_id\": \"stand.in\", \"path\": \"x\", \"start\": {\"line\": 1}, "
              "\"extra\": {\"message\": \"%s\", \"severity\": \"ERROR\"}}], \"errors\": []}' \"$*\"\n",
              0755)
          .string();
  auto py = d.write("x.py", "x = 1\n");
  Assessment a = assess_file(py, cfg);
  ASSERT_EQ(a.findings.size(), 1u) << a.to_json().dump();
  EXPECT_EQ(a.findings[0].rule, "semgrep:stand.in");
  EXPECT_NE(a.findings[0].message.find("scan --json --quiet --metrics=off --config p/python --config my rules.yml " +
                                       py.string()),
            std::string::npos)
      << a.findings[0].message;
  EXPECT_EQ(a.score, cfg.semgrep.score_error);
  EXPECT_EQ(a.level, RiskLevel::medium);  // by score only: a second opinion never sets a floor
}

TEST(AssessSemgrep, MissingFailingAndHangingSemgrepAreNotes) {
  TempDir d;
  SemgrepSettings s;
  auto py = d.write("x.py", "x = 1\n");
  s.command = "/nonexistent/semgrep";
  EXPECT_TRUE(any_note(run_semgrep(py, s).notes, "semgrep not found"));
  s.command = d.write("failing", "#!/bin/sh\necho 'bad config' >&2\nexit 7\n", 0755).string();
  BanditResult r = run_semgrep(py, s);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(any_note(r.notes, "exit 7: bad config")) << (r.notes.empty() ? "" : r.notes[0]);
  s.command = d.write("hanging", "#!/bin/sh\nsleep 60\n", 0755).string();
  s.timeout = std::chrono::milliseconds(200);
  EXPECT_TRUE(any_note(run_semgrep(py, s).notes, "timed out"));
}

TEST(AssessSemgrep, ConfigKeysAreChecked) {
  TempDir d;
  const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
  auto yaml = d.write("security.yaml", "rules: " + (root / "policies/assess-rules.yaml").string() +
                                           "\nsemgrep: {enabled: true, configs: [p/ci], timeout: 5, scores: {error: 30}}\n");
  SecurityConfig cfg = load_security_config(yaml, root);
  EXPECT_TRUE(cfg.semgrep.enabled);
  EXPECT_EQ(cfg.semgrep.configs, std::vector<std::string>{"p/ci"});
  EXPECT_EQ(cfg.semgrep.score_error, 30);
  auto bad = d.write("bad.yaml", "rules: " + (root / "policies/assess-rules.yaml").string() + "\nsemgrep: {configs: []}\n");
  EXPECT_THROW(load_security_config(bad, root), Error);
}
