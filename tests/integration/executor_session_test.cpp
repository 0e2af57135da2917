// Sessions through the library (Executor::open_session): one sandbox and one interpreter whose
// cells keep their state, each assessed with the cells before it and audited before it runs; a
// cell past its timeout is interrupted, one that ignores the interrupt or ends the interpreter
// ends the session, and two sessions share nothing.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "session_fixture.hpp"
#include "sandboxrun/executor.hpp"

using sandboxrun::testing::audit_records;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace sandboxrun {
namespace {

using ExecutorSession = sandboxrun::testing::SessionFixture;

std::string plain(const CellResult& c) { return c.output.result ? c.output.result->at("text/plain") : "(none)"; }

TEST_F(ExecutorSession, CellsKeepTheirStateAndAnExceptionEndsOnlyItsCell) {
  Session s = open();
  auto a = s.run({.code = "import os\nx = 41\nprint('pid', os.getpid())\n"});
  ASSERT_EQ(a.status, CellStatus::ok) << a.message << a.output.stderr_data;
  EXPECT_EQ(a.output.stdout_data.rfind("pid ", 0), 0u) << a.output.stdout_data;
  EXPECT_EQ(plain(s.run({.code = "x + 1"})), "42");
  auto e = s.run({.code = "def f():\n    return 1 / 0\nf()\n"});
  EXPECT_EQ(e.status, CellStatus::error);
  ASSERT_TRUE(e.output.error);
  EXPECT_EQ(e.output.error->ename, "ZeroDivisionError");
  EXPECT_EQ(plain(s.run({.code = "x"})), "41") << "the session lives on";
  EXPECT_EQ(plain(s.run({.code = "open('/work/f.txt', 'w').write('kept')\nopen('/work/f.txt').read()"})), "'kept'");
  EXPECT_TRUE(s.alive());
  const RunResult& end = s.close();
  EXPECT_EQ(end.status, RunStatus::exited) << end.error << end.outcome.stderr_data;
  EXPECT_FALSE(s.alive());
  EXPECT_EQ(s.run({.code = "x"}).status, CellStatus::lost) << "a closed session refuses cells";
}

TEST_F(ExecutorSession, EachCellIsAssessedWithTheCellsBeforeIt) {
  // Neither cell alone is more than LOW; together they call os.system through a computed name
  // (HIGH), which a trusted session may not run.
  Session s = open(Trust::trusted);
  auto a = s.run({.code = "import os\nname = 'sys' + 'tem'\n"});
  ASSERT_EQ(a.status, CellStatus::ok) << a.message;
  EXPECT_EQ(a.assessment.level, RiskLevel::low);
  EXPECT_EQ(ex.assess("getattr(os, name)('id')\n").level, RiskLevel::low) << "the second cell alone";
  auto b = s.run({.code = "getattr(os, name)('id')\n"});
  EXPECT_EQ(b.status, CellStatus::blocked) << b.output.stdout_data;
  EXPECT_EQ(b.assessment.level, RiskLevel::high);
  EXPECT_NE(b.message.find("at most trust untrusted"), std::string::npos) << b.message;
  EXPECT_EQ(b.output.stdout_data, "") << "it did not run";
  EXPECT_EQ(plain(s.run({.code = "name"})), "'system'") << "a refused cell is not part of the session's code";
}

TEST_F(ExecutorSession, APastTimeoutCellIsInterruptedAndTheSessionGoesOn) {
  Session s = open();
  s.run({.code = "y = 7\n"});
  auto t = s.run({.code = "import time\nwhile True: time.sleep(0.05)\n", .timeout_s = 1});
  EXPECT_EQ(t.status, CellStatus::timeout) << t.message;
  ASSERT_TRUE(t.output.error);
  EXPECT_EQ(t.output.error->ename, "KeyboardInterrupt");
  EXPECT_EQ(plain(s.run({.code = "y"})), "7");
}

TEST_F(ExecutorSession, ACellThatIgnoresTheInterruptOrEndsTheInterpreterEndsTheSession) {
  Session s = open();
  auto t = s.run({.code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)\n",
                  .timeout_s = 1});
  EXPECT_EQ(t.status, CellStatus::lost) << t.message;
  EXPECT_NE(t.message.find("did not stop when interrupted"), std::string::npos) << t.message;
  EXPECT_FALSE(s.alive());
  EXPECT_NE(s.close().status, RunStatus::exited) << "killed";

  Session s2 = open();
  auto x = s2.run({.code = "import os\nos._exit(3)\n"});
  EXPECT_EQ(x.status, CellStatus::lost) << x.message;
  EXPECT_LT(x.duration.count(), 10000) << "seen when it happens, not at the timeout";
  EXPECT_EQ(s2.close().exit_code, 3);
}

TEST_F(ExecutorSession, TwoSessionsShareNothing) {
  Session a = open(), b = open();
  a.run({.code = "open('/tmp/secret', 'w').write('a')\nopen('/work/secret', 'w').write('a')\n"});
  auto r = b.run({.code = "import os\n(os.path.exists('/tmp/secret'), os.path.exists('/work/secret'))"});
  EXPECT_EQ(plain(r), "(False, False)");
  auto pids = b.run({.code = "sorted(int(p) for p in os.listdir('/proc') if p.isdigit())"});
  EXPECT_EQ(plain(pids), "[1, 2]") << "only its own pid 1 and interpreter";
}

TEST_F(ExecutorSession, EveryCellIsRecordedBeforeItRunsAndTheLogVerifies) {
  std::string id;
  {
    Session s = open();
    id = s.id();
    s.run({.code = "z = 1\nprint('hi')\nz\n"});
    s.run({.code = "1 / 0\n"});
  }
  std::vector<std::string> events;
  for (const auto& j : audit_records(log))
    if (j.value("run_id", "") == id) events.push_back(j.value("event", ""));
  EXPECT_EQ(events, (std::vector<std::string>{"run_start", "cell", "cell_end", "cell", "cell_end", "run_end"}));
  for (const auto& j : audit_records(log)) {
    if (j.value("event", "") == "run_start") {
      EXPECT_EQ(j.value("session", false), true);
    }
    if (j.value("event", "") == "cell" && j.value("cell", 0) == 2) {
      EXPECT_EQ(j.at("code").value("name", ""), "<cell 2>");
      EXPECT_EQ(j.value("level", ""), "LOW");
    }
    if (j.value("event", "") == "cell_end" && j.value("cell", 0) == 1) {
      // The outputs manifest: what came back, measured by the host, not the bytes.
      const auto outputs = j.at("outputs");
      ASSERT_EQ(outputs.size(), 2u) << outputs.dump();
      EXPECT_EQ(outputs[0].value("kind", ""), "stdout");
      EXPECT_EQ(outputs[0].value("size", 0), 3);
      EXPECT_EQ(outputs[0].value("sha256", ""), "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4");
      EXPECT_EQ(outputs[1].value("kind", ""), "result");
      EXPECT_EQ(outputs[1].value("mime", ""), "text/plain");
      EXPECT_EQ(outputs[1].value("sha256", ""), "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b");
    }
    if (j.value("event", "") == "cell_end" && j.value("cell", 0) == 2) {
      EXPECT_EQ(j.value("ename", ""), "ZeroDivisionError");
      EXPECT_TRUE(j.at("outputs").empty()) << "the traceback is the error, not output";
    }
  }
  EXPECT_EQ(sandboxrun::testing::run_binary({"audit", "verify", "--log", log}).exit_code, 0);
}

}  // namespace
}  // namespace sandboxrun

namespace sandboxrun {
namespace {

// sandbox.yaml's sessions: how many are open at once, per caller, and how long one may idle.
TEST(ExecutorSessionLimits, OpenSessionsAreCountedPerCallerAndAnIdleOneIsClosed) {
  TempDir d;
  Executor ex = Executor::open(
      {.config = write_config(d, "sessions: {max: 2, max_per_caller: 1, idle_timeout: 1}\n"),
       .audit_log = d.path() + "/audit.log"});
  SessionRequest alice{.caller = "alice"}, bob{.caller = "bob"};
  Session a = ex.open_session(alice);
  try {
    ex.open_session(alice);
    ADD_FAILURE() << "a second session for alice";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::limits);
    EXPECT_NE(std::string(e.what()).find("sessions.max_per_caller"), std::string::npos) << e.what();
  }
  Session b = ex.open_session(bob);
  try {
    ex.open_session({.caller = "carol"});
    ADD_FAILURE() << "a third session";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sessions.max "), std::string::npos) << e.what();
  }
  b.close();
  Session c = ex.open_session({.caller = "carol"});  // bob's place is free again
  EXPECT_EQ(c.run({.code = "1 + 1"}).status, CellStatus::ok);
  // a has been idle for over a second by now.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto late = a.run({.code = "1 + 1"});
  EXPECT_EQ(late.status, CellStatus::lost);
  EXPECT_NE(late.message.find("without a cell"), std::string::npos) << late.message;
  EXPECT_FALSE(a.alive());
  EXPECT_NE(a.close().status, RunStatus::exited) << "killed when it went idle, not ended by the close";
}

}  // namespace
}  // namespace sandboxrun
