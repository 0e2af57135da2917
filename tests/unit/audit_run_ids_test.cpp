// Run id claims (<log>.run-ids): an id in any record of the log, rotated files included, or
// claimed before is refused, by this writer and by another; the index catches up with records
// appended since, survives its own loss or a torn last line, and exactly one of many processes
// claiming one id at once wins.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sandboxrun/audit_verify.hpp"
#include "audit/run_ids.hpp"
#include "sandboxrun/audit.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using sandboxrun::AuditLog;
using test_util::TempDir;

sandboxrun::AuditConfig config(uint64_t rotate_max_bytes = 0) {
  sandboxrun::AuditConfig cfg;
  cfg.sync = sandboxrun::AuditSync::none;
  cfg.rotate_max_bytes = rotate_max_bytes;
  return cfg;
}

void record(AuditLog& log, const std::string& id) {
  log.append("run_start", id, {{"trust_used", "untrusted"}});
  log.append("run_end", id, {{"status", "exited"}});
}

}  // namespace

TEST(AuditRunIds, AnIdInTheLogOrClaimedBeforeIsRefused) {
  TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(config(), path);
  record(log, "written-before-any-index");  // as by a writer that never claimed
  EXPECT_FALSE(fs::exists(sandboxrun::audit::run_ids_path(path)));
  EXPECT_FALSE(log.claim_run_id("written-before-any-index"));
  EXPECT_TRUE(log.claim_run_id("job-1"));
  EXPECT_FALSE(log.claim_run_id("job-1")) << "a claim is refused a second time, even before any record";
  // Records appended after the last claim are indexed at the next one.
  record(log, "job-1");
  record(log, "random-0001");
  EXPECT_FALSE(log.claim_run_id("random-0001"));
  // Another writer (another process, in effect) sees the same claims and records.
  auto other = AuditLog::open(config(), path);
  EXPECT_FALSE(other.claim_run_id("job-1"));
  EXPECT_FALSE(other.claim_run_id("written-before-any-index"));
  EXPECT_TRUE(other.claim_run_id("job-2"));
  EXPECT_FALSE(log.claim_run_id("job-2")) << "the first writer reads what the other appended";
  record(other, "late");
  EXPECT_FALSE(log.claim_run_id("late"));
  EXPECT_TRUE(log.claim_run_id("job-3"));
  // The ids are prefixes of nothing: a longer or shorter id is another id.
  EXPECT_TRUE(log.claim_run_id("job-"));
  EXPECT_TRUE(log.claim_run_id("job-10"));
}

TEST(AuditRunIds, RotatedFilesCountAndALostOrTornIndexIsRebuilt) {
  TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  const fs::path index = sandboxrun::audit::run_ids_path(path);
  {
    auto log = AuditLog::open(config(2048), path);
    for (int i = 0; i < 20; ++i) record(log, "old-" + std::to_string(i));
    ASSERT_GE(sandboxrun::rotated_audit_files(path).size(), 3u);
    EXPECT_FALSE(log.claim_run_id("old-0")) << "in the oldest rotated file";
    EXPECT_FALSE(log.claim_run_id("old-19"));
    EXPECT_TRUE(log.claim_run_id("new-1"));
  }
  // A crash left half a line: it is ended before anything is appended, and nothing is lost.
  { std::ofstream(index, std::ios::app) << "new-2"; }
  {
    auto log = AuditLog::open(config(2048), path);
    EXPECT_FALSE(log.claim_run_id("new-1"));
    EXPECT_FALSE(log.claim_run_id("old-7"));
    EXPECT_TRUE(log.claim_run_id("new-3"));
    EXPECT_FALSE(log.claim_run_id("new-3"));
  }
  EXPECT_FALSE(AuditLog::open(config(2048), path).claim_run_id("new-3")) << "the claim after the torn line was lost";
  std::ifstream in(index);
  for (std::string line; std::getline(in, line);)
    EXPECT_EQ(line.find('@', 1), std::string::npos) << "a line run into the torn one: " << line;
  // Deleted: every record's id is found again by scanning the files (claims without a record
  // are gone with it, as they were never recorded).
  fs::remove(index);
  auto log = AuditLog::open(config(2048), path);
  EXPECT_FALSE(log.claim_run_id("old-12"));
  EXPECT_TRUE(log.claim_run_id("new-4"));
}

TEST(AuditRunIds, OneOfManyProcessesClaimingOneIdAtOnceWins) {
  TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  { auto log = AuditLog::open(config(), path); record(log, "seed"); }
  constexpr int kProcs = 8;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < kProcs; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      char c;
      auto log = AuditLog::open(config(), path);
      if (::read(go[0], &c, 1) != 0) _exit(3);  // all start at once, when the pipe closes
      _exit(log.claim_run_id("contested") ? 0 : 1);
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  int winners = 0, losers = 0;
  for (pid_t k : kids) {
    int st = 0;
    ASSERT_EQ(::waitpid(k, &st, 0), k);
    ASSERT_TRUE(WIFEXITED(st));
    (WEXITSTATUS(st) == 0 ? winners : losers) += WEXITSTATUS(st) <= 1;
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(losers, kProcs - 1);
}

TEST(AuditRunIds, DamagedRecordsStillHoldTheirIds) {
  TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  {
    auto log = AuditLog::open(config(), path);
    record(log, "intact");
  }
  // A first record that no longer scans (the file has no name to mark it by), and a damaged
  // record in the middle: `audit verify` reports both; their ids are still taken.
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  { std::ofstream(path, std::ios::trunc) << "{not json \"run_id\":\"first-damaged\"}\n" << text
                                         << "{\"run_id\":\"mid-damaged\",\"seq\":x}\n"; }
  auto log = AuditLog::open(config(), path);
  EXPECT_FALSE(log.claim_run_id("first-damaged"));
  EXPECT_FALSE(log.claim_run_id("mid-damaged"));
  EXPECT_FALSE(log.claim_run_id("intact"));
  EXPECT_TRUE(log.claim_run_id("fresh"));
  EXPECT_FALSE(AuditLog::open(config(), path).claim_run_id("mid-damaged")) << "read whole again by a new writer";
}

TEST(AuditRunIds, AnIndexDamagedPastReadingIsStartedAfresh) {
  TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(config(), path);
  record(log, "recorded");
  EXPECT_TRUE(log.claim_run_id("claimed"));
  // A line far longer than any id or mark: nothing after it could be trusted to be aligned.
  { std::ofstream(sandboxrun::audit::run_ids_path(path), std::ios::app) << std::string(200 << 10, 'x'); }
  EXPECT_FALSE(log.claim_run_id("recorded")) << "rebuilt from the log";
  EXPECT_TRUE(log.claim_run_id("after-damage"));
  EXPECT_FALSE(AuditLog::open(config(), path).claim_run_id("after-damage")) << "the claim was lost past the damage";
}
