// Exit statuses, timeouts, output bounds and clean-up: the run contract of the README.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.hpp"

using sandboxrun::testing::run_binary;
using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace {


// Host processes whose command line contains `marker`.
int processes_with(const std::string& marker) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = sandboxrun::testing::read_text(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(marker) != std::string::npos) ++n;
  }
  return n;
}


}  // namespace

TEST(Lifecycle, ExitCodeIsTheProgramsOwn) {
  auto r = run_python("import sys\nprint('out'); print('err', file=sys.stderr)\nsys.exit(3)\n");
  EXPECT_EQ(r.exec.exit_code, 3);
  EXPECT_EQ(r.result["status"], "exited");
  EXPECT_EQ(r.result["exit_code"], 3);
  EXPECT_EQ(r.result["stdout"], "out\n");
  EXPECT_EQ(r.result["stderr"], "err\n");
  for (const char* k : {"run_id", "duration_ms", "resources", "limits", "trust", "assessment", "audit_seq",
                        "stdout_truncated", "stderr_truncated"})
    EXPECT_TRUE(r.result.contains(k)) << k;
}

TEST(Lifecycle, KilledBySignalIs128PlusN) {
  auto r = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n");
  EXPECT_EQ(r.exec.exit_code, 137);
  EXPECT_EQ(r.result["status"], "signaled");
  EXPECT_EQ(r.result["signal"], 9);
}

TEST(Lifecycle, StreamsOutputWithoutJson) {
  TempDir d;
  auto file = d.write("s.py", "import sys\nprint('hello stdout')\nprint('hello stderr', file=sys.stderr)\n");
  auto r = run_binary({file});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "hello stdout\n");
  EXPECT_NE(r.err.find("hello stderr"), std::string::npos);
}

TEST(Lifecycle, TimeoutKillsAPayloadThatIgnoresSignals) {
  auto start = std::chrono::steady_clock::now();
  auto r = run_python("import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
                      "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n",
                      {"--timeout", "1"});
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exec.exit_code, 124);
  EXPECT_EQ(r.result["status"], "timeout");
  EXPECT_LT(secs, 10);
}

// Signals ignored or blocked by whoever started sandboxrun (nohup, a shell's background job, a
// service) stay so across execve: the program must still start with every disposition at its
// default and no signal blocked.
TEST(Lifecycle, SignalsIgnoredByTheCallerAreDefaultsInside) {
  const int ignored[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGTERM, SIGPIPE};
  for (int s : ignored) ::signal(s, SIG_IGN);
  sigset_t blocked, old;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR2);
  sigaddset(&blocked, SIGALRM);
  ::sigprocmask(SIG_BLOCK, &blocked, &old);
  auto r = run_python("import signal\n"
                      "for s in ('SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGTERM'):\n"
                      "    print(s, signal.getsignal(getattr(signal, s)) == signal.SIG_DFL)\n"
                      "print('SIGINT', signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
                      "def mask(key):\n"
                      "    v = int([l for l in open('/proc/self/status') if l.startswith(key)][0].split()[1], 16)\n"
                      "    return [n for n in range(1, 65) if v >> (n - 1) & 1]\n"
                      "print('ignored', mask('SigIgn:'))\n"
                      "print('blocked', mask('SigBlk:'))\n");
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  for (int s : ignored) ::signal(s, SIG_DFL);
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.err;
  // python3 itself ignores SIGPIPE (13) and SIGXFSZ (25) at start; nothing else may be.
  EXPECT_EQ(r.stdout_text(),
            "SIGHUP True\nSIGQUIT True\nSIGUSR1 True\nSIGTERM True\nSIGINT True\nignored [13, 25]\nblocked []\n");
}

TEST(Lifecycle, TimeoutKillsAStoppedPayload) {
  auto r = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n", {"--timeout", "1"});
  EXPECT_EQ(r.exec.exit_code, 124);
  EXPECT_EQ(r.result["status"], "timeout");
}

TEST(Lifecycle, TimeoutKillsForkedAndDoubleForkedChildren) {
  const std::string marker = "sandboxrun-lifecycle-marker-" + std::to_string(getpid());
  auto r = run_python("import os, time, subprocess\n"
                      "subprocess.Popen(['python3', '-c', 'import time; time.sleep(600)', '" + marker + "'],\n"
                      "                 start_new_session=True)\n"
                      "if os.fork() == 0:\n"
                      "    if os.fork() == 0:\n"
                      "        os.setsid(); os.execvp('python3', ['python3', '-c', 'import time; time.sleep(600)', '" +
                          marker + "'])\n"
                      "    os._exit(0)\n"
                      "time.sleep(600)\n",
                      {"--timeout", "1"});
  EXPECT_EQ(r.result["status"], "timeout") << r.exec.err;
  EXPECT_EQ(processes_with(marker), 0);
}

TEST(Lifecycle, BackgroundChildrenDieWithTheProgram) {
  const std::string marker = "sandboxrun-orphan-marker-" + std::to_string(getpid());
  auto r = run_python("import subprocess\nsubprocess.Popen(['python3', '-c', 'import time; time.sleep(600)', '" +
                      marker + "'], start_new_session=True)\nprint('main done')\n");
  EXPECT_EQ(r.result["status"], "exited");
  EXPECT_EQ(processes_with(marker), 0);
}

TEST(Lifecycle, OutputFloodIsBoundedAndFlagged) {
  auto r = run_python("import sys\nchunk = 'x' * 65536\nfor _ in range(1600):\n    sys.stdout.write(chunk)\n"
                      "sys.stderr.write('e' * 10)\n");
  EXPECT_EQ(r.result["status"], "exited");
  EXPECT_EQ(r.result["stdout_truncated"], true);
  EXPECT_EQ(r.result["stdout"].get<std::string>().size(), r.result["limits"]["output_limit_bytes"].get<size_t>());
  EXPECT_EQ(r.result["stderr_truncated"], false);
  EXPECT_EQ(r.result["stderr"], "eeeeeeeeee");
}

TEST(Lifecycle, MissingOrUnreadableFileIs127) {
  auto r = run_binary({"/nonexistent/job.py"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("/nonexistent/job.py"), std::string::npos) << r.err;
  TempDir d;
  auto target = d.write("real.py", "print(1)\n");
  std::filesystem::create_symlink(target, d.path() + "/link.py");
  auto l = run_binary({d.path() + "/link.py"});
  EXPECT_EQ(l.exit_code, 127) << "a symlinked script must not be followed";
  auto dir = run_binary({d.path()});
  EXPECT_EQ(dir.exit_code, 127);
  mkfifo((d.path() + "/fifo.py").c_str(), 0600);
  auto fifo = run_binary({d.path() + "/fifo.py"});
  EXPECT_EQ(fifo.exit_code, 127) << "a FIFO must neither hang nor run";
}

TEST(Lifecycle, UsageErrorsAreExit2) {
  EXPECT_EQ(run_binary({"--trust", "bogus", "x.py"}).exit_code, 2);
  EXPECT_EQ(run_binary({"--memory", "1x", "x.py"}).exit_code, 2);
  EXPECT_EQ(run_binary({}).exit_code, 2);
}

TEST(Lifecycle, NothingIsLeftBehind) {
  const auto mounts_before = sandboxrun::testing::mounts_of_interest();
  // The launcher's temp files go to a private TMPDIR (Bandit is on for one run so there is a
  // temp copy to clean up). Not /tmp: other tests running beside this one (Bandit's, the Python
  // package's) come and go there; scripts/test.sh checks /tmp once the whole suite is done.
  TempDir d;
  std::string tmp = d.path() + "/tmp";
  std::filesystem::create_directory(tmp);
  std::vector<std::string> env{"TMPDIR=" + tmp};
  auto bandit_config = write_config(d, "", "bandit:\n  enabled: true\n  command: bandit\n  timeout: 60\n");
  std::vector<std::string> run_ids;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> extra;
    if (i == 0) extra = {"--config", bandit_config, "--audit-log", d.path() + "/audit.log"};
    auto r = run_python("import os\nopen('/tmp/x', 'w').write('y')\nos.makedirs('/tmp/a/b')\n", extra, env);
    EXPECT_EQ(r.result["status"], "exited") << r.exec.err;
    run_ids.push_back(r.result.value("run_id", "?"));
  }
  auto t = run_python("while True: pass\n", {"--timeout", "0.5"}, env);
  EXPECT_EQ(t.result["status"], "timeout");
  run_ids.push_back(t.result.value("run_id", "?"));
  EXPECT_EQ(sandboxrun::testing::mounts_of_interest(), mounts_before);
  for (const auto& id : run_ids) {
    EXPECT_EQ(id.size(), 32u);
    EXPECT_EQ(sandboxrun::testing::cgroups_named(id), 0u) << "cgroup of run " << id << " survived";
  }
  for (const auto& e : std::filesystem::directory_iterator(tmp)) ADD_FAILURE() << "left behind: " << e.path();
}

TEST(Lifecycle, KillingTheLauncherKillsTheSandbox) {
  const std::string marker = "sandboxrun-sigkill-marker-" + std::to_string(getpid());
  TempDir d;
  auto file = d.write("s.py", "import time, subprocess\nsubprocess.Popen(['python3', '-c', 'import time; "
                              "time.sleep(600)', '" + marker + "'])\ntime.sleep(600)\n");
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(SANDBOXRUN_BIN, SANDBOXRUN_BIN, file.c_str(), nullptr);
    _exit(99);
  }
  ASSERT_TRUE(sandboxrun::testing::eventually([&] { return processes_with(marker) > 0; })) << "the payload never started";
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_TRUE(sandboxrun::testing::eventually([&] { return processes_with(marker) == 0; }))
      << processes_with(marker) << " of the payload's processes outlived the launcher";
}

TEST(Lifecycle, ResultSaysWhereTheLaunchersTimeWent) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_python("print('hi')\n");
  double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.result["status"], "exited") << r.exec.err;
  const auto& t = r.result["timings_ms"];
  ASSERT_TRUE(t.is_object()) << r.exec.out;
  double sum = 0;
  for (const char* phase : {"prepare", "cgroup", "spawn", "run", "teardown"}) {
    ASSERT_TRUE(t.contains(phase) && t[phase].is_number()) << phase << " missing: " << t;
    EXPECT_GE(t[phase].get<double>(), 0.0) << phase;
    sum += t[phase].get<double>();
  }
  // Every phase that happened is measured, and together they fit inside the process's life.
  for (const char* phase : {"prepare", "spawn", "run"}) EXPECT_GT(t[phase].get<double>(), 0.0) << phase << ": " << t;
  if (r.result["cgroup"] != "none (degraded)") {
    EXPECT_GT(t["cgroup"].get<double>(), 0.0) << t;
  }
  EXPECT_LE(sum, wall_ms) << t;
}

// A CLI run compiles (or loads from the cache) the seccomp program of the trust level it runs at,
// not every level's: each is a profile read, hashed and decoded, work a start does not need.
TEST(Lifecycle, ASingleRunCompilesOnlyTheSeccompProfileItUses) {
  TempDir d;
  const std::string cache = d.path() + "/cache";
  auto programs = [&] {
    size_t n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(cache + "/seccomp", ec))
      if (e.path().extension() == ".bpf") ++n;
    return n;
  };
  auto r = run_python("print('u')\n", {"--trust", "untrusted"}, {"SANDBOXRUN_CACHE_DIR=" + cache});
  ASSERT_EQ(r.stdout_text(), "u\n") << r.exec.err;
  EXPECT_EQ(programs(), 1u) << "an untrusted run compiled other levels' programs too";
  auto t = run_python("print('t')\n", {"--trust", "trusted"}, {"SANDBOXRUN_CACHE_DIR=" + cache});
  ASSERT_EQ(t.stdout_text(), "t\n") << t.exec.err;
  EXPECT_EQ(programs(), 2u) << "a trusted run (config/sandbox.yaml: the default profile) added its own";
}
