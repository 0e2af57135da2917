// The session driver (src/session/driver.py) under the host's python3, spoken to through the
// host's protocol code as a session speaks to it in a sandbox: state kept across cells, the
// cell's own output (C-level and child processes' too), trailing values, exceptions that leave
// the session alive, display items, limits, and a driver that a cell rewrote.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <map>
#include <string>

#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "session/protocol.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using namespace sandboxrun::session;

namespace {

class Driver {
 public:
  explicit Driver(std::map<std::string, std::string> env = {}) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw_errno("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      const std::string driver = std::string(SANDBOXRUN_SOURCE_DIR) + "/src/session/driver.py";
      ::execl("/usr/bin/python3", "python3", "-I", driver.c_str(), nullptr);
      ::_exit(127);
    }
    to_.reset(in[1]);
    from_.reset(out[0]);
    ::close(in[0]);
    ::close(out[1]);
    if (auto it = env.find("SANDBOXRUN_SESSION_OUTPUT_LIMIT"); it != env.end())
      limits_.output_bytes = std::stoull(it->second);
    EXPECT_EQ(await(0).status, "ok") << "the driver says it is ready";
  }
  ~Driver() {
    to_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

  // Sends cell `code` and waits (up to 20 s) for its reply.
  CellOutput run(const std::string& code) {
    const uint64_t id = ++id_;
    const std::string frame = encode_run(id, code);
    if (!write_all(to_.get(), frame.data(), frame.size())) throw_errno("write to the driver");
    return await(id);
  }

 private:
  CellOutput await(uint64_t id) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      if (auto body = reader_.next()) return parse_reply(*body, id, limits_);
      pollfd p{from_.get(), POLLIN, 0};
      if (std::chrono::steady_clock::now() > deadline || ::poll(&p, 1, 1000) < 0) throw Error("no reply in time");
      if (!(p.revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      const ssize_t n = ::read(from_.get(), buf, sizeof buf);
      if (n <= 0) throw Error("the driver ended");
      reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }

  pid_t pid_ = -1;
  UniqueFd to_, from_;
  uint64_t id_ = 0;
  ReplyLimits limits_;
  FrameReader reader_{limits_.max_frame()};
};

std::string plain(const CellOutput& c) { return c.result ? c.result->at("text/plain") : "(no result)"; }

}  // namespace

TEST(SessionDriver, CellsShareTheirStateAndTheLastExpressionIsTheResult) {
  Driver d;
  auto a = d.run("import json\nx = 41\n");
  EXPECT_EQ(a.status, "ok");
  EXPECT_FALSE(a.result);
  auto b = d.run("def inc(v):\n    return v + 1\ninc(x)\n");
  EXPECT_EQ(plain(b), "42");
  EXPECT_EQ(plain(d.run("json.dumps({'k': _})")), "'{\"k\": 42}'") << "_ is the last result";
  EXPECT_EQ(plain(d.run("x = 5")), "(no result)") << "an assignment shows nothing";
}

TEST(SessionDriver, TheCellsOutputIncludesWhatCAndChildProcessesWrite) {
  Driver d;
  auto c = d.run("import os, subprocess, sys\nprint('a')\nos.write(1, b'b\\n')\n"
                 "subprocess.run(['echo', 'c'])\nprint('e', file=sys.stderr)\nos.write(2, b'f\\n')\n");
  EXPECT_EQ(c.status, "ok");
  EXPECT_EQ(c.stdout_data, "a\nb\nc\n");
  EXPECT_EQ(c.stderr_data, "e\nf\n");
  EXPECT_EQ(d.run("print('next')").stdout_data, "next\n") << "each cell has its own output";
}

TEST(SessionDriver, AnExceptionEndsTheCellNotTheSession) {
  Driver d;
  d.run("y = 3\n");
  auto e = d.run("def f():\n    return 1 / 0\nf()\n");
  EXPECT_EQ(e.status, "error");
  ASSERT_TRUE(e.error);
  EXPECT_EQ(e.error->ename, "ZeroDivisionError");
  EXPECT_EQ(e.error->evalue, "division by zero");
  std::string tb;
  for (const auto& l : e.error->traceback) tb += l;
  EXPECT_NE(tb.find("File \"<cell 2>\", line 2, in f"), std::string::npos) << tb;
  EXPECT_NE(tb.find("return 1 / 0"), std::string::npos) << "the cell's source line: " << tb;
  EXPECT_EQ(tb.find("driver.py"), std::string::npos) << "no frame of the driver: " << tb;
  auto s = d.run("x = (\n");
  EXPECT_EQ(s.error->ename, "SyntaxError");
  auto q = d.run("raise SystemExit(3)\n");
  EXPECT_EQ(q.error->ename, "SystemExit");
  EXPECT_EQ(plain(d.run("y")), "3") << "the session lives on";
}

TEST(SessionDriver, DisplayShowsMimeBundlesInOrder) {
  Driver d;
  auto c = d.run(
      "class T:\n"
      "    def __repr__(self): return 'T()'\n"
      "    def _repr_html_(self): return '<b>t</b>'\n"
      "    def _repr_png_(self): return b'\\x89PNG'\n"
      "    def _repr_json_(self): return {'a': 1}\n"
      "class Broken:\n"
      "    def _repr_html_(self): raise ValueError('no')\n"
      "display('first')\ndisplay(T())\ndisplay(Broken())\nT()\n");
  ASSERT_EQ(c.display.size(), 3u);
  EXPECT_EQ(c.display[0].at("text/plain"), "'first'");
  EXPECT_EQ(c.display[1].at("text/html"), "<b>t</b>");
  EXPECT_EQ(c.display[1].at("image/png"), "iVBORw==");
  EXPECT_EQ(c.display[1].at("application/json"), "{\"a\": 1}");
  EXPECT_EQ(c.display[2].count("text/html"), 0u) << "a failing _repr_ is left out";
  ASSERT_TRUE(c.result);
  EXPECT_EQ(c.result->at("text/html"), "<b>t</b>");
}

TEST(SessionDriver, OutputAndDisplayAreBoundedPerCell) {
  Driver d({{"SANDBOXRUN_SESSION_OUTPUT_LIMIT", "100"}, {"SANDBOXRUN_SESSION_DISPLAY_ITEMS", "3"}});
  auto c = d.run("print('x' * 1000)\nfor i in range(10): display(i)\n");
  EXPECT_EQ(c.stdout_data, std::string(100, 'x'));
  EXPECT_TRUE(c.stdout_truncated);
  EXPECT_EQ(c.display.size(), 3u);
  EXPECT_NE(c.stderr_data.find("7 display items"), std::string::npos) << c.stderr_data;
}

TEST(SessionDriver, AnInterruptEndsTheCellWithKeyboardInterrupt) {
  Driver d;
  d.run("z = 1\n");
  // The interrupt goes once the cell says it runs (a file it makes), not after a guessed delay:
  // between cells the driver ignores SIGINT by design.
  test_util::TempDir t;
  const std::string started = t.path() / "started";
  std::thread interrupt([&] {
    for (int i = 0; i < 2000 && !std::filesystem::exists(started); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(d.pid(), SIGINT);
  });
  auto c = d.run("import time\nopen('" + started + "', 'w').close()\nfor _ in range(200): time.sleep(0.1)\n");
  interrupt.join();
  ASSERT_TRUE(c.error);
  EXPECT_EQ(c.error->ename, "KeyboardInterrupt");
  EXPECT_EQ(plain(d.run("z")), "1") << "the state is kept";
}

TEST(SessionDriver, ADriverTheCellRewroteIsRefused) {
  Driver d;
  // The cell replaces the driver's reply: the host refuses it whole, whatever it claims.
  d.run("import __main__\n"
        "__main__.run_cell = lambda req, ns: {'id': req['id'], 'status': 'ok', 'stdout': 'x' * (2 << 20),"
        " 'stderr': '', 'stdout_truncated': False, 'stderr_truncated': False, 'result': None,"
        " 'display': [], 'error': None}\n");
  EXPECT_THROW(d.run("1"), Error);
}
