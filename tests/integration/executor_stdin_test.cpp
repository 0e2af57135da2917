// RunRequest::stdin_data: a library caller's bytes as the program's stdin, streamed through a
// pipe by the monitor loop, whatever the program does with them.
#include <gtest/gtest.h>

#include <string>

#include "harness.hpp"
#include "sandboxrun/executor.hpp"
#include "common/sha256.hpp"

using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace sandboxrun {
namespace {

// 3 MiB that are not all alike, so a dropped or repeated chunk changes the digest.
std::string big_input() {
  std::string s;
  s.reserve(3u << 20);
  for (uint32_t i = 0; s.size() < (3u << 20); ++i) s += std::to_string(i * 2654435761u) + (i % 7 ? ',' : '\n');
  return s;
}

struct ExecutorStdin : ::testing::Test {
  TempDir d;
  Executor ex = Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log"});
  RunResult run(const std::string& code, std::optional<std::string> data) {
    RunRequest req;
    req.code = code;
    req.trust = Trust::trusted;
    req.limits.timeout_s = 30;  // a deadlock shows as a timeout, not a hung test
    req.stdin_data = std::move(data);
    return ex.run(req);
  }
};

TEST_F(ExecutorStdin, MegabytesArriveIntactThenEof) {
  const std::string data = big_input();
  RunResult r = run("import sys, hashlib\nb = sys.stdin.buffer.read()\nprint(len(b), hashlib.sha256(b).hexdigest())\n", data);
  ASSERT_EQ(r.status, RunStatus::exited) << r.error << r.outcome.stderr_data;
  EXPECT_EQ(r.exit_code, 0) << r.outcome.stderr_data;
  EXPECT_EQ(r.outcome.stdout_data, std::to_string(data.size()) + " " + sha256_hex(data) + "\n");
}

TEST_F(ExecutorStdin, AProgramThatReadsNothingOrLittleEndsNormally) {
  const std::string data = big_input();
  RunResult r = run("print('ignored')\n", data);
  EXPECT_EQ(r.status, RunStatus::exited) << r.error;
  EXPECT_EQ(r.exit_code, 0) << r.outcome.stderr_data;
  EXPECT_EQ(r.outcome.stdout_data, "ignored\n");
  EXPECT_LT(r.outcome.duration.count(), 10000) << "the run must not wait for the bytes to be read";

  r = run("import os, sys\nsys.stdout.write(os.read(0, 5).decode()); sys.stdout.flush(); os.close(0)\n"
          "import time; time.sleep(0.2)\nprint()\n", data);
  EXPECT_EQ(r.status, RunStatus::exited) << r.error;
  EXPECT_EQ(r.exit_code, 0) << r.outcome.stderr_data;
  EXPECT_EQ(r.outcome.stdout_data, data.substr(0, 5) + "\n");
}

TEST_F(ExecutorStdin, EmptyDataIsAnImmediateEofAndNoneIsDevNull) {
  RunResult r = run("import sys\nprint(repr(sys.stdin.read()))\n", std::string());
  EXPECT_EQ(r.status, RunStatus::exited) << r.error;
  EXPECT_EQ(r.outcome.stdout_data, "''\n");
  r = run("import os\nprint(os.path.realpath('/proc/self/fd/0'))\n", std::nullopt);
  EXPECT_EQ(r.outcome.stdout_data, "/dev/null\n") << r.outcome.stderr_data;
}

TEST_F(ExecutorStdin, BothAnFdAndBytesIsAUsageError) {
  RunRequest req;
  req.code = "print(1)\n";
  req.stdin_fd = 0;
  req.stdin_data = "x";
  RunResult r = ex.run(req);
  EXPECT_EQ(r.exit_code, exit_code::usage);
  EXPECT_NE(r.error.find("stdin_fd and stdin_data"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace sandboxrun
