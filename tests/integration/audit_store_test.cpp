// The audit log's object store through the real binary: a run's collected outputs are stored
// and `audit verify` names one that was altered or deleted; a second run of the same script
// name for the same caller records diff_from, and `audit show --diff` prints the change; the
// checkpoints a log pipeline keeps (checkpoint.stream) catch a log rolled back on its volume.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.hpp"
#include "harness.hpp"

using sandboxrun::testing::Exec;
using sandboxrun::testing::read_text;
using sandboxrun::testing::run_binary;
using sandboxrun::testing::TempDir;
namespace fs = std::filesystem;

namespace {

Exec run_script(const TempDir& d, const std::string& code, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--json", "--audit-log", d.path() + "/log/audit.log"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(d.write("job.py", code));
  return run_binary(args);
}

std::string run_id_of(const Exec& e) {
  auto j = nlohmann::json::parse(e.out, nullptr, false);
  return j.is_object() ? j.value("run_id", "") : "";
}

// The run_start record of a run.
nlohmann::json run_start(const TempDir& d, const std::string& run_id) {
  for (auto& j : sandboxrun::testing::audit_records(d.path() + "/log/audit.log"))
    if (j["event"] == "run_start" && j["run_id"] == run_id) return j;
  return {};
}

TEST(AuditStore, SecondVersionOfAScriptRecordsItsDiffAndShowDiffPrintsIt) {
  TempDir d;
  auto first = run_script(d, "x = 1\nprint('hello')\nprint(x)\n");
  ASSERT_EQ(first.exit_code, 0) << first.err << first.out;
  auto second = run_script(d, "x = 1\nprint('changed')\nprint(x)\n");
  ASSERT_EQ(second.exit_code, 0) << second.err << second.out;
  const std::string id1 = run_id_of(first), id2 = run_id_of(second);

  EXPECT_FALSE(run_start(d, id1).contains("diff_from")) << run_start(d, id1);
  auto start = run_start(d, id2);
  ASSERT_TRUE(start.contains("diff_from")) << start;
  const auto& from = start["diff_from"];
  EXPECT_EQ(from["run_id"], id1);
  EXPECT_EQ(from["sha256"], run_start(d, id1)["code"]["sha256"]);
  EXPECT_EQ(from["added"], 1);
  EXPECT_EQ(from["removed"], 1);

  auto shown = run_binary({"audit", "show", "--log", d.path() + "/log/audit.log", "--diff", id2});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find(" x = 1\n-print('hello')\n+print('changed')\n print(x)\n"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("--- job.py\trun " + id1), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("+++ job.py\trun " + id2), std::string::npos) << shown.out;
  auto none = run_binary({"audit", "show", "--audit-log", d.path() + "/log/audit.log", "--diff", id1});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no diff_from"), std::string::npos) << none.err;

  // Another caller's first run of job.py has nothing to diff against; its second has.
  auto other = run_script(d, "x = 1\nprint('changed')\nprint(x)\n", {"--caller", "svc-b"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_FALSE(run_start(d, run_id_of(other)).contains("diff_from"));
  auto again = run_script(d, "x = 1\nprint('changed')\nprint(x)\n", {"--caller", "svc-b"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto same = run_start(d, run_id_of(again))["diff_from"];
  EXPECT_EQ(same["run_id"], run_id_of(other));
  EXPECT_EQ(same["added"], 0);
  EXPECT_EQ(same["removed"], 0);
}

TEST(AuditStore, VerifyNamesAStoredOutputThatWasAlteredOrDeleted) {
  TempDir d;
  const std::string input = d.write("data.csv", "a,b\n1,2\n");
  auto r = run_script(d, "open('report.txt', 'w').write('the report\\n')\nopen('other.txt', 'w').write('more\\n')\n",
                      {"--input", input, "--output", d.path() + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string log = d.path() + "/log/audit.log", objects = d.path() + "/log/objects/";
  const std::string report = sandboxrun::sha256_hex("the report\n"), other = sandboxrun::sha256_hex("more\n");
  // Inputs and outputs are in the store, and their manifest entries say so.
  EXPECT_EQ(read_text(objects + report), "the report\n");
  EXPECT_EQ(read_text(objects + sandboxrun::sha256_hex("a,b\n1,2\n")), "a,b\n1,2\n");
  EXPECT_EQ(run_start(d, run_id_of(r))["inputs"][0]["stored"], true);
  auto ok = run_binary({"audit", "verify", "--log", log});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;

  {
    std::fstream f(objects + report, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4);
    f.put('R');
  }
  fs::remove(objects + other);
  auto bad = run_binary({"audit", "verify", "--log", log});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("object ALTERED: seq "), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(run_id_of(r) + " output report.txt sha256 " + report), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(run_id_of(r) + " output other.txt sha256 " + other), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("object MISSING"), std::string::npos) << bad.out;
}

// An audit.yaml beside `cfg` (write_config's copy) with checkpoints after every record, sent to
// `stream` as well.
void stream_checkpoints(const std::string& cfg, const std::string& stream) {
  const std::string file = (fs::path(cfg).parent_path() / "audit.yaml").string();
  std::string y = read_text(file);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"  every: 64", "  every: 1"},
                                 {"  stream: none", "  stream: " + stream}}) {
    ASSERT_NE(y.find(from), std::string::npos) << y;
    y.replace(y.find(from), from.size(), to);
  }
  std::ofstream(file) << y;
}

TEST(AuditStore, CheckpointsSentToALogPipelineCatchALogRolledBackWithItsAnchor) {
  TempDir d;
  const std::string cfg = sandboxrun::testing::write_config(d);
  stream_checkpoints(cfg, "stderr");
  const std::string log = d.path() + "/log/audit.log";
  auto run = [&](const std::string& name) {
    return run_binary({"--json", "--config", cfg, "--audit-log", log, d.write(name, "print('hi')\n")});
  };
  const Exec first = run("first.py");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto kept = fs::file_size(log);
  const Exec second = run("second.py");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_TRUE(nlohmann::json::parse(second.out, nullptr, false).is_object()) << "stdout stays the result's: " << second.out;

  // The cluster's log pipeline keeps the marked lines of the container's output.
  std::string heads;
  size_t n = 0;
  std::istringstream said(first.err + second.err);
  for (std::string line; std::getline(said, line);)
    if (line.find("\"sandboxrun\":\"audit checkpoint\"") != std::string::npos) {
      heads += line + "\n";
      ++n;
      EXPECT_NE(line.find("\"log\":\"" + log + "\""), std::string::npos) << line;
    }
  EXPECT_GE(n, 4u) << "a checkpoint for every record of two runs:\n" << first.err << second.err;
  const std::string pipeline = d.write("pipeline-heads", heads);
  auto ok = run_binary({"audit", "verify", "--json", "--log", log, "--anchor", pipeline});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out, nullptr, false).value("checkpoints_matched", 0u), n) << ok.out;

  // Whoever can write the volume hides the second run: its records and its anchor lines go.
  fs::resize_file(log, kept);
  fs::remove(log + ".anchor");
  auto local = run_binary({"audit", "verify", "--log", log});
  EXPECT_EQ(local.exit_code, 0) << "the volume alone cannot tell: " << local.out << local.err;
  auto held = run_binary({"audit", "verify", "--log", log, "--anchor", pipeline});
  EXPECT_EQ(held.exit_code, 1) << held.out << held.err;
  EXPECT_NE((held.out + held.err).find("the anchor holds a checkpoint for seq"), std::string::npos) << held.out << held.err;
}

TEST(AuditStore, McpOverStdioRefusesCheckpointsOnItsProtocolsStdout) {
  TempDir d;
  const std::string cfg = sandboxrun::testing::write_config(d);
  stream_checkpoints(cfg, "stdout");
  const Exec r = run_binary({"mcp", "--config", cfg, "--audit-log", d.path() + "/audit.log"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "") << "nothing but the protocol on stdout";
  EXPECT_NE(r.err.find("checkpoint.stream: stdout would write into the protocol"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("checkpoint.stream: stderr"), std::string::npos) << r.err;
}

}  // namespace
