// Audit log writer, verifier and commands: tampering matrix, keyed mode, crash/torn line,
// concurrent writers, rotation and pruning, code store and `audit` subcommands.

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

#include "sandboxrun/audit.hpp"
#include "audit/audit_format.hpp"
#include "audit/audit_verify.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"

namespace audit_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test_util::slurp;
using test_util::TempDir;

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream out(p, std::ios::trunc | std::ios::binary);
  for (const auto& l : lines) out << l << "\n";
}

// Recomputes a record's hash the way an attacker with the format (and maybe the key) would.
std::string reseal(json j, sandboxrun::audit::RecordHasher& hasher) {
  j.erase("hash");
  auto d = hasher.digest(sandboxrun::audit::canonical(j));
  j["hash"] = std::string(d.data(), d.size());
  return sandboxrun::audit::canonical(j);
}

sandboxrun::AuditConfig test_config() {
  sandboxrun::AuditConfig cfg;
  cfg.sync = sandboxrun::AuditSync::none;
  cfg.checkpoint_every = 4;
  cfg.rotate_max_bytes = 0;
  return cfg;
}

// Writes `runs` runs of three events each (assessment, run_start, run_end).
void write_runs(sandboxrun::AuditLog& log, int runs, int first = 0) {
  for (int i = first; i < first + runs; ++i) {
    std::string id = "run-" + std::to_string(i);
    sandboxrun::CodeRef code{"job.py", std::string(64, 'a'), 10};
    log.append("assessment", id, {{"level", "LOW"}, {"score", i}, {"code", code}});
    log.append("run_start", id, {{"trust_used", "untrusted"}, {"code", code}}, true);
    log.append("run_end", id, {{"status", "exited"}, {"exit_code", 0}, {"code", code}});
  }
}

sandboxrun::AuditVerifyResult verify(const fs::path& log, std::optional<std::string> key = std::nullopt) {
  sandboxrun::AuditVerifyOptions opt;
  opt.log = log;
  opt.anchor = fs::path(log.string() + ".anchor");
  opt.key = std::move(key);
  return sandboxrun::verify_audit_log(opt);
}

std::string kind(const sandboxrun::AuditVerifyResult& r) {
  return r.damage ? sandboxrun::to_string(r.damage->kind) : "intact";
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
  EXPECT_EQ(sandboxrun::audit_command({"repair", "--log", path.string()}), 0);
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
  EXPECT_EQ(sandboxrun::audit_command({"repair", "--log", path.string()}), 0);
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

// ---- The writer's view of the file: lock header (generation), size check, path re-checks ----

// The header writers keep in <log>.lock (docs/audit.md, "Lock file").
struct LockHeader {
  uint64_t gen = 0, dev = 0, ino = 0;
};

std::optional<LockHeader> lock_header(const fs::path& log) {
  std::string text = slurp(log.string() + ".lock");
  const std::string magic = "sandboxrun-audit-lock 1 gen=";
  if (text.size() != magic.size() + 16 + 21 + 21 + 1 || text.compare(0, magic.size(), magic) != 0 ||
      text.back() != '\n')
    return std::nullopt;
  auto hex = [&](size_t pos) {
    for (size_t i = pos; i < pos + 16; ++i)
      if (!std::isxdigit(static_cast<unsigned char>(text[i])) || std::isupper(static_cast<unsigned char>(text[i])))
        throw std::runtime_error("bad lock header: " + text);
    return std::stoull(text.substr(pos, 16), nullptr, 16);
  };
  size_t m = magic.size();
  if (text.compare(m + 16, 5, " dev=") != 0 || text.compare(m + 37, 5, " ino=") != 0) return std::nullopt;
  return LockHeader{hex(m), hex(m + 21), hex(m + 42)};
}

// A writer that keeps its handle (and, with this config, would not look at the path on its own
// for an hour): what it notices must come from the lock header or the file's size.
sandboxrun::AuditConfig long_lived_config() {
  auto cfg = test_config();
  cfg.path_check_interval = std::chrono::hours(1);
  return cfg;
}

// From here on, every open() that would create a file fails with EMFILE, as with a full fd
// table -- without actually exhausting the fds, which the sanitizer runtime needs for its own
// checks. For a forked test child only (it sets no_new_privs).
void fail_file_creation() {
  sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),  // flags, low 32 bits
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_CREAT, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EMFILE),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    throw std::runtime_error("cannot install the test's seccomp filter");
}

// Runs `fn` in a child process (another writer) and expects it to succeed.
template <typename Fn>
void in_other_process(Fn fn) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    try {
      fn();
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(AuditWriterView, LockFileNamesTheCurrentFileAndRotationMovesTheGeneration) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(test_config(), path);
  log.append("a", "r", {});
  auto h = lock_header(path);
  ASSERT_TRUE(h) << slurp(path.string() + ".lock");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(h->ino, static_cast<uint64_t>(st.st_ino));
  EXPECT_EQ(h->dev, static_cast<uint64_t>(st.st_dev));
  log.append("b", "r", {});
  EXPECT_EQ(lock_header(path)->gen, h->gen);  // nothing moved
  auto cfg = test_config();
  cfg.rotate_max_bytes = 1;
  auto rotating = AuditLog::open(cfg, path);
  rotating.append("c", "r", {});
  ASSERT_EQ(sandboxrun::rotated_audit_files(path).size(), 1u);
  auto after = lock_header(path);
  ASSERT_TRUE(after);
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(after->ino, static_cast<uint64_t>(st.st_ino));
  EXPECT_NE(after->ino, h->ino);
  EXPECT_EQ(after->gen, h->gen + 2);  // one before the rename, one for the new file
}

TEST(AuditWriterView, RotationByAnotherProcessIsNoticedThroughTheGeneration) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(long_lived_config(), path);
  EXPECT_EQ(log.append("a", "r", {}), 1u);
  // Another process rotates (every append does with rotate_max_bytes = 1) and appends to the
  // new file. Our writer's file keeps its size: only the lock header tells it.
  in_other_process([&] {
    auto cfg = long_lived_config();
    cfg.rotate_max_bytes = 1;
    auto other = AuditLog::open(cfg, path);
    other.append("b", "r", {});
  });
  ASSERT_EQ(sandboxrun::rotated_audit_files(path).size(), 1u);
  EXPECT_EQ(log.append("c", "r", {}), 3u);
  EXPECT_EQ(read_lines(sandboxrun::rotated_audit_files(path)[0]).size(), 1u);
  EXPECT_EQ(read_lines(path).size(), 2u);
  auto r = verify(path);
  EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
  EXPECT_EQ(r.records, 3u);
}

TEST(AuditWriterView, RotationThatDiesHalfWayStillTellsTheOtherWriters) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(long_lived_config(), path);
  EXPECT_EQ(log.append("a", "r", {}), 1u);
  // Another writer renames the file away, then fails to create the new one (file creation is
  // made to fail), as if it died between the two: the generation must already have moved.
  in_other_process([&] {
    auto cfg = long_lived_config();
    cfg.rotate_max_bytes = 1;
    auto other = AuditLog::open(cfg, path);
    fail_file_creation();
    try {
      other.append("b", "r", {});
    } catch (const sandboxrun::Error& e) {
      if (fs::exists(path) || sandboxrun::rotated_audit_files(path).size() != 1) {
        std::fprintf(stderr, "unexpected failure: %s\n", e.what());
        throw;
      }
      return;  // renamed, and no new file: what this test needs
    }
    throw std::runtime_error("the rotation did not fail half-way");
  });
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(log.append("c", "r", {}), 2u);
  EXPECT_EQ(read_lines(sandboxrun::rotated_audit_files(path)[0]).size(), 1u);
  EXPECT_EQ(read_lines(path).size(), 1u);
  EXPECT_EQ(kind(verify(path)), "intact");
}

TEST(AuditWriterView, AppendsByAnotherWriterAreChainedTo) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto a = AuditLog::open(long_lived_config(), path);
  auto b = AuditLog::open(long_lived_config(), path);
  for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ((i % 2 ? b : a).append("e", "r", {{"i", i}}), i + 1);
  EXPECT_EQ(kind(verify(path)), "intact");
}

TEST(AuditWriterView, TornTailLeftByAnotherWriterIsNoticedByAKeptHandle) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(long_lived_config(), path);
  log.append("a", "r", {});
  {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << R"({"event":"b","hash":"01)";
  }
  EXPECT_THROW(log.append("c", "r", {}), sandboxrun::Error);
  EXPECT_EQ(read_lines(path).size(), 2u);  // the torn line, nothing after it
  EXPECT_EQ(kind(verify(path)), "torn-last-line");
}

TEST(AuditWriterView, RenameByAnotherToolIsPassedOnByTheNextWriterThatLooks) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  fs::path moved = dir.path() / "elsewhere.log";
  auto log = AuditLog::open(long_lived_config(), path);
  EXPECT_EQ(log.append("a", "r", {}), 1u);
  // mv, without the lock and without touching the lock file.
  fs::rename(path, moved);
  // A new writer looks at the path, finds another file than the lock file names, and moves
  // the generation on: the kept handle then looks too.
  in_other_process([&] { AuditLog::open(long_lived_config(), path).append("b", "r", {}); });
  EXPECT_EQ(log.append("c", "r", {}), 2u);
  EXPECT_EQ(read_lines(moved).size(), 1u);
  EXPECT_EQ(read_lines(path).size(), 2u);
  EXPECT_EQ(kind(verify(path)), "intact");
}

TEST(AuditWriterView, PathIsLookedAtAgainAfterTheInterval) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  fs::path moved = dir.path() / "elsewhere.log";
  auto cfg = test_config();
  cfg.path_check_interval = std::chrono::milliseconds(20);
  auto log = AuditLog::open(cfg, path);
  log.append("a", "r", {});
  fs::rename(path, moved);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_EQ(log.append("b", "r", {}), 1u);  // a new chain in a new file: nothing at the path
  EXPECT_EQ(read_lines(moved).size(), 1u);
  EXPECT_EQ(read_lines(path).size(), 1u);
  // 0: before every append (a deleted file is noticed at once).
  cfg.path_check_interval = std::chrono::milliseconds(0);
  auto every = AuditLog::open(cfg, path);
  every.append("c", "r", {});
  fs::remove(path);
  EXPECT_EQ(every.append("d", "r", {}), 1u);
  EXPECT_EQ(read_lines(path).size(), 1u);
}

TEST(AuditWriterView, LockFilesWithoutAHeaderStillWork) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  fs::path lock = path.string() + ".lock";
  {
    auto log = AuditLog::open(test_config(), path);
    write_runs(log, 1);
  }
  // An empty lock file (as written before the header existed), then a damaged one.
  for (std::string content : {std::string(), std::string("junk\n"), std::string(200, 'x'),
                              std::string("sandboxrun-audit-lock 1 gen=zz")}) {
    { std::ofstream(lock, std::ios::trunc | std::ios::binary) << content; }
    auto log = AuditLog::open(long_lived_config(), path);
    log.append("e", "r", {});
    EXPECT_TRUE(lock_header(path) || content.size() > 87) << content;
    log.append("f", "r", {});
  }
  auto r = verify(path);
  EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
  EXPECT_EQ(r.records, 3u + 8u);
}

// ---- Record bytes: the writer's own serializer must give canonical() of the record ----

TEST(AuditRecordBytes, LinesAreCanonicalForAwkwardFields) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  fs::path key = dir.path() / "key";
  { std::ofstream(key) << std::string(32, 'k'); }
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
  for (bool keyed : {false, true}) {
    auto cfg = test_config();
    if (keyed) cfg.key_file = key;
    fs::path p = dir.path() / (keyed ? "keyed.log" : "plain.log");
    auto log = AuditLog::open(cfg, p);
    // Keys just before, between and after the ones the log fills in.
    json fields;
    for (const char* k : {"a", "eventa", "event_", "f", "has", "hash0", "kic", "kid0", "kie", "pre", "prev_",
                          "q", "run", "run_id0", "run_h", "s", "seq0", "sep", "t", "ts0", "tt", "u", "~",
                          "\x7f", "\xc3\xa9", "E", "_", " sp", "x\"q", "x\\b", "nl\n"})
      fields[k] = k;
    fields["nested"] = {{"z", 1}, {"a", json::array({1.5, -0.0, 1e300, 5e-324, -7, 18446744073709551615ull,
                                                     nullptr, true, false, json::object(), json::array()})}};
    fields["text"] = "quote\" backslash\\ ctl\x01\x1f tab\t del\x7f \xe2\x98\x83 \xf0\x9f\x98\x80";
    fields["invalid"] = "bad \xff\xfe utf8 \xc3 \xed\xa0\x80 end";
    fields["\xff key"] = 1;
    log.append("run_start", "r\xc3\xa9\"1", fields);
    log.append("ev\n", "", {{"long", std::string(5000, 'y') + "\""}});
    log.append("e", "r", {});
    for (const auto& line : read_lines(p)) {
      json j = json::parse(line);
      EXPECT_EQ(sandboxrun::audit::canonical(j), line);
    }
    auto r = verify(p, keyed ? std::optional<std::string>(std::string(32, 'k')) : std::nullopt);
    EXPECT_EQ(kind(r), "intact") << (r.damage ? r.damage->detail : "");
    json first = json::parse(read_lines(p)[0]);
    EXPECT_EQ(first["text"], fields["text"]);
    EXPECT_EQ(first.contains("kid"), keyed);
  }
}

TEST(AuditRecordBytes, RecordsTheScannerCouldNotReadAreRefused) {
  TempDir dir;
  fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(test_config(), path);
  json deep = 1;
  for (int i = 0; i < sandboxrun::audit::kMaxDepth; ++i) deep = json::array({deep});
  try {
    log.append("deep", "r", {{"v", deep}});
    FAIL() << "wrote a record nested deeper than verify reads";
  } catch (const sandboxrun::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not canonical"), std::string::npos) << e.what();
  }
  // Two keys that are the same once invalid UTF-8 is replaced.
  EXPECT_THROW(log.append("dup", "r", {{"k\xff", 1}, {"k\xfe", 2}}), sandboxrun::Error);
  EXPECT_FALSE(fs::exists(path) && fs::file_size(path) > 0);
  // One level less is fine.
  json ok = 1;
  for (int i = 0; i + 1 < sandboxrun::audit::kMaxDepth; ++i) ok = json::array({ok});
  EXPECT_EQ(log.append("deep", "r", {{"v", ok}}), 1u);
  EXPECT_EQ(kind(verify(path)), "intact");
}

class AuditCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path() / "audit.log";
    auto log = AuditLog::open(test_config(), path_);
    for (int i = 0; i < 2; ++i) {
      std::string id = "run-" + std::to_string(i);
      const std::string text = i == 0 ? "print(1)\nprint('same')\n" : "print(2)\nprint('same')\n";
      auto code = log.store_code(text, "job.py");
      log.append("assessment", id, {{"level", "LOW"}, {"score", 3}, {"code", code}});
      json start = {{"trust_used", "untrusted"}, {"code", code}};
      if (auto diff = log.track_version(std::nullopt, "job.py", text, id)) start["diff_from"] = *diff;
      log.append("run_start", id, start, true);
      log.append("run_end", id, {{"status", "exited"}, {"exit_code", i}, {"duration_ms", 120},
                                 {"memory_peak_bytes", 10 << 20}, {"code", code}});
    }
  }
  int run(std::vector<std::string> args, std::string* out = nullptr) {
    testing::internal::CaptureStdout();
    int rc = sandboxrun::audit_command(args);
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
