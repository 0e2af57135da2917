// The assessor's verdict steers the run: levels cap the trust, BLOCKED is refused (126) unless
// overridden, and all of it lands in the result and the audit log.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.hpp"

using sandboxrun::testing::run_binary;
using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace {

const char* kForkBomb = "import os\nwhile True:\n    os.fork()\n";

}  // namespace

TEST(Verdict, BlockedIsRefusedWith126AndAudited) {
  TempDir d;
  auto log = d.path() + "/audit.log";
  auto r = run_python(kForkBomb, {"--audit-log", log});
  EXPECT_EQ(r.exec.exit_code, 126) << r.exec.err;
  EXPECT_EQ(r.result["status"], "blocked");
  EXPECT_EQ(r.result["assessment"]["level"], "BLOCKED");
  EXPECT_FALSE(r.result["assessment"]["findings"].empty());
  std::string audit = sandboxrun::testing::read_text(log);
  EXPECT_NE(audit.find("\"event\":\"blocked\""), std::string::npos);
  EXPECT_EQ(audit.find("\"event\":\"run_start\""), std::string::npos) << "a blocked file must never start";
  auto plain = run_binary({"--audit-log", log, d.write("bomb.py", kForkBomb)});
  EXPECT_EQ(plain.exit_code, 126);
  EXPECT_NE(plain.err.find("--override"), std::string::npos) << "the message must say how to proceed: " << plain.err;
}

TEST(Verdict, OverrideRunsAsUntrustedAndRecordsTheReason) {
  TempDir d;
  auto log = d.path() + "/audit.log";
  auto r = run_python("import os\nif False:\n    while True:\n        os.fork()\nprint('overridden')\n",
                      {"--audit-log", log, "--trust", "trusted", "--override", "ticket 42: reviewed by hand"});
  if (r.result["assessment"]["level"] != "BLOCKED") GTEST_FAIL() << "fixture must be BLOCKED: " << r.result.dump();
  EXPECT_EQ(r.exec.exit_code, 0) << r.exec.err;
  EXPECT_EQ(r.result["trust"], "untrusted");
  EXPECT_EQ(r.result["trust_requested"], "trusted");
  std::string audit = sandboxrun::testing::read_text(log);
  EXPECT_NE(audit.find("\"event\":\"override\""), std::string::npos);
  EXPECT_NE(audit.find("ticket 42: reviewed by hand"), std::string::npos);
  auto verify = run_binary({"audit", "verify", "--log", log});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST(Verdict, RiskyCodeCannotKeepAHighTrustLevel) {
  auto r = run_python("import subprocess\nsubprocess.call('true', shell=True)\neval(input() if False else '1')\n",
                      {"--trust", "trusted"});
  ASSERT_EQ(r.result["status"], "exited") << r.exec.err;
  std::string level = r.result["assessment"]["level"];
  ASSERT_TRUE(level == "MEDIUM" || level == "HIGH") << level;
  EXPECT_EQ(r.result["trust"], level == "MEDIUM" ? "unknown" : "untrusted");
  EXPECT_EQ(r.result["trust_requested"], "trusted");
}

TEST(Verdict, LowRiskKeepsTheRequestedLevel) {
  auto r = run_python("print(sum(range(10)))\n", {"--trust", "trusted"});
  EXPECT_EQ(r.result["assessment"]["level"], "LOW");
  EXPECT_EQ(r.result["trust"], "trusted");
}

TEST(Verdict, BanditFindingsMergeWhenEnabled) {
  TempDir d;
  auto config = write_config(d, "", "bandit:\n  enabled: true\n  command: bandit\n  timeout: 60\n");
  // A private TMPDIR: the launcher puts Bandit's copy there, and no other test writes to it.
  std::string tmp = d.path() + "/tmp";
  std::filesystem::create_directory(tmp);
  auto r = run_python("import subprocess\nsubprocess.call('ls', shell=True)\n",
                      {"--config", config, "--audit-log", d.path() + "/audit.log"}, {"TMPDIR=" + tmp});
  ASSERT_EQ(r.result["status"], "exited") << r.exec.err;
  bool bandit = false;
  for (const auto& f : r.result["assessment"]["findings"]) bandit |= f["rule"].get<std::string>().rfind("bandit:", 0) == 0;
  EXPECT_TRUE(bandit) << "bandit is installed by scripts/setup.sh; its findings must merge: " << r.result["assessment"];
  for (const auto& e : std::filesystem::directory_iterator(tmp))
    EXPECT_EQ(e.path().filename().string().rfind("sandboxrun-assess-", 0), std::string::npos)
        << "the private copy given to bandit must be removed: " << e.path();
}

// The launcher compiles the requested level's seccomp profile while the assessment is still
// being prepared; the profile in force must still be the one of the level actually used.
TEST(Verdict, TheSeccompProfileIsTheOneOfTheLevelUsed) {
  TempDir d;
  d.write("broken.json", "{\"defaultAction\": \"SCMP_ACT_BOGUS\"}\n");
  const std::string policies = sandboxrun::testing::source_dir() + "/policies/";
  auto config = write_config(d, "trust_levels:\n"
                                "  untrusted:\n    security_opt: [no-new-privileges, seccomp=" + policies + "untrusted.json]\n"
                                "  unknown:\n    security_opt: [no-new-privileges, seccomp=" + policies + "untrusted.json]\n"
                                "  trusted:\n    security_opt: [no-new-privileges, seccomp=" + d.path() + "/broken.json]\n");
  const std::vector<std::string> base{"--config", config, "--audit-log", d.path() + "/audit.log", "--trust", "trusted"};

  // LOW keeps "trusted": its (broken) profile is the one used, so the run fails, naming it.
  auto low = run_python("print('low')\n", base);
  EXPECT_EQ(low.exec.exit_code, 125) << low.exec.out;
  EXPECT_NE(low.exec.err.find("broken.json"), std::string::npos) << low.exec.err;

  // HIGH is forced to "untrusted": the requested level's broken profile must not matter.
  auto high = run_python("import pickle, subprocess\nsubprocess.call('true', shell=True)\n"
                         "pickle.loads(pickle.dumps(1))\neval('1')\nprint('ran')\n", base);
  EXPECT_EQ(high.result["status"], "exited") << high.exec.err;
  EXPECT_EQ(high.result["trust"], "untrusted");
  EXPECT_EQ(high.stdout_text(), "ran\n");
}
