// The other subcommands, through the real binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "harness.hpp"

using sandboxrun::testing::run_binary;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

TEST(Cli, DoctorReportsEveryCapabilityOnThisHost) {
  auto r = run_binary({"doctor"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* what : {"user namespaces", "seccomp filters", "Landlock", "cgroups", "default image",
                           "trial run: a sandbox ran"})
    EXPECT_NE(r.out.find(what), std::string::npos) << what << " missing from:\n" << r.out;
}

TEST(Cli, VersionIsPrintedAndIsNotAFileName) {
  for (const char* flag : {"--version", "-V"}) {
    auto r = run_binary({flag});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out.rfind("sandboxrun ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find('.'), std::string::npos) << "a version number: " << r.out;
  }
}

TEST(Cli, DoctorSaysWhatIsMissingAndTheFix) {
  TempDir d;
  auto config = write_config(d, "image: /nonexistent/rootfs\n");
  auto r = run_binary({"doctor", "--config", config});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("MISSING  default image"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fix: run `sandboxrun image build-default`"), std::string::npos) << r.out;
}

TEST(Cli, MissingImageIsASetupErrorWithTheFix) {
  TempDir d;
  auto config = write_config(d, "image: /nonexistent/rootfs\n");
  auto r = run_binary({"--config", config, "--audit-log", d.path() + "/audit.log", d.write("x.py", "print(1)\n")});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("/nonexistent/rootfs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sandboxrun image build-default"), std::string::npos) << r.err;
}

TEST(Cli, BadConfigIsASetupErrorNamingFileAndKey) {
  TempDir d;
  auto config = write_config(d, "mem_limit: 1x\n");
  auto r = run_binary({"--config", config, d.write("x.py", "print(1)\n")});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find(config), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'mem_limit'"), std::string::npos) << r.err;
}

TEST(Cli, AssessPrintsJsonWithTheContractFields) {
  TempDir d;
  auto r = run_binary({"assess", "--json", d.write("x.py", "import os\nos.system('ls')\n")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"level", "score", "findings"}) EXPECT_TRUE(j.contains(k)) << k;
  ASSERT_FALSE(j["findings"].empty());
  for (const char* k : {"rule", "severity", "line", "message"}) EXPECT_TRUE(j["findings"][0].contains(k)) << k;
  EXPECT_EQ(run_binary({"assess", "/nonexistent.py"}).exit_code, 127);
}

// --config names a sandbox.yaml (or its directory): one that is not there, or a file beside
// which nothing else is, is reported as what it is, not as a missing security.yaml next to it.
TEST(Cli, ConfigErrorsNameTheSandboxYamlFirst) {
  TempDir d;
  auto r = run_binary({"--config", d.path() + "/nonexistent", d.write("x.py", "print(1)\n")});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("no sandbox.yaml at " + d.path() + "/nonexistent (--config)"), std::string::npos) << r.err;
  std::filesystem::create_directory(d.path() + "/alone");
  const std::string alone = d.write("alone/sandbox.yaml", "mem_limit: 1x\n");  // no security.yaml beside it
  r = run_binary({"--config", alone, d.path() + "/x.py"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("'mem_limit'"), std::string::npos) << "the sandbox.yaml error comes first: " << r.err;
  auto a = run_binary({"assess", "--config", d.path() + "/nonexistent", d.path() + "/x.py"});
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_NE(a.err.find("no sandbox.yaml at "), std::string::npos) << a.err;
  a = run_binary({"assess", "--config", std::string(SANDBOXRUN_SOURCE_DIR) + "/config", d.path() + "/x.py"});
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("LOW"), std::string::npos) << a.out;
}

// Each --input takes one value: `--input a.csv job.py` must not copy job.py as a second input
// and run nothing; a bad number is said in words.
TEST(Cli, RepeatableOptionsTakeOneValueAndNumbersAreCheckedInWords) {
  TempDir d;
  const std::string data = d.write("data.csv", "1,2\n");
  const std::string job = d.write("job.py", "import os, sys\nprint(sorted(os.listdir('/work')), sys.argv[1:])\n");
  auto r = run_binary({"--input", data, "--audit-log", d.path() + "/audit.log", job, "--", "x"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("['data.csv', 'job.py'] ['x']"), std::string::npos) << r.out;
  // `--input data.csv lib job.py`: lib is the FILE (not a second input), and job.py is no
  // argument without `--`: a usage error that says so, before anything is read.
  std::filesystem::create_directory(d.path() + "/lib");
  r = run_binary({"--input", data, d.path() + "/lib", job});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("lib is followed by " + job), std::string::npos) << r.err;
  // Alone, a directory as FILE is still refused as what it is.
  r = run_binary({"--input", data, d.path() + "/lib"});
  EXPECT_EQ(r.exit_code, 127) << r.out << r.err;
  EXPECT_NE(r.err.find("lib is not a regular file"), std::string::npos) << r.err;
  r = run_binary({"--timeout", "abc", job});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sandboxrun: error: --timeout: 'abc' is not seconds"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << r.err;
  r = run_binary({"--cpus", "0", job});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'0' is not CPUs"), std::string::npos) << r.err;
}

// SRC:NAME with a NAME that may not be used is said as such, not as a missing file named
// "data.csv:../x.csv"; a path that really holds a ':' still works.
TEST(Cli, InputNameErrorsNameTheName) {
  TempDir d;
  const std::string data = d.write("data.csv", "1\n");
  const std::string job = d.write("job.py", "import os\nprint(sorted(os.listdir('/work')))\n");
  for (const std::string name : {"../x.csv", "/etc/x", ""}) {
    auto r = run_binary({"--input", data + ":" + name, job});
    EXPECT_EQ(r.exit_code, 125) << name;
    EXPECT_NE(r.err.find("NAME '" + name + "' is not a plain relative path inside /work"), std::string::npos) << r.err;
  }
  const std::string colon = d.write("a:b.csv", "2\n");
  auto r = run_binary({"--input", colon, "--audit-log", d.path() + "/audit.log", job});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("'a:b.csv'"), std::string::npos) << r.out;
}

// A path where nothing was ever logged is a usage error (exit 2), not "DAMAGED"; a log deleted
// from beside its lock file is still damage (exit 1).
TEST(Cli, AuditVerifyTellsAWrongPathFromADeletedLog) {
  TempDir d;
  auto wrong = run_binary({"audit", "verify", "--log", d.path() + "/never.log"});
  EXPECT_EQ(wrong.exit_code, 2) << wrong.out << wrong.err;
  EXPECT_NE(wrong.err.find("no audit log at " + d.path() + "/never.log"), std::string::npos) << wrong.err;
  EXPECT_EQ(wrong.out.find("DAMAGED"), std::string::npos) << wrong.out;
  const std::string log = d.path() + "/audit.log";
  auto run = run_binary({"--audit-log", log, d.write("x.py", "print(1)\n")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::filesystem::remove(log);
  auto deleted = run_binary({"audit", "verify", "--log", log});
  EXPECT_EQ(deleted.exit_code, 1) << deleted.out << deleted.err;
  EXPECT_NE(deleted.out.find("audit log DAMAGED: missing"), std::string::npos) << deleted.out;
}

// --env sets the program's environment over the config's; the audit log names the variables but
// never holds their values (they may be credentials); bad names are usage errors.
TEST(Cli, EnvReachesTheProgramAndOnlyItsNamesAreAudited) {
  TempDir d;
  const std::string log = d.path() + "/audit.log";
  const std::string job = d.write("job.py", "import os\nprint(os.environ['API_TOKEN'], os.environ['LANG'])\n");
  auto r = run_binary({"-e", "API_TOKEN=s3cret-value", "--env", "LANG=en_US.UTF-8", "--audit-log", log, job});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "s3cret-value en_US.UTF-8\n");
  const std::string audit = sandboxrun::testing::read_text(log);
  EXPECT_NE(audit.find("\"env\":[\"API_TOKEN\",\"LANG\"]"), std::string::npos) << audit.substr(0, 2000);
  EXPECT_EQ(audit.find("s3cret-value"), std::string::npos) << "an environment value reached the audit log";
  for (const char* bad : {"1X=2", "A-B=1", "=x", "NOEQ"}) {
    auto b = run_binary({"--env", bad, job});
    EXPECT_EQ(b.exit_code, 2) << bad << ": " << b.err;
  }
}

// The first hour, as a new user meets it: each mistake gets its name and its fix.
TEST(Cli, AMistypedCommandIsAUsageErrorWithTheNearestCommand) {
  auto r = run_binary({"asess", "x.py"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("did you mean 'assess'?"), std::string::npos) << r.err;
  auto help = run_binary({"help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("prune-objects"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("assess [--json] [--config DIR]"), std::string::npos) << help.out;
  EXPECT_NE(run_binary({"image", "--help"}).out.find("build-default"), std::string::npos);
}

TEST(Cli, WordsAfterTheFileNeedTheDoubleDash) {
  TempDir d;
  const std::string a = d.write("a.py", "import sys\nprint(sys.argv[1:])\n"), b = d.write("b.py", "print('b')\n");
  auto r = run_binary({"--audit-log", d.path() + "/audit.log", "--input", a, b, a});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("after --"), std::string::npos) << r.err;
  auto ok = run_binary({"--audit-log", d.path() + "/audit.log", a, "--", "x"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "['x']\n");
}

TEST(Cli, AMissingRequirementsFileIsNamedWithItsOption) {
  TempDir d;
  auto r = run_binary({"--audit-log", d.path() + "/audit.log", "--requirements", d.path() + "/none.txt",
                       d.write("x.py", "print(1)\n")});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("--requirements " + d.path() + "/none.txt"), std::string::npos) << r.err;
}

TEST(Cli, CodeThatCannotCompileIsNotToldToOverride) {
  TempDir d;
  auto r = run_binary({"--audit-log", d.path() + "/audit.log", d.write("x.py", "print('never closed\n")});
  EXPECT_EQ(r.exit_code, 126) << r.err;
  EXPECT_NE(r.err.find("fix the file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--override"), std::string::npos) << r.err;
}

TEST(Cli, AuditShowLastN) {
  TempDir d;
  const std::string log = d.path() + "/audit.log";
  for (int i = 0; i < 3; ++i) ASSERT_EQ(run_binary({"--audit-log", log, d.write("x.py", "print(1)\n")}).exit_code, 0);
  auto r = run_binary({"audit", "show", "--json", "--log", log, "--last", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

TEST(Cli, CtrlCUnderJsonSaysInterrupted) {
  TempDir d;
  const std::string log = d.path() + "/audit.log", out = d.path() + "/out.json";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    const std::string bin = SANDBOXRUN_BIN, script = d.write("s.py", "import time\nprint('started', flush=True)\ntime.sleep(60)\n");
    ::execl(bin.c_str(), bin.c_str(), "--json", "--audit-log", log.c_str(), script.c_str(), nullptr);
    ::_exit(127);
  }
  // Interrupted once the program runs (its run_start is in the log).
  for (int i = 0; i < 300 && sandboxrun::testing::read_text(log).find("run_start") == std::string::npos; ++i)
    ::usleep(20000);
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  const auto j = nlohmann::json::parse(sandboxrun::testing::read_text(out), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << sandboxrun::testing::read_text(out);
  EXPECT_EQ(j.value("status", ""), "error");
  EXPECT_EQ(j.value("error_kind", ""), "interrupted") << j.dump();
  EXPECT_EQ(j.value("exit_code", 0), 128 + SIGINT);
}
