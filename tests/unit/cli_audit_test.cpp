// `sandboxrun audit verify|show|tail|repair` on a log the Executor's records were written to:
// output, JSON and exit statuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "audit_test_util.hpp"
#include "cli/cli.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/audit_events.hpp"
#include "test_util.hpp"

namespace audit_test {
namespace {

using nlohmann::json;
using sandboxrun::AuditLog;
using test_util::TempDir;

class AuditCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path() / "audit.log";
    auto log = AuditLog::open(test_config(), path_);
    for (int i = 0; i < 2; ++i) {
      std::string id = "run-" + std::to_string(i);
      const std::string text = i == 0 ? "print(1)\nprint('same')\n" : "print(2)\nprint('same')\n";
      // The records the Executor writes, through the same types (sandboxrun/audit_events.hpp).
      namespace ev = sandboxrun::audit;
      const ev::RunContext ctx{.code = log.store_code(text, "job.py")};
      ev::append_event(log, id, ev::AssessmentEvent{.run = ctx, .level = "LOW", .score = 3});
      ev::RunStartEvent start{.run = ctx, .trust_used = "untrusted"};
      start.diff_from = log.track_version(std::nullopt, "job.py", text, id);
      ev::append_event(log, id, start, true);
      ev::append_event(log, id,
                       ev::RunEndEvent{.run = ctx, .status = "exited", .exit_code = i, .duration_ms = 120,
                                       .resources = sandboxrun::ResourcesRecord{.memory_peak_bytes = 10 << 20}});
    }
  }
  int run(std::vector<std::string> args, std::string* out = nullptr) {
    testing::internal::CaptureStdout();
    int rc = sandboxrun::cli::audit_command(args);
    std::string o = testing::internal::GetCapturedStdout();
    if (out) *out = o;
    return rc;
  }
  TempDir dir_;
  fs::path path_;
};

TEST_F(AuditCommand, VerifyExitStatusAndJson) {
  std::string out;
  EXPECT_EQ(run({"verify", "--log", path_.string()}, &out), 0);
  EXPECT_NE(out.find("intact"), std::string::npos);
  auto lines = read_lines(path_);
  std::swap(lines[1], lines[2]);
  write_lines(path_, lines);
  EXPECT_EQ(run({"verify", "--log", path_.string(), "--json"}, &out), 1);
  json j = json::parse(out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["damage"]["kind"], "reordered");
  EXPECT_EQ(j["damage"]["line"], 2);
  EXPECT_EQ(j["damage"]["seq"], 3);
}

TEST_F(AuditCommand, UsageErrorsExitTwo) {
  EXPECT_EQ(run({}), 2);
  EXPECT_EQ(run({"frobnicate"}), 2);
  EXPECT_EQ(run({"verify", "--bogus"}), 2);
  EXPECT_EQ(run({"tail", "-n", "zero"}), 2);
  EXPECT_EQ(run({"show", "--diff", "--log", path_.string()}), 2);
  EXPECT_EQ(run({"verify", "--help"}), 0);
}

TEST_F(AuditCommand, ShowTableRunAndDiff) {
  std::string out;
  EXPECT_EQ(run({"show", "--log", path_.string()}, &out), 0);
  EXPECT_NE(out.find("run-0"), std::string::npos);
  EXPECT_NE(out.find("exited"), std::string::npos);
  EXPECT_NE(out.find("10MiB"), std::string::npos);
  EXPECT_EQ(run({"show", "--log", path_.string(), "--json"}, &out), 0);
  json s = json::parse(out.substr(0, out.find('\n')));
  EXPECT_EQ(s["run_id"], "run-0");
  EXPECT_EQ(s["level"], "LOW");
  EXPECT_EQ(s["trust"], "untrusted");
  EXPECT_EQ(s["file"], "job.py");
  EXPECT_EQ(s["duration_ms"], 120);
  EXPECT_EQ(s["memory_peak_bytes"], 10 << 20);  // run_end's resources, as the Executor writes them
  EXPECT_EQ(run({"show", "--log", path_.string(), "--run", "run-1", "--json"}, &out), 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);
  EXPECT_EQ(run({"show", "--log", path_.string(), "--diff", "run-1"}, &out), 0);
  EXPECT_NE(out.find("\n-print(1)\n+print(2)\n print('same')\n"), std::string::npos) << out;
  EXPECT_NE(out.find("--- job.py\trun run-0 sha256:"), std::string::npos) << out;
  EXPECT_NE(out.find("+++ job.py\trun run-1 sha256:"), std::string::npos) << out;
  EXPECT_NE(out.find("@@ -1,2 +1,2 @@"), std::string::npos) << out;
  // The first version has nothing to diff against.
  EXPECT_EQ(run({"show", "--log", path_.string(), "--diff", "run-0"}, &out), 1);
  EXPECT_EQ(run({"show", "--log", path_.string(), "--run", "nope"}), 1);
}

TEST_F(AuditCommand, RepairNeedsAnExistingLog) {
  fs::path none = dir_.path() / "none.log";
  EXPECT_EQ(run({"repair", "--log", none.string()}), 1);
  EXPECT_FALSE(fs::exists(none));
}

TEST_F(AuditCommand, TailPrintsTheLastRecords) {
  std::string out;
  EXPECT_EQ(run({"tail", "-n", "2", "--log", path_.string(), "--json"}, &out), 0);
  auto lines = read_lines(path_);
  EXPECT_EQ(out, lines[4] + "\n" + lines[5] + "\n");
  EXPECT_EQ(run({"tail", "--log", path_.string()}, &out), 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 6);
  EXPECT_NE(out.find("run_end"), std::string::npos);
}

}  // namespace
}  // namespace audit_test
