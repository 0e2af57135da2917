// The audit log writer's view of the file (lock header and generation, size checks, the path
// looked at again) and the record bytes its serializer writes.

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
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"
#include "audit_test_util.hpp"

namespace audit_test {
namespace {

using nlohmann::json;
using sandboxrun::AuditLog;

using test_util::slurp;
using test_util::TempDir;

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

}  // namespace
}  // namespace audit_test
