// What the code tried: calls the profile denies reach the launcher (seccomp user notification),
// which answers EPERM and reports them, bounded, in the result, the audit log and on stderr.
#include <gtest/gtest.h>

#include <chrono>

#include "harness.hpp"

using sandboxrun::testing::run_binary;
using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;

namespace {

// The file is assessed first; these probes are meant to look hostile.
const std::vector<std::string> kOverride = {"--override", "probing the seccomp report"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Denied, DeniedCallsAreAnsweredEpermAndReportedWithNameCountAndArguments) {
  TempDir d;
  auto r = run_python(R"(
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
out = []
for i in range(3):
    out.append((libc.syscall(321, 7 + i, 8, 9), errno.errorcode[ctypes.get_errno()]))  # bpf
print(out)
)", with(kOverride, {"--audit-log", d.path() + "/audit.log"}));
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.err << r.result.dump();
  EXPECT_EQ(r.stdout_text(), "[(-1, 'EPERM'), (-1, 'EPERM'), (-1, 'EPERM')]\n");
  const auto& denied = r.result["denied"];
  ASSERT_TRUE(denied.is_object()) << r.result.dump();
  ASSERT_EQ(denied["syscalls"].size(), 1u) << denied;
  EXPECT_EQ(denied["syscalls"][0]["name"], "bpf");
  EXPECT_EQ(denied["syscalls"][0]["count"], 3);
  EXPECT_EQ(denied["syscalls"][0]["first_args"], nlohmann::json::parse("[[7,8,9],[8,8,9],[9,8,9]]"));
  std::string audit = sandboxrun::testing::read_text(d.path() + "/audit.log");
  size_t records = 0;
  for (size_t at = audit.find("\"event\":\"denied\""); at != std::string::npos;
       at = audit.find("\"event\":\"denied\"", at + 1))
    ++records;
  EXPECT_EQ(records, 1u) << "one denied record per run";
  EXPECT_NE(audit.find("\"name\":\"bpf\""), std::string::npos);
}

TEST(Denied, AFloodIsBoundedInMemoryAndStillAnswered) {
  const auto started = std::chrono::steady_clock::now();
  auto r = run_python(R"(
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for i in range(2000):
    libc.syscall(321, i, 0, 0)
for nr in range(1000, 1080):  # 80 numbers no kernel has: denied by default, 80 distinct names
    libc.syscall(nr)
print('done')
)", kOverride);
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.err << r.result.dump();
  EXPECT_EQ(r.stdout_text(), "done\n");
  const auto& denied = r.result["denied"];
  ASSERT_TRUE(denied.is_object()) << r.result.dump();
  EXPECT_EQ(denied["syscalls"].size(), 64u) << "names are bounded";
  EXPECT_EQ(denied["syscalls"][0]["count"], 2000);
  EXPECT_EQ(denied["syscalls"][0]["first_args"].size(), 3u) << "details are bounded";
  EXPECT_EQ(denied.value("syscalls_other_count", 0), 80 - 63);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

TEST(Denied, KillActionsStayKillsAndAreReportedAsSuch) {
  auto r = run_python(R"(
import ctypes, os, pty, termios
libc = ctypes.CDLL(None, use_errno=True)
m, s = pty.openpty()
libc.ioctl(s, ctypes.c_ulong(termios.TIOCSTI), ctypes.c_char_p(b'x'))
print('survived')
)", kOverride);
  EXPECT_EQ(r.result.value("status", ""), "signaled") << r.result.dump();
  EXPECT_EQ(r.result.value("signal", 0), 31);
  EXPECT_EQ(r.stdout_text(), "");
  EXPECT_EQ(r.result["denied"]["killed"]["signal"], "SIGSYS") << r.result.dump();
}

TEST(Denied, StreamingModePrintsOneSummaryLineOnStderr) {
  TempDir d;
  const std::string file = d.write("job.py", "import ctypes\nctypes.CDLL(None).syscall(321, 0, 0, 0)\nprint('ok')\n");
  auto r = run_binary(with(kOverride, {file}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  EXPECT_NE(r.err.find("denied: syscalls bpf x1 (EPERM)"), std::string::npos) << r.err;
}

}  // namespace
