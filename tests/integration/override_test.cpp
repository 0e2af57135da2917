// security.yaml's override policy through the real binary: a token reason or a caller who may
// not override is refused with 126 before anything starts, and audited as override_refused;
// an allowed override runs and is audited as before.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"

using sandboxrun::testing::read_text;
using sandboxrun::testing::run_binary;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace {

constexpr int kNobody = 65534;
// BLOCKED (a fork bomb the assessor sees), harmless when run: the loop is dead code.
const char* kDormantBomb = "import os\nif False:\n    while True:\n        os.fork()\nprint('overridden')\n";

// The audit records of one event, parsed.
std::vector<nlohmann::json> records(const std::string& log, const std::string& event) {
  std::vector<nlohmann::json> out;
  for (auto& j : sandboxrun::testing::audit_records(log))
    if (j.value("event", "") == event) out.push_back(std::move(j));
  return out;
}

struct Override : ::testing::Test {
  TempDir d;
  std::string log, nobody_log, script;
  void SetUp() override {
    // Reachable by an unprivileged caller too, with an audit log of its own (root refuses a log
    // in a directory someone else owns).
    chmod(d.path().c_str(), 0755);
    log = d.path() + "/audit.log";
    const std::string audit_dir = d.path() + "/nobody";
    mkdir(audit_dir.c_str(), 0700);
    ASSERT_EQ(chown(audit_dir.c_str(), kNobody, kNobody), 0);
    nobody_log = audit_dir + "/audit.log";
    script = d.write("job.py", kDormantBomb);
    chmod(script.c_str(), 0644);
  }
  sandboxrun::testing::Exec run(const std::string& security_extra, const std::string& reason, bool json,
                                int as_uid = -1) {
    TempDir* cfg_dir = new TempDir;  // kept for the test's life: the config is read by the run
    configs.emplace_back(cfg_dir);
    // An unprivileged caller reads a config that points into the tree as it can reach it.
    const std::string src = as_uid >= 0 ? sandboxrun::testing::reachable_source_dir() : sandboxrun::testing::source_dir();
    std::vector<std::string> args{"--config", write_config(*cfg_dir, "", security_extra, src), "--audit-log",
                                  as_uid == kNobody ? nobody_log : log, "--override", reason};
    if (json) args.push_back("--json");
    args.push_back(script);
    return run_binary(args, {}, as_uid);
  }
  std::vector<std::unique_ptr<TempDir>> configs;
};

TEST_F(Override, ATokenReasonIsRefusedWith126AndAudited) {
  auto r = run("", "because", /*json=*/false);
  EXPECT_EQ(r.exit_code, 126) << r.out << r.err;
  EXPECT_EQ(r.out.find("overridden"), std::string::npos) << "nothing may run";
  EXPECT_NE(r.err.find("override refused"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at least 12 characters"), std::string::npos) << "must say what is required: " << r.err;
  EXPECT_NE(r.err.find("override.min_reason_length"), std::string::npos) << r.err;

  auto refused = records(log, "override_refused");
  ASSERT_EQ(refused.size(), 1u) << read_text(log);
  const auto& rec = refused[0];
  EXPECT_EQ(rec["reason"], "because");
  EXPECT_EQ(rec["uid"], 0);
  EXPECT_EQ(rec["level"], "BLOCKED");
  EXPECT_NE(rec["why"].get<std::string>().find("has 7 characters"), std::string::npos) << rec.dump();
  EXPECT_FALSE(rec.value("run_id", "").empty());
  EXPECT_TRUE(records(log, "run_start").empty()) << "a refused override must never start";
  EXPECT_TRUE(records(log, "override").empty());

  // --json: the same, said in the result.
  auto j = run("", "!!!!!!!!!!!!!!!!!!", /*json=*/true);
  EXPECT_EQ(j.exit_code, 126) << j.err;
  auto result = nlohmann::json::parse(j.out, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << j.out;
  EXPECT_EQ(result["status"], "blocked");
  EXPECT_NE(result.value("override_refused", "").find("distinct letters"), std::string::npos) << result.dump();
  EXPECT_EQ(result["overridden"], false);
  EXPECT_EQ(records(log, "override_refused").size(), 2u);
  auto verify = run_binary({"audit", "verify", "--log", log});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(Override, ACallerNotAllowedIsRefusedWhateverTheReason) {
  const std::string reason = "ticket 42: reviewed by hand";
  // An unprivileged caller when only root may override.
  auto r = run("override:\n  allowed_uids: [root]\n", reason, /*json=*/false, kNobody);
  EXPECT_EQ(r.exit_code, 126) << r.out << r.err;
  EXPECT_NE(r.err.find("uid 65534 (nobody) may not override"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("override.allowed_uids"), std::string::npos) << r.err;
  auto refused = records(nobody_log, "override_refused");
  ASSERT_EQ(refused.size(), 1u) << read_text(nobody_log);
  EXPECT_EQ(refused[0]["uid"], kNobody);
  EXPECT_EQ(refused[0]["reason"], reason);
  // Root itself, when only a group it is not in may override.
  r = run("override:\n  allowed_groups: [nogroup]\n", reason, /*json=*/false);
  EXPECT_EQ(r.exit_code, 126) << r.out << r.err;
  EXPECT_NE(r.err.find("uid 0 (root) may not override"), std::string::npos) << r.err;
  // Nobody at all.
  r = run("override: {allowed_uids: [], allowed_groups: []}\n", reason, /*json=*/false);
  EXPECT_EQ(r.exit_code, 126) << r.out << r.err;
  EXPECT_NE(r.err.find("nobody may override"), std::string::npos) << r.err;
  EXPECT_EQ(records(log, "override_refused").size(), 2u);
  EXPECT_TRUE(records(log, "run_start").empty());
  EXPECT_TRUE(records(nobody_log, "run_start").empty());
}

TEST_F(Override, AnAllowedOverrideRunsAndIsAuditedAsBefore) {
  auto r = run("override:\n  min_reason_length: 20\n  allowed_uids: [root]\n", "ticket 42: reviewed by hand",
               /*json=*/true);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto result = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << r.out;
  EXPECT_EQ(result["stdout"], "overridden\n");
  EXPECT_EQ(result["overridden"], true);
  EXPECT_EQ(result["trust"], "untrusted");
  EXPECT_FALSE(result.contains("override_refused"));
  auto ov = records(log, "override");
  ASSERT_EQ(ov.size(), 1u) << read_text(log);
  EXPECT_EQ(ov[0]["reason"], "ticket 42: reviewed by hand");
  EXPECT_EQ(ov[0]["uid"], 0);
  EXPECT_TRUE(records(log, "override_refused").empty());
  EXPECT_EQ(records(log, "run_start").size(), 1u);
}

}  // namespace
