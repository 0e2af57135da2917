// `sandboxrun assess`: output formats and exit statuses.
#include <gtest/gtest.h>

#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"

using namespace sandboxrun;
using testing::internal::CaptureStderr;
using testing::internal::CaptureStdout;
using testing::internal::GetCapturedStderr;
using testing::internal::GetCapturedStdout;

namespace {

const std::string kConfigDir = std::string(SANDBOXRUN_SOURCE_DIR) + "/config";
const std::string kFixtures = std::string(SANDBOXRUN_SOURCE_DIR) + "/tests/fixtures/assess/";

struct Out {
  int rc;
  std::string out, err;
};

Out cmd(std::vector<std::string> args) {
  CaptureStdout();
  CaptureStderr();
  int rc = cli::assess_command(args);
  return {rc, GetCapturedStdout(), GetCapturedStderr()};
}

}  // namespace

TEST(AssessCommand, JsonObject) {
  Out o = cmd({"--json", "--config-dir", kConfigDir, kFixtures + "malicious/fork_bomb.py"});
  ASSERT_EQ(o.rc, 0) << o.err;
  auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["level"], "BLOCKED");
  EXPECT_GE(j["score"].get<int>(), 100);
  ASSERT_FALSE(j["findings"].empty());
  for (const auto& f : j["findings"]) {
    EXPECT_TRUE(f["rule"].is_string());
    EXPECT_TRUE(f["severity"].is_string());
    EXPECT_TRUE(f["line"].is_number_integer());
    EXPECT_TRUE(f["message"].is_string());
  }
}

TEST(AssessCommand, HumanReadable) {
  Out o = cmd({"--config-dir=" + kConfigDir, kFixtures + "risky/pickle_load.py"});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("MEDIUM"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("pickle_load.py:5: [medium] SR-DESER-001"), std::string::npos) << o.out;
  Out low = cmd({"--config-dir", kConfigDir, kFixtures + "benign/fstrings.py"});
  EXPECT_EQ(low.rc, 0);
  EXPECT_NE(low.out.find("LOW (score 0, 0 findings)"), std::string::npos) << low.out;
}

TEST(AssessCommand, ExitStatuses) {
  EXPECT_EQ(cmd({"--config-dir", kConfigDir, "/nonexistent/job.py"}).rc, 127);
  EXPECT_EQ(cmd({"--config-dir", kConfigDir, "/"}).rc, 127);
  EXPECT_EQ(cmd({"--config-dir", kConfigDir, "/dev/zero"}).rc, 127);
  const std::string fifo = "/tmp/assess-cmd-fifo-" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(cmd({"--config-dir", kConfigDir, fifo}).rc, 127);  // refused, not waited on
  ::unlink(fifo.c_str());
  EXPECT_EQ(cmd({}).rc, 2);
  EXPECT_EQ(cmd({"--bogus", "x.py"}).rc, 2);
  EXPECT_EQ(cmd({"--config-dir"}).rc, 2);
  Out bad = cmd({"--config-dir", "/nonexistent-config", kFixtures + "benign/fstrings.py"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("/nonexistent-config/security.yaml"), std::string::npos) << bad.err;
  Out help = cmd({"--help"});
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("usage: sandboxrun assess"), std::string::npos);
}

TEST(AssessCommand, FileNamedLikeAnOptionAfterDoubleDash) {
  Out o = cmd({"--config-dir", kConfigDir, "--", "--json"});
  EXPECT_EQ(o.rc, 127) << o.err;  // "--json" is the file name here, and it does not exist
}

TEST(AssessCommand, ManyFilesOneJsonLineEach) {
  const std::string low = kFixtures + "benign/fstrings.py", blocked = kFixtures + "malicious/fork_bomb.py";
  Out o = cmd({"--json", "--config-dir", kConfigDir, low, "/nonexistent/job.py", blocked});
  EXPECT_EQ(o.rc, 127);  // one file could not be read; the others were still assessed
  std::istringstream lines(o.out);
  std::string l1, l2, extra;
  ASSERT_TRUE(std::getline(lines, l1) && std::getline(lines, l2)) << o.out;
  EXPECT_FALSE(std::getline(lines, extra));
  auto j1 = nlohmann::json::parse(l1), j2 = nlohmann::json::parse(l2);
  EXPECT_EQ(j1["file"], low);
  EXPECT_EQ(j1["level"], "LOW");
  EXPECT_EQ(j2["file"], blocked);
  EXPECT_EQ(j2["level"], "BLOCKED");
}
