// The other subcommands, through the real binary.
#include <gtest/gtest.h>

#include "harness.hpp"

using sandboxrun::testing::run_binary;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

TEST(Cli, DoctorReportsEveryCapabilityOnThisHost) {
  auto r = run_binary({"doctor"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* what : {"user namespaces", "seccomp filters", "Landlock", "cgroups", "default image"})
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
