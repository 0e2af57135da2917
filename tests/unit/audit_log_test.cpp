// Audit log writer, verifier and commands: tampering matrix, keyed mode, crash/torn line,
// concurrent writers, rotation and pruning, the code store. The writer's view of the file, the
// record bytes and the `audit` subcommands: audit_writer_view_test.cpp.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <cctype>
#include <cstddef>
#include <map>
#include <optional>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "sandboxrun/audit.hpp"
#include "audit/audit_format.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"
#include "audit_test_util.hpp"

namespace audit_test {
namespace {

using nlohmann::json;

using test_util::slurp;
using test_util::TempDir;

// Recomputes a record's hash the way an attacker with the format (and maybe the key) would.
std::string reseal(json j, sandboxrun::audit::RecordHasher& hasher) {
  j.erase("hash");
  auto d = hasher.digest(sandboxrun::audit::canonical(j));
  j["hash"] = std::string(d.data(), d.size());
  return sandboxrun::audit::canonical(j);
}

using sandboxrun::AuditLog;
using sandboxrun::audit::RecordHasher;

class Tamper : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = dir_.path() / "audit.log";
    auto log = AuditLog::open(test_config(), log_);
    write_runs(log, 4);  // 12 records, checkpoints at 4, 8, 12
    lines_ = read_lines(log_);
    ASSERT_EQ(lines_.size(), 12u);
  }
  // Verdict after replacing the log's lines.
  sandboxrun::AuditVerifyResult after(const std::vector<std::string>& lines) {
    write_lines(log_, lines);
    return verify(log_);
  }
  json rec(size_t i) { return json::parse(lines_[i]); }

  TempDir dir_;
  fs::path log_;
  std::vector<std::string> lines_;
  RecordHasher sha_;
};

TEST_F(Tamper, IntactLogVerifies) {
  auto r = verify(log_);
  EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
  EXPECT_EQ(r.records, 12u);
  EXPECT_EQ(r.first_seq, 1u);
  EXPECT_EQ(r.last_seq, 12u);
  EXPECT_EQ(r.checkpoints_matched, 3u);
  EXPECT_EQ(read_lines(fs::path(log_.string() + ".anchor")).size(), 3u);
}

TEST_F(Tamper, EditOneByte) {
  auto l = lines_;
  size_t pos = l[3].find("\"score\":1");
  ASSERT_NE(pos, std::string::npos);
  l[3][pos + 8] = '7';
  auto r = after(l);
  EXPECT_EQ(kind(r), "modified");
  EXPECT_EQ(r.damage->line, 4u);
  EXPECT_EQ(r.damage->seq, 4u);
}

TEST_F(Tamper, ChangeAFieldKeepingCanonicalForm) {
  auto l = lines_;
  json j = rec(5);
  j["exit_code"] = 1;
  l[5] = sandboxrun::audit::canonical(j);
  auto r = after(l);
  EXPECT_EQ(kind(r), "modified");
  EXPECT_EQ(r.damage->line, 6u);
}

TEST_F(Tamper, BreakTheJson) {
  auto l = lines_;
  l[2].pop_back();
  auto r = after(l);
  EXPECT_EQ(kind(r), "modified");
  EXPECT_EQ(r.damage->line, 3u);
  EXPECT_NE(r.damage->detail.find("malformed"), std::string::npos);
}

TEST_F(Tamper, DeleteARecord) {
  auto l = lines_;
  l.erase(l.begin() + 4);
  auto r = after(l);
  EXPECT_EQ(kind(r), "deleted");
  EXPECT_EQ(r.damage->line, 5u);
  EXPECT_EQ(r.damage->seq, 6u);
}

TEST_F(Tamper, DeleteTheFirstRecord) {
  auto l = lines_;
  l.erase(l.begin());
  EXPECT_EQ(kind(after(l)), "deleted");
}

TEST_F(Tamper, SwapTwoRecords) {
  auto l = lines_;
  std::swap(l[4], l[5]);
  auto r = after(l);
  EXPECT_EQ(kind(r), "reordered");
  EXPECT_EQ(r.damage->line, 5u);
}

TEST_F(Tamper, MoveARecordLater) {
  auto l = lines_;
  std::string moved = l[2];
  l.erase(l.begin() + 2);
  l.insert(l.begin() + 7, moved);
  EXPECT_EQ(kind(after(l)), "reordered");
}

TEST_F(Tamper, InsertForgedRecordWithRecomputedHash) {
  auto l = lines_;
  json f = rec(5);  // seq 6: claim its place, linked to record 5
  f["exit_code"] = 0;
  f["status"] = "forged";
  l.insert(l.begin() + 5, reseal(f, sha_));
  auto r = after(l);
  EXPECT_EQ(kind(r), "inserted");
  EXPECT_EQ(r.damage->line, 6u);
}

TEST_F(Tamper, ReplayAnEarlierRecord) {
  auto l = lines_;
  l.insert(l.begin() + 9, l[4]);
  auto r = after(l);
  EXPECT_EQ(kind(r), "inserted");
  EXPECT_EQ(r.damage->line, 10u);
}

TEST_F(Tamper, ReplaceARecordWithRecomputedHash) {
  auto l = lines_;
  json f = rec(5);
  f["exit_code"] = 42;
  l[5] = reseal(f, sha_);
  auto r = after(l);
  EXPECT_EQ(kind(r), "modified");
  EXPECT_EQ(r.damage->line, 6u);
}

TEST_F(Tamper, RewriteTheRestOfTheChainIsCaughtByTheCheckpoint) {
  auto l = lines_;
  std::string prev;
  for (size_t i = 5; i < l.size(); ++i) {
    json f = json::parse(l[i]);
    if (i == 5) f["exit_code"] = 42;
    else f["prev"] = prev;
    l[i] = reseal(f, sha_);
    prev = json::parse(l[i])["hash"];
  }
  auto r = after(l);
  EXPECT_EQ(kind(r), "rolled-back");
  EXPECT_EQ(r.damage->seq, 8u);
}

TEST_F(Tamper, TruncateCleanly) {
  auto l = lines_;
  l.resize(9);
  auto r = after(l);
  EXPECT_EQ(kind(r), "truncated-after-checkpoint");
  EXPECT_EQ(r.damage->seq, 12u);
}

TEST_F(Tamper, TruncateMidRecord) {
  std::string all = slurp(log_);
  std::ofstream(log_, std::ios::trunc | std::ios::binary) << all.substr(0, all.size() - 40);
  auto r = verify(log_);
  EXPECT_EQ(kind(r), "torn-last-line");
  EXPECT_EQ(r.damage->line, 12u);
}

TEST_F(Tamper, DeleteTheFile) {
  fs::remove(log_);
  EXPECT_EQ(kind(verify(log_)), "missing");
}

TEST_F(Tamper, RollBackToAnOlderCopy) {
  auto older = std::vector<std::string>(lines_.begin(), lines_.begin() + 9);
  EXPECT_EQ(kind(after(older)), "truncated-after-checkpoint");
  // ... and when the service keeps writing after the rollback, the chain diverges.
  auto log = AuditLog::open(test_config(), log_);
  write_runs(log, 1, 100);
  auto r = verify(log_);
  EXPECT_EQ(kind(r), "rolled-back");
  EXPECT_EQ(r.damage->seq, 12u);
}

TEST_F(Tamper, ReplaceTheWholeFile) {
  fs::path other = dir_.path() / "other.log";
  {
    auto log = AuditLog::open(test_config(), other);
    write_runs(log, 4, 50);
  }
  fs::copy_file(other, log_, fs::copy_options::overwrite_existing);
  auto r = verify(log_);
  EXPECT_EQ(kind(r), "rolled-back");
  EXPECT_EQ(r.damage->seq, 4u);
}

TEST(AuditKeyed, ForgeryWithoutTheKeyIsDetected) {
  TempDir dir;
  fs::path key = dir.path() / "audit.key";
  std::string secret(32, 'k');
  std::ofstream(key) << secret;
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
  auto cfg = test_config();
  cfg.key_file = key;
  fs::path path = dir.path() / "audit.log";
  {
    auto log = AuditLog::open(cfg, path);
    write_runs(log, 3);
  }
  EXPECT_EQ(kind(verify(path, secret)), "intact");
  EXPECT_EQ(kind(verify(path)), "bad-key");
  EXPECT_EQ(kind(verify(path, std::string(32, 'x'))), "bad-key");

  auto lines = read_lines(path);
  RecordHasher sha;
  // Edit a record and reseal it (and all after it) with plain SHA-256, keeping the kid.
  auto forged = lines;
  std::string prev;
  for (size_t i = 4; i < forged.size(); ++i) {
    json j = json::parse(forged[i]);
    if (i == 4) j["exit_code"] = 7;
    else j["prev"] = prev;
    forged[i] = reseal(j, sha);
    prev = json::parse(forged[i])["hash"];
  }
  write_lines(path, forged);
  auto r = verify(path, secret);
  EXPECT_EQ(kind(r), "forged");
  EXPECT_EQ(r.damage->line, 5u);

  // Strip the key ids and reseal the whole log as a plain chain.
  auto plain = lines;
  prev = std::string(sandboxrun::audit::kGenesisPrev);
  for (auto& l : plain) {
    json j = json::parse(l);
    j.erase("kid");
    j["prev"] = prev;
    l = reseal(j, sha);
    prev = json::parse(l)["hash"];
  }
  write_lines(path, plain);
  EXPECT_EQ(kind(verify(path, secret)), "forged");
  // Without the key only the anchor notices; with the anchor gone nothing does (why keyed mode exists).
  EXPECT_EQ(kind(verify(path)), "rolled-back");
  fs::remove(path.string() + ".anchor");
  EXPECT_EQ(kind(verify(path)), "intact");

  // An edit without resealing is still just "modified".
  auto edited = lines;
  edited[3].replace(edited[3].find("\"score\":1"), 9, "\"score\":9");
  write_lines(path, edited);
  EXPECT_EQ(kind(verify(path, secret)), "modified");
}

TEST(AuditKeyed, RefusesKeyFilesOthersCanRead) {
  TempDir dir;
  fs::path key = dir.path() / "audit.key";
  std::ofstream(key) << std::string(32, 'k');
  auto cfg = test_config();
  cfg.key_file = key;
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  try {
    AuditLog::open(cfg, dir.path() / "audit.log");
    FAIL() << "group-readable key accepted";
  } catch (const sandboxrun::Error& e) {
    EXPECT_NE(std::string(e.what()).find("group or others"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("chmod 600"), std::string::npos);
  }
  fs::permissions(key, fs::perms::owner_read);
  EXPECT_NO_THROW(AuditLog::open(cfg, dir.path() / "audit.log"));
  std::ofstream(key, std::ios::trunc) << "short";
  EXPECT_THROW(AuditLog::open(cfg, dir.path() / "audit.log"), sandboxrun::Error);
}

TEST(AuditCrash, TornAppendIsReportedAndRepaired) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto cfg = test_config();
  {
    auto log = AuditLog::open(cfg, path);
    write_runs(log, 2);
  }
  std::string good = slurp(path);
  // A writer killed between two partial writes of one record, holding the lock.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int lock = ::open((path.string() + ".lock").c_str(), O_RDWR);
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
    ::flock(lock, LOCK_EX);
    std::string half = R"({"event":"run_end","exit_code":0,"hash":"0123)";
    (void)!::write(fd, half.data(), half.size());
    ::raise(SIGKILL);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto r = verify(path);
  EXPECT_EQ(kind(r), "torn-last-line");
  EXPECT_EQ(r.damage->line, 7u);
  {
    auto log = AuditLog::open(cfg, path);
    try {
      log.append("run_start", "x", {});
      FAIL() << "appended after a torn line";
    } catch (const sandboxrun::Error& e) {
      EXPECT_NE(e.hint().find("audit repair"), std::string::npos);
    }
  }
  testing::internal::CaptureStdout();
  EXPECT_EQ(sandboxrun::cli::audit_command({"repair", "--log", path.string()}), 0);
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("removed a torn record"), std::string::npos) << out;
  r = verify(path);
  EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
  auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(slurp(path).substr(0, good.size()), good);
  json rep = json::parse(lines.back());
  EXPECT_EQ(rep["event"], "repair");
  EXPECT_EQ(rep["seq"], 7);
  EXPECT_EQ(rep["truncated_at"], good.size());
  EXPECT_EQ(rep["truncated_bytes"], 45);
  EXPECT_EQ(slurp(dir.path() / "objects" / rep["tail"]["sha256"].get<std::string>()),
            R"({"event":"run_end","exit_code":0,"hash":"0123)");
  // Nothing left to repair; appends work again.
  testing::internal::CaptureStdout();
  EXPECT_EQ(sandboxrun::cli::audit_command({"repair", "--log", path.string()}), 0);
  EXPECT_NE(testing::internal::GetCapturedStdout().find("nothing to repair"), std::string::npos);
  auto log = AuditLog::open(cfg, path);
  EXPECT_EQ(log.append("run_start", "y", {}), 8u);
}

TEST(AuditConcurrency, FiftyWritersGiveFiftyIntactChains) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto cfg = test_config();
  cfg.checkpoint_every = 7;
  constexpr int kWriters = 50, kEvents = 4;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        auto log = AuditLog::open(cfg, path);
        std::string id = "run-" + std::to_string(w);
        // A long field makes interleaved writes visible if appends were not serialized.
        std::string pad(2000 + w, static_cast<char>('a' + w % 26));
        for (int e = 0; e < kEvents; ++e) log.append("step", id, {{"n", e}, {"pad", pad}});
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto r = verify(path);
  EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
  EXPECT_EQ(r.records, uint64_t{kWriters * kEvents});
  std::map<std::string, int> next;
  for (const auto& l : read_lines(path)) {
    json j = json::parse(l);  // throws on an interleaved line
    std::string id = j["run_id"];
    EXPECT_EQ(j["n"], next[id]++) << id;
    EXPECT_EQ(j["pad"].get<std::string>().size(), 2000u + std::stoul(id.substr(4)));
  }
  EXPECT_EQ(next.size(), size_t{kWriters});
}

TEST(AuditRotation, FilesChainAcrossRotation) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto cfg = test_config();
  cfg.rotate_max_bytes = 4096;
  {
    auto log = AuditLog::open(cfg, path);
    write_runs(log, 30);  // 90 records of ~450 bytes
  }
  auto rotated = sandboxrun::rotated_audit_files(path);
  ASSERT_GE(rotated.size(), 5u);
  for (size_t i = 0; i + 1 < rotated.size(); ++i) {
    json last = json::parse(read_lines(rotated[i]).back());
    json first = json::parse(read_lines(rotated[i + 1]).front());
    EXPECT_EQ(first["prev"], last["hash"]);
    EXPECT_EQ(first["seq"], last["seq"].get<uint64_t>() + 1);
    EXPECT_EQ(rotated[i].string(), path.string() + "." + std::to_string(last["seq"].get<uint64_t>()));
  }
  auto r = verify(path);
  EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
  EXPECT_EQ(r.records, 90u);
  EXPECT_EQ(r.files.size(), rotated.size() + 1);
  // Removing a rotated file in the middle breaks the chain.
  fs::remove(rotated[2]);
  EXPECT_EQ(kind(verify(path)), "deleted");
}

TEST(AuditRotation, PruningIsRecordedAndAccountsForTheGap) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto cfg = test_config();
  cfg.rotate_max_bytes = 4096;
  cfg.keep_files = 2;
  {
    auto log = AuditLog::open(cfg, path);
    write_runs(log, 30);
  }
  auto rotated = sandboxrun::rotated_audit_files(path);
  EXPECT_EQ(rotated.size(), 2u);
  auto r = verify(path);
  EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
  EXPECT_GT(r.first_seq, 1u);
  int prunes = 0;
  for (const auto& f : sandboxrun::audit_log_files(path))
    for (const auto& l : read_lines(f))
      if (json::parse(l)["event"] == "prune") ++prunes;
  EXPECT_GE(prunes, 3);
  // Deleting the oldest kept file without a prune record is caught.
  fs::remove(rotated[0]);
  EXPECT_EQ(kind(verify(path)), "deleted");
}

TEST(AuditRotation, RotatesByAge) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto cfg = test_config();
  cfg.rotate_max_age = std::chrono::seconds(1);
  auto log = AuditLog::open(cfg, path);
  log.append("a", "r", {});
  log.append("b", "r", {});
  EXPECT_TRUE(sandboxrun::rotated_audit_files(path).empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  log.append("c", "r", {});
  ASSERT_EQ(sandboxrun::rotated_audit_files(path).size(), 1u);
  EXPECT_EQ(read_lines(path).size(), 1u);
  EXPECT_EQ(kind(verify(path)), "intact");
}

TEST(AuditLogApi, RecordsCarryChainFieldsAndRejectReservedKeys) {
  TempDir dir;
  auto log = AuditLog::open(test_config(), dir.path() / "sub" / "audit.log");
  EXPECT_EQ(fs::status(dir.path() / "sub").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(log.append("override", "r1", {{"reason", "needed"}, {"uid", 0}}), 1u);
  EXPECT_EQ(log.append("run_end", "r1", nullptr), 2u);
  auto lines = read_lines(log.path());
  json j = json::parse(lines[0]);
  EXPECT_EQ(j["event"], "override");
  EXPECT_EQ(j["reason"], "needed");
  EXPECT_EQ(j["prev"], std::string(sandboxrun::audit::kGenesisPrev));
  // RFC 3339 UTC with microseconds: 2024-05-01T12:34:56.123456Z
  std::string ts = j["ts"];
  const std::string shape = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  ASSERT_EQ(ts.size(), shape.size()) << ts;
  for (size_t i = 0; i < ts.size(); ++i)
    EXPECT_TRUE(shape[i] == 'd' ? std::isdigit(static_cast<unsigned char>(ts[i])) != 0 : ts[i] == shape[i]) << ts;
  EXPECT_EQ(json::parse(lines[1])["prev"], j["hash"]);
  EXPECT_EQ(fs::status(log.path()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_THROW(log.append("x", "r", {{"seq", 5}}), sandboxrun::Error);
  EXPECT_THROW(log.append("x", "r", {{"hash", "x"}}), sandboxrun::Error);
  EXPECT_THROW(log.append("x", "r", {{"code", "job.py"}}), sandboxrun::Error);
  EXPECT_THROW(log.append("x", "r", {{"code", {{"name", "a"}, {"sha256", "ab"}, {"size", 1}}}}), sandboxrun::Error);
  EXPECT_THROW(log.append("x", "r", {{"code", {{"name", "a"}, {"sha256", std::string(64, 'a')}, {"size", -1}}}}),
               sandboxrun::Error);
  EXPECT_THROW(log.append("x", "r", json::array()), sandboxrun::Error);
  EXPECT_THROW(log.append("", "r", {}), sandboxrun::Error);
  EXPECT_THROW(log.append("x", "r", {{"big", std::string(sandboxrun::audit::kMaxRecordBytes, 'x')}}),
               sandboxrun::Error);
  EXPECT_EQ(read_lines(log.path()).size(), 2u);
  // A hand-built code object (signed integer size) is fine.
  EXPECT_EQ(log.append("x", "r", {{"code", {{"name", "a"}, {"sha256", std::string(64, 'a')}, {"size", 9}}}}), 3u);
}

TEST(AuditLogApi, StoresCodeContentAddressed) {
  TempDir dir;
  auto log = AuditLog::open(test_config(), dir.path() / "audit.log");
  auto ref = log.store_code("print(1)\n", "job.py");
  EXPECT_EQ(ref.sha256, "cc42155088fca5730758db72b2a5bca33112a941dfaa2d43098ec422ce4ea213");
  EXPECT_EQ(ref.size, 9u);
  fs::path obj = dir.path() / "objects" / ref.sha256;
  EXPECT_EQ(slurp(obj), "print(1)\n");
  EXPECT_EQ(fs::status(dir.path() / "objects").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(log.store_code("print(1)\n", "other.py").sha256, ref.sha256);
  json j = ref;
  EXPECT_EQ(j, (json{{"name", "job.py"}, {"sha256", ref.sha256}, {"size", 9}, {"stored", true}}));
  auto cfg = test_config();
  cfg.store_code = false;
  auto nostore = AuditLog::open(cfg, dir.path() / "b" / "audit.log");
  EXPECT_EQ(nostore.store_code("x", "x.py").size, 1u);
  EXPECT_FALSE(nostore.store_code("x", "x.py").stored);
  EXPECT_FALSE(fs::exists(dir.path() / "b" / "objects"));
}

}  // namespace
}  // namespace audit_test
