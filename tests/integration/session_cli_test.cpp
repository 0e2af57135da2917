// `sandboxrun session start|run|put|get|files|ls|stop`: a session kept by a holder process
// between commands, reached through a unix socket that only its owner and root may use.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.hpp"

using sandboxrun::testing::eventually;
using sandboxrun::testing::Exec;
using sandboxrun::testing::run_binary;
using sandboxrun::testing::run_program;
using sandboxrun::testing::TempDir;

namespace {

// Ended: gone, or a zombie (reaping it is up to this host's pid 1, the holder's parent).
bool ended(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  const auto paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && stat.compare(paren + 2, 1, "Z") == 0);
}

struct SessionCli : ::testing::Test {
  TempDir d;
  std::string dir = d.path() + "/sessions";
  std::vector<std::string> env = {"SANDBOXRUN_SESSIONS_DIR=" + dir};
  std::string log = d.path() + "/audit.log";

  Exec session(std::vector<std::string> args, int as_uid = -1) {
    args.insert(args.begin(), "session");
    return run_binary(args, env, as_uid);
  }
  // A cell from a file.
  Exec cell(const std::string& id, const std::string& code, std::vector<std::string> extra = {}) {
    const std::string f = d.write("cell.py", code);
    std::vector<std::string> args = {"run", id, f};
    args.insert(args.end(), extra.begin(), extra.end());
    return session(args);
  }
  std::string start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"start", "--audit-log", log};
    if (extra.empty()) extra = {"--idle-timeout", "120"};
    args.insert(args.end(), extra.begin(), extra.end());
    Exec r = session(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    if (const auto nl = id.rfind('\n'); nl != std::string::npos) id = id.substr(nl + 1);
    EXPECT_EQ(id.size(), 32u) << "the id alone on stdout's last line: " << r.out;
    return id;
  }
  ~SessionCli() override {
    // A failed test leaves no holder behind.
    Exec ls = session({"ls", "--json"});
    auto j = nlohmann::json::parse(ls.out, nullptr, false);
    if (j.is_array())
      for (const auto& s : j) session({"stop", s.value("session_id", "")});
  }
};

TEST_F(SessionCli, CellsFilesAndStopThroughTheHolder) {
  const std::string id = start();
  EXPECT_EQ(cell(id, "x = 41\nprint('hi')\n").out, "hi\n");
  Exec j = cell(id, "x + 1\n", {"--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto c = nlohmann::json::parse(j.out);
  EXPECT_EQ(c.value("status", ""), "ok");
  EXPECT_EQ(c["result"].value("text/plain", ""), "42");
  for (const char* k : {"stdout", "stderr", "display", "error", "assessment", "resources", "audit_seq", "duration_ms"})
    EXPECT_TRUE(c.contains(k)) << k;
  // A prefix of the id is enough; exit statuses as a run's.
  EXPECT_EQ(cell(id.substr(0, 8), "1 / 0\n").exit_code, 1);
  EXPECT_EQ(cell(id, "import time\nwhile True: time.sleep(0.05)\n", {"--timeout", "1"}).exit_code, 124);
  EXPECT_EQ(cell(id, "x\n").out, "41\n") << "state kept across the interrupt";

  const std::string local = d.write("in.csv", "a,b\n1,2\n");
  EXPECT_EQ(session({"put", id, local, "data/in.csv"}).exit_code, 0);
  EXPECT_EQ(cell(id, "import sys\nopen('/work/data/in.csv').read().upper() + sys.stdin.read()\n",
                 {"--stdin", local}).out, "'A,B\\n1,2\\na,b\\n1,2\\n'\n");
  Exec got = session({"get", id, "data/in.csv", "-"});
  EXPECT_EQ(got.out, "a,b\n1,2\n") << got.err;
  EXPECT_NE(session({"files", id}).out.find("file\t8\tdata/in.csv"), std::string::npos);

  Exec ls = session({"ls", "--json"});
  const auto listed = nlohmann::json::parse(ls.out);
  ASSERT_EQ(listed.size(), 1u) << ls.out;
  EXPECT_EQ(listed[0].value("session_id", ""), id);
  EXPECT_EQ(listed[0].value("cells", 0), 6);
  const int holder = listed[0].value("pid", 0);
  // What an idle session costs: its sandbox's cgroup (an interpreter: megabytes) and its holder.
  EXPECT_GT(listed[0].value("memory_bytes", uint64_t{0}), uint64_t{1} << 20) << ls.out;
  EXPECT_GT(listed[0].value("holder_pss_bytes", uint64_t{0}), uint64_t{0}) << ls.out;
  EXPECT_NE(session({"ls"}).out.find("MiB"), std::string::npos);

  Exec stop = session({"stop", id, "--json"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(nlohmann::json::parse(stop.out).value("status", ""), "exited");
  EXPECT_TRUE(eventually([&] { return ended(holder); }, std::chrono::seconds(10))) << "the holder ended";
  EXPECT_EQ(session({"ls", "--json"}).out, "[]\n");
  Exec gone = cell(id, "1\n");
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("no session"), std::string::npos) << gone.err;

  Exec shown = run_binary({"audit", "show", "--session", id, "--log", log});
  EXPECT_NE(shown.out.find("KeyboardInterrupt"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("put"), std::string::npos) << shown.out;
  Exec diff = run_binary({"audit", "show", "--session", id, "--diff", "1..2", "--log", log});
  EXPECT_NE(diff.out.find("-x = 41"), std::string::npos) << diff.out << diff.err;
  EXPECT_NE(diff.out.find("+x + 1"), std::string::npos) << diff.out;
  EXPECT_EQ(run_binary({"audit", "verify", "--log", log}).exit_code, 0);
}

// The directory is 0700 already; the holder checks the peer's credentials too, for a directory
// someone opened up (SANDBOXRUN_SESSIONS_DIR shared by mistake).
TEST_F(SessionCli, OnlyTheOwnerAndRootMayUseASession) {
  const std::string id = start();
  ::chmod(d.path().c_str(), 0755);
  ::chmod(dir.c_str(), 0755);
  ::chmod((dir + "/" + id + ".sock").c_str(), 0777);
  const std::string probe = d.write("probe.py",
                                    "import json, socket, struct, sys\n"
                                    "s = socket.socket(socket.AF_UNIX)\ns.settimeout(10)\ns.connect(sys.argv[1])\n"
                                    "body = json.dumps({'op': 'run', 'code': 'print(1)'}).encode()\n"
                                    "try:\n    s.sendall(struct.pack('>I', len(body)) + body)\n"
                                    "except BrokenPipeError:\n    pass  # the holder may have answered and closed\n"
                                    "n = struct.unpack('>I', s.recv(4))[0]\nprint(s.recv(n).decode())\n");
  ::chmod(probe.c_str(), 0644);
  Exec other = run_program("/usr/bin/python3", {probe, dir + "/" + id + ".sock"}, {}, 1000);
  EXPECT_NE(other.out.find("only the session's owner and root"), std::string::npos) << other.out << other.err;
  EXPECT_EQ(other.out.find("\"status\""), std::string::npos) << "no cell ran: " << other.out;
  ::chmod(dir.c_str(), 0700);
}

// A holder that dies takes its sandbox with it; its socket is swept by the next `session ls`.
TEST_F(SessionCli, AHolderKilledTakesItsSandboxAlongAndIsSwept) {
  const std::string id = start();
  const auto listed = nlohmann::json::parse(session({"ls", "--json"}).out);
  ASSERT_EQ(listed.size(), 1u);
  const int holder = listed[0].value("pid", 0);
  ASSERT_EQ(cell(id, "import time\n").exit_code, 0);
  // The sandbox's processes, seen from the host: the holder's descendants.
  std::vector<int> descendants;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(holder) + "/task")) {
    std::ifstream f(task.path() / "children");
    for (int p; f >> p;) descendants.push_back(p);
  }
  ASSERT_FALSE(descendants.empty());
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  EXPECT_TRUE(eventually([&] {
    for (int p : descendants)
      if (!ended(p)) return false;
    return true;
  }, std::chrono::seconds(10))) << "the sandbox died with its holder";
  EXPECT_TRUE(eventually([&] { return ended(holder); }, std::chrono::seconds(10)));
  EXPECT_EQ(session({"ls", "--json"}).out, "[]\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + id + ".sock")) << "swept";
}

TEST_F(SessionCli, AnIdleSessionEndsWithItsHolder) {
  const std::string id = start({"--idle-timeout", "1"});
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(dir + "/" + id + ".sock"); }, std::chrono::seconds(5)));
  EXPECT_EQ(session({"ls", "--json"}).out, "[]\n");
}

// A cell cannot see the sessions directory, the holder or another session.
TEST_F(SessionCli, ACellCannotReachAnotherSession) {
  const std::string a = start(), b = start();
  cell(b, "secret = 'b'\nopen('/work/b.txt', 'w').write('b')\n");
  Exec probe = cell(a, "import os, glob\n"
                       "print(os.path.exists('" + dir + "'), glob.glob('/run/sandboxrun/sessions*'), glob.glob('/run/**/*.sock', recursive=True) + glob.glob('/tmp/**/*.sock', recursive=True),"
                       " os.path.exists('/work/b.txt'), 'secret' in globals())\n");
  EXPECT_EQ(probe.out, "False [] [] False False\n") << probe.err;
}

// Every holder has an Executor of its own: sessions.max and max_per_caller count the directory.
TEST_F(SessionCli, SessionLimitsCountTheSessionsInTheDirectory) {
  const std::string cfg = sandboxrun::testing::write_config(d, "sessions: {max: 5, max_per_caller: 1}\n");
  start({"--config", cfg, "--caller", "alice", "--idle-timeout", "60"});
  Exec again = session({"start", "--config", cfg, "--caller", "alice", "--audit-log", log});
  EXPECT_EQ(again.exit_code, 125);
  EXPECT_NE(again.err.find("sessions.max_per_caller"), std::string::npos) << again.err;
  start({"--config", cfg, "--caller", "bob", "--idle-timeout", "60"});
}

// --input as a run's: in /work before the first cell, and part of the session's code.
TEST_F(SessionCli, InputsAreThereBeforeTheFirstCell) {
  const std::string mod = d.write("m.py", "def hi():\n    return 'hi from an input'\n");
  const std::string id = start({"-I", mod + ":lib/m.py", "--idle-timeout", "60"});
  EXPECT_EQ(cell(id, "import sys\nsys.path.insert(0, 'lib')\nimport m\nm.hi()\n").out, "'hi from an input'\n");
}

TEST_F(SessionCli, UsageErrorsSayWhat) {
  Exec none = session({"run", "0123456789abcdef", "-"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("session ls"), std::string::npos) << none.err;
  EXPECT_EQ(session({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(session({"start", "--trust", "sideways"}).exit_code, 2);
}

}  // namespace
