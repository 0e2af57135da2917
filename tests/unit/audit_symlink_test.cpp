// The audit log is often written by root at a path given on the command line (--audit-log
// DIR/a.log), in a directory another user may control. Every file it writes or reads back (log,
// lock, anchor, code objects, rotated files, key) must not be reached through a symlink or a
// planted hard link, and a directory others can write is refused (safe_open.hpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "sandboxrun/audit.hpp"
#include "sandboxrun/error.hpp"
#include "common/safe_open.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using sandboxrun::AuditConfig;
using sandboxrun::AuditLog;
using sandboxrun::Error;
using test_util::slurp;
using test_util::TempDir;
using testing::HasSubstr;

constexpr uid_t kNobody = 65534;

class AuditSymlinks : public testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "plants files as other users: needs root";
    victim_ = tmp_.write("victim", "precious\n", 0644);
    victim_dir_ = tmp_ / "victim-dir";
    fs::create_directory(victim_dir_);
    // A sticky, world-writable directory owned by root, like /tmp: allowed, but anyone may
    // plant names in it.
    dir_ = tmp_ / "shared";
    fs::create_directory(dir_);
    ::chmod(dir_.c_str(), 01777);
    cfg_.checkpoint_every = 0;
  }

  // Runs `act`, which must throw an Error containing `message`, and checks nothing outside was
  // touched.
  void expect_refused(const std::function<void()>& act, const std::string& message) {
    try {
      act();
      ADD_FAILURE() << "not refused; expected: " << message;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
    EXPECT_EQ(slurp(victim_), "precious\n") << "the victim file was written";
    EXPECT_TRUE(fs::is_empty(victim_dir_)) << "something was written into the victim directory";
  }

  void append(AuditLog& log) { log.append("assessment", "run1", {{"level", "LOW"}, {"score", 0}}); }

  TempDir tmp_;
  fs::path victim_, victim_dir_, dir_;
  AuditConfig cfg_;
};

TEST_F(AuditSymlinks, DirectoryOwnedByAnotherUserIsRefused) {
  // The reported case: DIR belongs to another user who made DIR/a.log.lock a symlink.
  const fs::path dir = tmp_ / "theirs";
  fs::create_directory(dir);
  ASSERT_EQ(::chown(dir.c_str(), kNobody, kNobody), 0);
  fs::create_symlink(victim_, dir / "a.log.lock");
  expect_refused([&] { AuditLog::open(cfg_, dir / "a.log"); },
                 "directory " + dir.string() + " is owned by uid 65534, not by root or you");
}

TEST_F(AuditSymlinks, GroupWritableDirectoryIsRefused) {
  const fs::path dir = tmp_ / "group";
  fs::create_directory(dir);
  ASSERT_EQ(::chown(dir.c_str(), 0, 100), 0);
  ::chmod(dir.c_str(), 0775);
  expect_refused([&] { AuditLog::open(cfg_, dir / "a.log"); },
                 "directory " + dir.string() + " is writable by group 100 (mode 0775) and not sticky");
  EXPECT_FALSE(fs::exists(dir / "a.log"));
}

TEST_F(AuditSymlinks, SymlinkedDirectoryOnThePathIsRefused) {
  fs::create_directory_symlink(victim_dir_, tmp_ / "link");
  expect_refused([&] { AuditLog::open(cfg_, tmp_ / "link" / "a.log"); },
                 (tmp_ / "link").string() + " is a symlink; refusing to follow it");
}

// The same checks for every directory above the last one (open_trusted_dir answers most opens
// with one openat2 and a stat of each directory above: that path must refuse what the walk does).
TEST_F(AuditSymlinks, DirectoriesAboveTheLastAreCheckedToo) {
  const fs::path group = tmp_ / "group-above", theirs = tmp_ / "theirs-above";
  for (const auto& d : {group, theirs}) fs::create_directories(d / "inner" / "deeper");
  ASSERT_EQ(::chown(group.c_str(), 0, 100), 0);
  ::chmod(group.c_str(), 0775);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  expect_refused([&] { AuditLog::open(cfg_, group / "inner" / "deeper" / "a.log"); },
                 "directory " + group.string() + " is writable by group 100 (mode 0775) and not sticky");
  expect_refused([&] { AuditLog::open(cfg_, theirs / "inner" / "deeper" / "a.log"); },
                 "directory " + theirs.string() + " is owned by uid 65534, not by root or you");
  const fs::path target = tmp_ / "target";
  fs::create_directories(target / "inner");
  fs::create_directory_symlink(target, tmp_ / "link-above");
  expect_refused([&] { sandboxrun::open_trusted_dir(tmp_ / "link-above" / "inner"); },
                 (tmp_ / "link-above").string() + " is a symlink; refusing to follow it");
  // A sticky, world-writable directory above (as /tmp) is allowed, as it is last.
  fs::create_directories(dir_ / "mine" / "inner");
  EXPECT_TRUE(sandboxrun::open_trusted_dir(dir_ / "mine" / "inner"));
}

TEST_F(AuditSymlinks, PlantedLockFile) {
  fs::create_symlink(victim_, dir_ / "a.log.lock");
  expect_refused([&] { AuditLog::open(cfg_, dir_ / "a.log"); },
                 (dir_ / "a.log.lock").string() + " is a symlink; refusing to follow it");
}

TEST_F(AuditSymlinks, PlantedHardLinkToTheLockFile) {
  fs::create_hard_link(victim_, dir_ / "a.log.lock");
  expect_refused([&] { AuditLog::open(cfg_, dir_ / "a.log"); }, (dir_ / "a.log.lock").string() + " has 2 hard links");
}

TEST_F(AuditSymlinks, PlantedLogFile) {
  fs::create_symlink(victim_, dir_ / "a.log");
  expect_refused([&] { AuditLog::open(cfg_, dir_ / "a.log"); },
                 (dir_ / "a.log").string() + " is a symlink; refusing to follow it");
}

TEST_F(AuditSymlinks, PlantedAnchor) {
  cfg_.checkpoint_every = 1;
  fs::create_symlink(victim_, dir_ / "a.log.anchor");
  auto log = AuditLog::open(cfg_, dir_ / "a.log");
  expect_refused([&] { append(log); }, (dir_ / "a.log.anchor").string() + " is a symlink; refusing to follow it");
}

TEST_F(AuditSymlinks, PlantedRotatedFile) {
  // An empty log chains to the newest rotated file, which is read back.
  fs::create_symlink(victim_, dir_ / "a.log.7");
  auto log = AuditLog::open(cfg_, dir_ / "a.log");
  expect_refused([&] { append(log); }, (dir_ / "a.log.7").string() + " is a symlink; refusing to follow it");
}

TEST_F(AuditSymlinks, PlantedObjectsDirectory) {
  // The submitted code would be written as root wherever the link points.
  fs::create_directory_symlink(victim_dir_, dir_ / "objects");
  auto log = AuditLog::open(cfg_, dir_ / "a.log");
  expect_refused([&] { log.store_code("print('secret')\n", "job.py"); },
                 (dir_ / "objects").string() + " is a symlink; refusing to follow it");
}

TEST_F(AuditSymlinks, KeyFileThroughASymlinkedDirectory) {
  const fs::path real = tmp_ / "keys";
  fs::create_directory(real);
  test_util::put(real / "k", std::string(32, 'k'), 0600);
  fs::create_directory_symlink(real, tmp_ / "keylink");
  expect_refused([&] { sandboxrun::load_audit_key(tmp_ / "keylink" / "k"); },
                 (tmp_ / "keylink").string() + " is a symlink; refusing to follow it");
  EXPECT_EQ(sandboxrun::load_audit_key(real / "k"), std::string(32, 'k'));
}

TEST_F(AuditSymlinks, TheOrdinaryCaseStillWorks) {
  cfg_.checkpoint_every = 1;
  auto log = AuditLog::open(cfg_, dir_ / "a.log");
  append(log);
  log.store_code("print(1)\n", "job.py");
  EXPECT_TRUE(fs::is_regular_file(dir_ / "a.log"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "a.log.anchor"));
  EXPECT_EQ(fs::status(dir_ / "objects").permissions() & fs::perms::all, fs::perms::owner_all);
  // A new directory (and its parents) is created through the same checks.
  auto nested = AuditLog::open(cfg_, tmp_ / "new" / "sub" / "a.log");
  append(nested);
  EXPECT_TRUE(fs::is_regular_file(tmp_ / "new" / "sub" / "a.log"));
}

}  // namespace
