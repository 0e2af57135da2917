// audit.yaml parsing: defaults, the shipped file, strict errors naming file, key and expectation.
#include <gtest/gtest.h>
#include <unistd.h>


#include "sandboxrun/audit.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"

namespace sandboxrun {
namespace {

namespace fs = std::filesystem;

class AuditConfigTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& text) { return tmp_.write("audit.yaml", text); }
  // The Error message for `text`, or "" when it loads.
  std::string error_for(const std::string& text) {
    try {
      load_audit_config(write(text));
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }
  test_util::TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
};

TEST_F(AuditConfigTest, MissingFileGivesDefaults) {
  AuditConfig c = load_audit_config(dir_ / "absent.yaml");
  EXPECT_TRUE(c.path.empty());
  EXPECT_EQ(c.sync, AuditSync::batch);
  EXPECT_EQ(c.checkpoint_every, 64u);
  EXPECT_TRUE(c.key_file.empty());
}

TEST_F(AuditConfigTest, ShippedFileLoads) {
  AuditConfig c = load_audit_config(fs::path(SANDBOXRUN_SOURCE_DIR) / "config" / "audit.yaml");
  EXPECT_EQ(c.sync, AuditSync::batch);
  EXPECT_EQ(c.sync_batch, 64u);
  EXPECT_EQ(c.rotate_max_bytes, 64ull << 20);
  EXPECT_TRUE(c.store_code);
  EXPECT_TRUE(c.store_files);
}

TEST_F(AuditConfigTest, ParsesEveryKey) {
  AuditConfig c = load_audit_config(write(R"(
path: logs/audit.log
sync: each
sync_batch: 8
key_file: /etc/sandboxrun/audit.key
store_code: false
store_files: false
checkpoint: {every: 10, anchor: /var/lib/anchor, syslog: true, stream: stdout}
rotation: {max_size: 1m, max_age: 7d, keep_files: 3, keep_age: 2w}
)"));
  EXPECT_EQ(c.path, dir_ / "logs/audit.log");  // relative to the file
  EXPECT_EQ(c.sync, AuditSync::each);
  EXPECT_EQ(c.sync_batch, 8u);
  EXPECT_EQ(c.key_file, "/etc/sandboxrun/audit.key");
  EXPECT_FALSE(c.store_code);
  EXPECT_FALSE(c.store_files);
  EXPECT_EQ(c.checkpoint_every, 10u);
  EXPECT_EQ(c.anchor, "/var/lib/anchor");
  EXPECT_TRUE(c.syslog);
  EXPECT_EQ(c.stream, CheckpointStream::out);
  EXPECT_EQ(c.rotate_max_bytes, 1u << 20);
  EXPECT_EQ(c.rotate_max_age, std::chrono::hours(24 * 7));
  EXPECT_EQ(c.keep_files, 3u);
  EXPECT_EQ(c.keep_age, std::chrono::hours(24 * 14));
}

TEST_F(AuditConfigTest, ErrorsNameFileKeyAndExpectation) {
  std::string file = (dir_ / "audit.yaml").string();
  std::string e = error_for("sink: each\n");
  EXPECT_NE(e.find(file + ":1"), std::string::npos) << e;
  EXPECT_NE(e.find("'sink'"), std::string::npos) << e;
  EXPECT_NE(e.find("one of the known keys"), std::string::npos) << e;
  e = error_for("sync: sometimes\n");
  EXPECT_NE(e.find("'sync'"), std::string::npos) << e;
  EXPECT_NE(e.find("each, batch or none"), std::string::npos) << e;
  EXPECT_NE(e.find("'sometimes'"), std::string::npos) << e;
  e = error_for("checkpoint:\n  every: -1\n");
  EXPECT_NE(e.find("'checkpoint.every'"), std::string::npos) << e;
  e = error_for("checkpoint:\n  evry: 1\n");
  EXPECT_NE(e.find("'checkpoint.evry'"), std::string::npos) << e;
  e = error_for("checkpoint:\n  stream: syslog\n");
  EXPECT_NE(e.find("'checkpoint.stream'"), std::string::npos) << e;
  EXPECT_NE(e.find("none, stdout or stderr"), std::string::npos) << e;
  e = error_for("rotation:\n  max_age: 3 days\n");
  EXPECT_NE(e.find("'rotation.max_age'"), std::string::npos) << e;
  e = error_for("rotation:\n  max_size: 100\n");
  EXPECT_NE(e.find("at least 4k"), std::string::npos) << e;
  e = error_for("store_code: yes please\n");
  EXPECT_NE(e.find("true or false"), std::string::npos) << e;
  e = error_for("rotation: 5\n");
  EXPECT_NE(e.find("a mapping"), std::string::npos) << e;
  e = error_for("sync: [each\n");
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
  EXPECT_EQ(error_for(""), "");
}

TEST_F(AuditConfigTest, DefaultLocation) {
  if (::geteuid() == 0) {
    EXPECT_EQ(default_audit_log_path(), "/var/log/sandboxrun/audit.log");
  } else {
    ::setenv("XDG_STATE_HOME", "/x/state", 1);
    EXPECT_EQ(default_audit_log_path(), "/x/state/sandboxrun/audit.log");
  }
}

TEST_F(AuditConfigTest, AKeyGivenTwiceIsRefused) {
  const std::string e = error_for("sync: each\nstore_code: true\nsync: none\n");
  EXPECT_NE(e.find("audit.yaml:3: key 'sync' is given twice (first at line 1)"), std::string::npos) << e;
  const std::string typo = error_for("sync_bach: 8\n");
  EXPECT_NE(typo.find("did you mean 'sync_batch'?"), std::string::npos) << typo;
}

}  // namespace
}  // namespace sandboxrun
