// The installed product: `cmake --install` into a temporary prefix, the source tree's config and
// policies hidden, and everything run from the installed copy with its config copied elsewhere.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "harness.hpp"

using sandboxrun::testing::read_text;
using sandboxrun::testing::run_program;
using sandboxrun::testing::source_dir;
using sandboxrun::testing::TempDir;

namespace fs = std::filesystem;

namespace {

const std::string kBuildDir = fs::path(SANDBOXRUN_BIN).parent_path().string();

// Installs once per process into a prefix under `dir`.
std::string install_into(const TempDir& dir) {
  const std::string prefix = dir.path() + "/prefix";
  auto r = run_program(SANDBOXRUN_CMAKE, {"--install", kBuildDir, "--prefix", prefix});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return prefix;
}

// Hides the source tree's config/, policies/, scripts/ and python/ behind empty tmpfs mounts in a mount
// namespace private to this test process, for the lifetime of the object: whatever the installed
// copy needs must come from the prefix.
class HiddenSourceData {
 public:
  HiddenSourceData() {
    static const bool private_ns = ::unshare(CLONE_NEWNS) == 0 &&
                                   ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    EXPECT_TRUE(private_ns) << std::strerror(errno);
    for (const char* sub : {"/config", "/policies", "/scripts", "/python"}) {
      const std::string dir = source_dir() + sub;
      if (private_ns && ::mount("tmpfs", dir.c_str(), "tmpfs", MS_RDONLY, "size=4k") == 0) hidden_.push_back(dir);
      else ADD_FAILURE() << "cannot hide " << dir << ": " << std::strerror(errno);
    }
  }
  ~HiddenSourceData() {
    for (const auto& dir : hidden_) ::umount2(dir.c_str(), MNT_DETACH);
  }
  HiddenSourceData(const HiddenSourceData&) = delete;
  HiddenSourceData& operator=(const HiddenSourceData&) = delete;

 private:
  std::vector<std::string> hidden_;
};

TEST(Install, TheInstalledCopyWorksFromAnotherPrefixWithTheCheckoutOutOfReach) {
  TempDir d;
  const std::string prefix = install_into(d);
  for (const char* f : {"bin/sandboxrun", "lib/libsandboxrun.a", "include/sandboxrun/executor.hpp",
                        "lib/pkgconfig/sandboxrun.pc", "lib/cmake/sandboxrun/sandboxrunConfig.cmake",
                        "share/sandboxrun/policies/untrusted.json", "share/sandboxrun/policies/assess-rules.yaml",
                        "share/sandboxrun/build-image.sh", "share/man/man1/sandboxrun.1",
                        "etc/sandboxrun/sandbox.yaml", "etc/sandboxrun/security.yaml", "etc/sandboxrun/audit.yaml",
                        "share/doc/sandboxrun/examples/example-runner.service"})
    EXPECT_TRUE(fs::exists(prefix + "/" + f)) << "not installed: " << f;
  // A copy of the installed configuration in a directory of its own: its relative paths
  // (policies/...) resolve in the installed data directory.
  const std::string conf = d.path() + "/elsewhere";
  fs::create_directory(conf);
  for (const char* f : {"sandbox.yaml", "security.yaml", "audit.yaml"})
    fs::copy_file(prefix + "/etc/sandboxrun/" + f, conf + "/" + f);
  const std::string hello = d.write("hello.py", read_text(source_dir() + "/examples/hello.py"));
  const std::string bin = prefix + "/bin/sandboxrun";
  HiddenSourceData hidden;
  // Images: the checkout's store, named explicitly (the installed store is empty).
  const std::vector<std::string> env{"SANDBOXRUN_IMAGE_STORE=" + source_dir()};
  const std::string log = d.path() + "/audit.log";

  auto run = run_program(bin, {"--config", conf, "--audit-log", log, "--trust", "untrusted", hello}, env);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("sandbox"), std::string::npos) << run.out;
  auto doctor = run_program(bin, {"doctor", "--config", conf}, env);
  EXPECT_NE(doctor.out.find(conf + "/sandbox.yaml"), std::string::npos) << doctor.out << doctor.err;
  EXPECT_EQ(doctor.out.find("no rules file"), std::string::npos) << doctor.out;
  auto assess = run_program(bin, {"assess", "--json", "--config-dir", conf, hello}, env);
  EXPECT_EQ(assess.exit_code, 0) << assess.out << assess.err;
  EXPECT_NE(assess.out.find("\"level\""), std::string::npos) << assess.out;
  auto verify = run_program(bin, {"audit", "verify", "--log", log}, env);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  // With no --config at all, the installed prefix's own etc/sandboxrun is used.
  auto own = run_program(bin, {"--audit-log", log, hello}, env);
  EXPECT_EQ(own.exit_code, 0) << own.out << own.err;
  // A missing image says where it looked and how to build one.
  auto noimg = run_program(bin, {"--config", conf, "--audit-log", log, hello}, {"SANDBOXRUN_IMAGE_STORE=" + d.path()});
  EXPECT_EQ(noimg.exit_code, 125);
  EXPECT_NE(noimg.err.find("image build-default"), std::string::npos) << noimg.err;
}

// The Python package imported from the install tree (PYTHONPATH, as README says for a prefix
// other than /usr) finds the installed binary by itself and runs a job through it.
TEST(Install, ThePythonPackageFromThePrefixRunsTheInstalledBinary) {
  TempDir d;
  const std::string prefix = install_into(d);
  const std::string site = prefix + "/lib/python3/dist-packages";
  for (const char* f : {"sandboxrun/__init__.py", "sandboxrun/compat.py"})
    EXPECT_TRUE(fs::exists(site + "/" + f)) << "not installed: " << f;
  EXPECT_FALSE(fs::exists(site + "/sandboxrun/__pycache__"));
  const std::string log = d.path() + "/audit.log";
  const std::string script = d.write("client.py", R"(import json, sys, sandboxrun
sb = sandboxrun.Sandbox(audit_log=sys.argv[1])
r = sb.run('import sys\nprint(6 * 7, sys.stdin.read())\n', stdin=b'in')
print(json.dumps({'module': sandboxrun.__file__, 'binary': sb.binary, 'stdout': r.stdout, 'exit': r.exit_code}))
)");
  HiddenSourceData hidden;
  // No SANDBOXRUN_BIN, and PATH holds no sandboxrun: the package must find P/bin/sandboxrun.
  auto r = run_program("/usr/bin/python3", {script, log},
                       {"PYTHONPATH=" + site, "PYTHONDONTWRITEBYTECODE=1", "SANDBOXRUN_IMAGE_STORE=" + source_dir()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
  EXPECT_EQ(j["module"], site + "/sandboxrun/__init__.py");
  EXPECT_EQ(j["binary"], prefix + "/bin/sandboxrun");
  EXPECT_EQ(j["stdout"], "42 in\n");
  EXPECT_EQ(j["exit"], 0);
  auto verify = run_program(prefix + "/bin/sandboxrun", {"audit", "verify", "--log", log});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// A C++ service built against the installed library (find_package) runs three jobs.
TEST(Install, AServiceBuiltAgainstTheInstalledLibraryRunsJobs) {
  TempDir d;
  const std::string prefix = install_into(d);
  const std::string examples = prefix + "/share/doc/sandboxrun/examples";
  const std::string build = d.path() + "/service-build";
  auto configure = run_program(SANDBOXRUN_CMAKE, {"-S", examples, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix,
                                                  "-DCMAKE_BUILD_TYPE=Release"});
  ASSERT_EQ(configure.exit_code, 0) << configure.out << configure.err;
  auto compile = run_program(SANDBOXRUN_CMAKE, {"--build", build});
  ASSERT_EQ(compile.exit_code, 0) << compile.out << compile.err;
  const std::string conf = sandboxrun::testing::write_config(d);
  auto r = run_program(build + "/example-service", {fs::path(conf).parent_path().string(), d.path() + "/audit.log"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("exited, exit 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blocked, exit 126"), std::string::npos) << r.out;
  // The installed configuration as shipped: its policies are relative, found in P/share, which the
  // library knows from where it was installed (the service is nowhere near P/bin).
  HiddenSourceData hidden;
  auto shipped = run_program(build + "/example-service", {prefix + "/etc/sandboxrun", d.path() + "/shipped.log"},
                             {"SANDBOXRUN_IMAGE_STORE=" + source_dir()});
  EXPECT_EQ(shipped.exit_code, 0) << shipped.out << shipped.err;
  EXPECT_NE(shipped.out.find("exited, exit 0"), std::string::npos) << shipped.out << shipped.err;
}

}  // namespace
