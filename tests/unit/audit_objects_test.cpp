// The audit object store: verify re-hashes every object the records name and names the missing
// and altered ones; rotation and `audit prune-objects` delete only objects no retained record
// names (and none younger than the grace period); the version index behind diff_from.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "common/sha256.hpp"
#include "sandboxrun/audit.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sandboxrun::AuditLog;
using sandboxrun::sha256_hex;
using test_util::TempDir;

sandboxrun::AuditConfig config() {
  sandboxrun::AuditConfig cfg;
  cfg.sync = sandboxrun::AuditSync::none;
  cfg.checkpoint_every = 0;
  cfg.rotate_max_bytes = 0;
  return cfg;
}

json entry(const std::string& path, const std::string& data, bool stored) {
  return {{"path", path}, {"size", data.size()}, {"sha256", sha256_hex(data)}, {"mode", 420}, {"stored", stored}};
}

// One run as the executor records it: code, an input, diff_from, an output.
void record_run(AuditLog& log, const std::string& id, const std::string& code_text, const std::string& output) {
  const std::string input = "a,b\n1,2\n";
  auto code = log.store_code(code_text, "job.py");
  log.append("assessment", id, {{"code", code}, {"level", "LOW"}});
  bool in = log.store_file(input, sha256_hex(input));
  json start = {{"code", code}, {"inputs", json::array({entry("data.csv", input, in)})}};
  if (auto d = log.track_version(std::nullopt, "job.py", code_text, id)) start["diff_from"] = *d;
  log.append("run_start", id, start);
  bool out = log.store_file(output, sha256_hex(output));
  log.append("run_end", id, {{"code", code}, {"outputs", json::array({entry("report.json", output, out)})}});
}

sandboxrun::AuditVerifyResult verify(const fs::path& log) {
  sandboxrun::AuditVerifyOptions opt;
  opt.log = log;
  opt.objects = true;
  return sandboxrun::verify_audit_log(opt);
}

int cli(const std::vector<std::string>& args, std::string* out = nullptr, std::string* err = nullptr) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int rc = sandboxrun::cli::audit_command(args);
  std::string o = testing::internal::GetCapturedStdout(), e = testing::internal::GetCapturedStderr();
  if (out) *out = o;
  if (err) *err = e;
  return rc;
}

void age(const fs::path& p, std::chrono::seconds by) {
  auto t = std::chrono::system_clock::now() - by;
  timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = std::chrono::system_clock::to_time_t(t);
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << p;
}

void age_all(const fs::path& dir, std::chrono::seconds by) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) age(e.path(), by);
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ObjectStore : public ::testing::Test {
 protected:
  TempDir dir_;
  fs::path log_ = dir_.path() / "audit.log";
  fs::path objects_ = dir_.path() / "objects";
};

TEST_F(ObjectStore, VerifyRehashesEachObjectOnceAndNamesTheAlteredAndMissingOnes) {
  {
    auto log = AuditLog::open(config(), log_);
    for (int i = 0; i < 3; ++i) record_run(log, "run-" + std::to_string(i), "print(1)\n", "{\"n\": " + std::to_string(i) + "}");
  }
  auto res = verify(log_);
  ASSERT_TRUE(res.ok());
  ASSERT_TRUE(res.objects);
  // One code object, one input, three outputs: each hashed once, however often it is named.
  EXPECT_EQ(res.objects->referenced, 5u);
  EXPECT_EQ(res.objects->checked, 5u);
  std::string out;
  EXPECT_EQ(cli({"verify", "--log", log_.string()}, &out), 0) << out;
  EXPECT_NE(out.find("5 object(s) re-hashed"), std::string::npos) << out;

  // One byte of run-1's output changed: named with its record, run, path and hash.
  const std::string altered = sha256_hex("{\"n\": 1}");
  std::string bytes = text_of(objects_ / altered);
  bytes[3] ^= 1;
  test_util::put(objects_ / altered, bytes, 0600);
  EXPECT_EQ(cli({"verify", "--log", log_.string()}, &out), 1);
  EXPECT_NE(out.find("object ALTERED: seq 6 run run-1 output report.json sha256 " + altered), std::string::npos) << out;

  // run-2's output deleted: missing, since its record says it was stored.
  const std::string gone = sha256_hex("{\"n\": 2}");
  fs::remove(objects_ / gone);
  EXPECT_EQ(cli({"verify", "--log", log_.string(), "--json"}, &out), 1);
  json j = json::parse(out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_FALSE(j.contains("damage"));  // the chain itself is intact
  ASSERT_EQ(j["objects"]["problems"].size(), 2u) << j;
  json missing = j["objects"]["problems"][1];
  EXPECT_EQ(missing["kind"], "missing");
  EXPECT_EQ(missing["seq"], 9);
  EXPECT_EQ(missing["run_id"], "run-2");
  EXPECT_EQ(missing["path"], "output report.json");
  EXPECT_EQ(missing["sha256"], gone);
  // The chain alone still verifies.
  EXPECT_EQ(cli({"verify", "--log", log_.string(), "--no-objects"}, &out), 0) << out;
}

TEST_F(ObjectStore, ObjectsNotStoredAreNotMissingButAnAlteredOneIsStillFound) {
  auto cfg = config();
  cfg.store_files = false;
  {
    auto log = AuditLog::open(cfg, log_);
    record_run(log, "run-0", "print(1)\n", "out");
    // A code ref from before objects were marked (no "stored"), to nothing.
    log.append("assessment", "old", {{"code", {{"name", "old.py"}, {"sha256", std::string(64, 'b')}, {"size", 1}}}});
  }
  EXPECT_FALSE(fs::exists(objects_ / sha256_hex("out")));
  auto res = verify(log_);
  EXPECT_TRUE(res.ok()) << (res.objects && !res.objects->problems.empty() ? res.objects->problems[0].detail : "");
  EXPECT_EQ(res.objects->checked, 1u);  // the code
  // An object there is checked whatever the record says.
  test_util::put(objects_ / std::string(64, 'b'), "not b", 0600);
  res = verify(log_);
  ASSERT_EQ(res.objects->problems.size(), 1u);
  EXPECT_EQ(res.objects->problems[0].kind, "altered");
  EXPECT_EQ(res.objects->problems[0].path, "code old.py");
}

TEST_F(ObjectStore, RotationPrunesTheObjectsOnlyPrunedFilesNamed) {
  auto cfg = config();
  cfg.rotate_max_bytes = 4096;
  cfg.keep_files = 3;
  auto log = AuditLog::open(cfg, log_);
  int runs = 0;
  for (; runs < 8; ++runs) record_run(log, "run-" + std::to_string(runs), "print(1)\n", "output " + std::to_string(runs));
  const std::string stray_old = "stray, old", stray_new = "stray, new";
  log.store_file(stray_old, sha256_hex(stray_old));
  // Until now any object was younger than the grace period; these are not.
  age_all(objects_, std::chrono::hours(2));
  log.store_file(stray_new, sha256_hex(stray_new));
  // Runs until a rotation prunes the file naming the first run.
  for (; runs < 40 && fs::exists(objects_ / sha256_hex("output 0")); ++runs)
    record_run(log, "run-" + std::to_string(runs), "print(1)\n", "output " + std::to_string(runs));

  std::string retained;
  for (const auto& f : sandboxrun::audit_log_files(log_)) retained += text_of(f);
  ASSERT_NE(retained.find("\"event\":\"prune_objects\""), std::string::npos);
  size_t deleted = 0, kept_old = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string sha = sha256_hex("output " + std::to_string(i));
    const bool named = retained.find(sha) != std::string::npos;
    // Old objects go exactly when no retained record names them; young ones stay.
    EXPECT_EQ(fs::exists(objects_ / sha), named || i >= 8) << "output " << i;
    if (!named) ++deleted;
    if (named && i < 8) ++kept_old;
  }
  EXPECT_GT(deleted, 0u);
  EXPECT_GT(kept_old, 0u);  // old, but named by a retained file
  EXPECT_TRUE(fs::exists(objects_ / sha256_hex("print(1)\n")));
  EXPECT_FALSE(fs::exists(objects_ / sha256_hex(stray_old)));
  EXPECT_TRUE(fs::exists(objects_ / sha256_hex(stray_new)));  // fresh: its record may be on its way
  auto res = verify(log_);
  EXPECT_TRUE(res.ok()) << (res.damage ? res.damage->detail : res.objects->problems[0].detail);
}

TEST_F(ObjectStore, PruneObjectsCommandKeepsWhatIsNamedOrFreshOrRefreshed) {
  {
    auto log = AuditLog::open(config(), log_);
    record_run(log, "run-0", "print(1)\n", "named");
    for (const char* s : {"unnamed old", "refreshed"}) log.store_file(s, sha256_hex(s));
  }
  age_all(objects_, std::chrono::hours(2));
  test_util::put(objects_ / ".tmp-left-by-a-crash", "x", 0600);
  age(objects_ / ".tmp-left-by-a-crash", std::chrono::hours(2));
  {
    // A writer about to name it refreshes it (storing the same bytes again).
    auto log = AuditLog::open(config(), log_);
    log.store_file("refreshed", sha256_hex("refreshed"));
  }
  std::string out, err;
  EXPECT_EQ(cli({"prune-objects", "--log", log_.string(), "--grace", "soon"}, &out, &err), 2) << err;
  EXPECT_EQ(cli({"prune-objects", "--log", log_.string()}, &out, &err), 0) << err;
  EXPECT_NE(out.find("deleted 1 object(s)"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(objects_ / sha256_hex("unnamed old")));
  EXPECT_TRUE(fs::exists(objects_ / sha256_hex("refreshed")));
  EXPECT_TRUE(fs::exists(objects_ / sha256_hex("named")));
  EXPECT_FALSE(fs::exists(objects_ / ".tmp-left-by-a-crash"));
  // --grace 0 takes the fresh one too; the prune is in the log.
  EXPECT_EQ(cli({"prune-objects", "--log", log_.string(), "--grace", "0"}, &out, &err), 0) << err;
  EXPECT_FALSE(fs::exists(objects_ / sha256_hex("refreshed")));
  EXPECT_TRUE(fs::exists(objects_ / sha256_hex("named")));
  std::string log_text = text_of(log_);
  EXPECT_NE(log_text.find("\"deleted\":1,\"deleted_bytes\":9,\"event\":\"prune_objects\",\"grace_s\":0,"),
            std::string::npos)
      << log_text;
  EXPECT_EQ(cli({"verify", "--log", log_.string()}, &out), 0) << out;
}

TEST_F(ObjectStore, VersionIndexGivesThePreviousVersionPerCallerAndName) {
  auto log = AuditLog::open(config(), log_);
  const std::string v1 = "a = 1\nprint(a)\n", v2 = "a = 2\nprint(a)\n";
  log.store_code(v1, "job.py");
  EXPECT_FALSE(log.track_version(std::nullopt, "job.py", v1, "r1"));
  log.store_code(v2, "job.py");
  auto d = log.track_version(std::nullopt, "job.py", v2, "r2");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->run_id, "r1");
  EXPECT_EQ(d->sha256, sha256_hex(v1));
  EXPECT_EQ(d->added, 1u);
  EXPECT_EQ(d->removed, 1u);
  EXPECT_EQ(json(*d), (json{{"run_id", "r1"}, {"sha256", sha256_hex(v1)}, {"added", 1}, {"removed", 1}}));
  // The same code again: a diff of nothing, from the run before.
  d = log.track_version(std::nullopt, "job.py", v2, "r3");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->run_id, "r2");
  EXPECT_EQ(d->added + d->removed, 0u);
  // Another caller, or another name: a first version.
  EXPECT_FALSE(log.track_version(std::string("alice"), "job.py", v2, "r4"));
  EXPECT_FALSE(log.track_version(std::nullopt, "other.py", v2, "r5"));
  EXPECT_EQ(log.track_version(std::string("alice"), "job.py", v1, "r6")->run_id, "r4");
  // The previous version's object is gone: no diff_from, and this version is the latest.
  fs::remove(objects_ / sha256_hex(v1));
  EXPECT_FALSE(log.track_version(std::string("alice"), "job.py", v2, "r7"));
  EXPECT_EQ(log.track_version(std::string("alice"), "job.py", v2, "r8")->run_id, "r7");
  // Without the code store there is nothing to diff.
  auto cfg = config();
  cfg.store_code = false;
  auto nostore = AuditLog::open(cfg, dir_.path() / "b" / "audit.log");
  EXPECT_FALSE(nostore.track_version(std::nullopt, "job.py", v1, "r1"));
  EXPECT_FALSE(nostore.track_version(std::nullopt, "job.py", v2, "r2"));
}

TEST_F(ObjectStore, ShowDiffNeedsTheRunAndBothObjects) {
  {
    auto log = AuditLog::open(config(), log_);
    record_run(log, "run-0", "x = 1\n", "o");
    record_run(log, "run-1", "x = 2\n", "o");
  }
  std::string out, err;
  EXPECT_EQ(cli({"show", "--log", log_.string(), "--diff", "run-1"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("@@ -1 +1 @@\n-x = 1\n+x = 2\n"), std::string::npos) << out;
  EXPECT_EQ(cli({"show", "--log", log_.string(), "--diff", "run-9"}, &out, &err), 1);
  EXPECT_NE(err.find("no run_start record for run run-9"), std::string::npos) << err;
  EXPECT_EQ(cli({"show", "--log", log_.string(), "--diff", "run-0"}, &out, &err), 1);
  EXPECT_NE(err.find("has no diff_from"), std::string::npos) << err;
  fs::remove(objects_ / sha256_hex("x = 1\n"));
  EXPECT_EQ(cli({"show", "--log", log_.string(), "--diff", "run-1"}, &out, &err), 1);
  EXPECT_NE(err.find(sha256_hex("x = 1\n") + " does not exist"), std::string::npos) << err;
  EXPECT_EQ(cli({"show", "--log", log_.string(), "--diff", "run-1", "--run", "run-1"}), 2);
}

}  // namespace
