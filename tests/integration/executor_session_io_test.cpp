// What goes in and out of a session besides cells (Session::put_file/get_file/list_files, a
// cell's stdin), and what a hostile cell can do to the way out: floods of output and display
// items are cut, a driver the cell rewrote loses the session instead of fooling the host.
#include <gtest/gtest.h>

#include <string>

#include "session_fixture.hpp"
#include "sandboxrun/executor.hpp"

using sandboxrun::testing::audit_records;

namespace sandboxrun {
namespace {

using SessionIo = sandboxrun::testing::SessionFixture;

std::string plain(const CellResult& c) { return c.output.result ? c.output.result->at("text/plain") : "(none)"; }

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no Error";
  return ErrorKind::other;
}

TEST_F(SessionIo, FilesGoInAndComeOutOfWorkAndAreAudited) {
  Session s = open();
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  const FilePut put = s.put_file("data/in.bin", bytes);
  EXPECT_FALSE(put.refused);
  EXPECT_EQ(put.file.size, 256u);
  EXPECT_FALSE(put.assessment) << "only .py files are assessed";
  EXPECT_EQ(plain(s.run({.code = "d = open('/work/data/in.bin', 'rb').read()\nlen(d), d == bytes(range(256))"})),
            "(256, True)");
  s.run({.code = "open('/work/out.bin', 'wb').write(d[::-1])\n"});
  EXPECT_EQ(s.get_file("out.bin"), std::string(bytes.rbegin(), bytes.rend()));
  std::vector<std::string> listed;
  for (const auto& f : s.list_files()) listed.push_back(f.type + " " + f.path);
  EXPECT_NE(std::find(listed.begin(), listed.end(), "dir data"), listed.end());
  EXPECT_NE(std::find(listed.begin(), listed.end(), "file data/in.bin"), listed.end());
  EXPECT_NE(std::find(listed.begin(), listed.end(), "file out.bin"), listed.end());

  // A missing file is the sandbox's answer, not a lost session; bad paths never reach it.
  EXPECT_EQ(kind_of([&] { s.get_file("nope.txt"); }), ErrorKind::other);
  for (const char* bad : {"../etc/passwd", "/etc/passwd", "a//b", "a/./b", "", "x\ny"})
    EXPECT_EQ(kind_of([&] { s.put_file(bad, "x"); }), ErrorKind::usage) << bad;
  // A symlink the cell planted is followed inside the sandbox only: /etc/passwd is the image's.
  s.run({.code = "import os\nos.symlink('/etc/hostname', '/work/link')\n"});
  EXPECT_EQ(kind_of([&] { s.get_file("link"); }), ErrorKind::other) << "O_NOFOLLOW on the last part";
  EXPECT_TRUE(s.alive());

  bool put_seen = false, get_seen = false;
  for (const auto& j : audit_records(log)) {
    if (j.value("run_id", "") != s.id()) continue;
    if (j.value("event", "") == "file_put") put_seen = j["file"].value("path", "") == "data/in.bin" &&
                                                       j["file"].value("size", 0) == 256;
    if (j.value("event", "") == "file_get") get_seen = j["file"].value("path", "") == "out.bin" &&
                                                       j["file"].value("sha256", "").size() == 64;
  }
  EXPECT_TRUE(put_seen);
  EXPECT_TRUE(get_seen);
}

// A .py file is code a later `import` runs: it is judged with the session's code, as a cell.
TEST_F(SessionIo, APythonFilePutIsAssessedWithTheSessionsCode) {
  Session s = open(Trust::trusted);
  ASSERT_EQ(s.run({.code = "import os\nname = 'sys' + 'tem'\n"}).status, CellStatus::ok);
  const FilePut bad = s.put_file("helper.py", "import os\ndef go():\n    return getattr(os, name)('id')\n");
  EXPECT_TRUE(bad.refused) << bad.message;
  ASSERT_TRUE(bad.assessment);
  EXPECT_EQ(bad.assessment->level, RiskLevel::high);
  for (const auto& f : s.list_files()) EXPECT_NE(f.path, "helper.py") << "a refused file is not written";
  const FilePut ok = s.put_file("util.py", "def double(x):\n    return 2 * x\n");
  EXPECT_FALSE(ok.refused) << ok.message;
  EXPECT_EQ(plain(s.run({.code = "import util\nutil.double(21)"})), "42");
}

TEST_F(SessionIo, ACellReadsItsOwnStdinAndTheNextOneGetsEof) {
  Session s = open();
  EXPECT_EQ(plain(s.run({.code = "import sys\nsys.stdin.read()", .stdin_data = "a\nb\n"})), "'a\\nb\\n'");
  EXPECT_EQ(plain(s.run({.code = "input()", .stdin_data = "typed\n"})), "'typed'");
  EXPECT_EQ(plain(s.run({.code = "sys.stdin.read()"})), "''");
}

TEST_F(SessionIo, FloodsOfOutputAndDisplayItemsAreCutAndTheSessionGoesOn) {
  Session s = open();
  auto out = s.run({.code = "import os, sys\nsys.stdout.write('x' * (5 << 20))\nos.write(2, b'y' * (3 << 20))\n"});
  ASSERT_EQ(out.status, CellStatus::ok) << out.message;
  EXPECT_TRUE(out.output.stdout_truncated);
  EXPECT_TRUE(out.output.stderr_truncated);
  EXPECT_LE(out.output.stdout_data.size(), 1u << 20);
  auto shown = s.run({.code = "class O:\n    def _repr_html_(self):\n        return '<b>' + 'z' * 1000 + '</b>'\n"
                              "for _ in range(5000):\n    display(O())\n"});
  ASSERT_EQ(shown.status, CellStatus::ok) << shown.message;
  EXPECT_EQ(shown.output.display.size(), 100u) << "display items past the limit are dropped";
  EXPECT_NE(shown.output.stderr_data.find("4900 display items"), std::string::npos) << shown.output.stderr_data;
  EXPECT_EQ(plain(s.run({.code = "1 + 1"})), "2");
}

// The driver lives in the sandbox: a cell may replace it. Whatever it then sends is checked by
// the host, and a reply out of protocol ends the session with a clear message.
TEST_F(SessionIo, ACellThatRewritesTheDriverLosesTheSessionAndFoolsNothing) {
  Session s = open();
  // Overwriting the driver's file changes nothing: it was read when the session started.
  s.run({.code = "open('/work/session.py', 'w').write('raise SystemExit(1)\\n')\n"});
  EXPECT_EQ(plain(s.run({.code = "6 * 7"})), "42");
  // Replacing its code in memory does: this reply claims a status the protocol has no room for.
  auto swap = s.run({.code = "import sys\ndrv = sys.modules['__main__']\n"
                             "drv.run_cell = lambda req, ns: {'id': req['id'], 'status': 'root', 'stdout': '',"
                             " 'stderr': '', 'stdout_truncated': False, 'stderr_truncated': False, 'result': None,"
                             " 'display': [], 'error': None}\n"});
  ASSERT_EQ(swap.status, CellStatus::ok) << swap.message;
  auto after = s.run({.code = "1"});
  EXPECT_EQ(after.status, CellStatus::lost);
  EXPECT_NE(after.message.find("malformed reply"), std::string::npos) << after.message;
  EXPECT_FALSE(s.alive());
  EXPECT_EQ(s.run({.code = "1"}).status, CellStatus::lost);
  EXPECT_EQ(kind_of([&] { s.get_file("session.py"); }), ErrorKind::host);

  // A frame of its own on the reply fd ahead of the real one: the host takes the first as the
  // reply and the second, to the wrong cell, loses the session at the next cell.
  Session t = open();
  auto forged = t.run({.code = "import json, struct, gc, io\n"
                               "fd = [f.fileno() for f in gc.get_objects() if isinstance(f, io.FileIO)"
                               " and f.mode == 'wb' and f.fileno() > 2][0]\n"
                               "body = json.dumps({'id': 1, 'status': 'ok', 'stdout': 'forged', 'stderr': '',"
                               " 'stdout_truncated': False, 'stderr_truncated': False, 'result': None,"
                               " 'display': [], 'error': None}).encode()\n"
                               "import os\nos.write(fd, struct.pack('>I', len(body)) + body)\n"});
  EXPECT_EQ(forged.output.stdout_data, "forged") << "the cell's own words, reported as its output: data only";
  EXPECT_EQ(t.run({.code = "2"}).status, CellStatus::lost) << "the real reply to cell 1 is out of turn";
}

// A BLOCKED cell runs only with an override reason the policy accepts (audited); a cell that
// the kernel OOM-kills ends the session, which says so from the cgroup's count.
TEST_F(SessionIo, ABlockedCellRunsOnlyWithAnOverrideAndAnOomKillIsToldAsSuch) {
  SessionRequest req;
  req.trust = Trust::untrusted;
  req.limits.memory_bytes = 64u << 20;
  req.lifetime_s = 120;
  Session s = ex.open_session(req);
  const std::string bomb = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n";
  auto refused = s.run({.code = bomb});
  EXPECT_EQ(refused.status, CellStatus::blocked);
  EXPECT_EQ(refused.assessment.level, RiskLevel::blocked);
  auto token = s.run({.code = bomb, .override_reason = "ok"});
  EXPECT_EQ(token.status, CellStatus::blocked) << "a reason the policy refuses";
  EXPECT_NE(token.message.find("override refused"), std::string::npos) << token.message;
  auto oom = s.run({.code = bomb, .override_reason = "tests the memory limit of a session"});
  EXPECT_EQ(oom.status, CellStatus::lost) << oom.message;
  EXPECT_NE(oom.message.find("out of memory"), std::string::npos) << oom.message;
  ASSERT_TRUE(oom.resources);
  EXPECT_GE(oom.resources->oom_kills, 1u);
  EXPECT_FALSE(s.alive());
  bool overridden = false;
  for (const auto& j : audit_records(log))
    if (j.value("run_id", "") == s.id() && j.value("event", "") == "cell" && j.value("cell", 0) == 3)
      overridden = j.value("override_reason", "") == "tests the memory limit of a session" && !j.value("refused", true);
  EXPECT_TRUE(overridden) << "the override is in the cell's record";
}

}  // namespace
}  // namespace sandboxrun
