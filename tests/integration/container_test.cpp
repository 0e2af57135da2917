// What a container's restrictions do to a run (issue 40): sandboxrun inside a container whose
// seccomp profile refuses sethostname (podman's default does) runs, in its own UTS namespace,
// and says that the hostname is the host's among its degradations; one that refuses pivot_root
// (Kubernetes' RuntimeDefault) cannot run, and doctor says so with the setting that fixes it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "harness.hpp"

using namespace sandboxrun::testing;

namespace {

const std::string kShowHostname = "import socket\nprint(socket.gethostname())\n";

TEST(Container, ARefusedSethostnameIsADegradationNotAFailure) {
  TempDir d;
  const std::string cfg = write_config(d);
  const std::string script = d.write("host.py", kShowHostname);
  const std::string deny = source_dir() + "/tests/fixtures/container/deny_syscalls.py";
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);

  const Exec refused = run_program("/usr/bin/python3", {deny, "sethostname", SANDBOXRUN_BIN, "--json", "--config", cfg, "--audit-log",
                                                        d.path() + "/audit.log", "--trust", "untrusted", script});
  ASSERT_EQ(refused.exit_code, 0) << refused.err << refused.out;
  const auto r = nlohmann::json::parse(refused.out.substr(0, refused.out.find('\n')));
  EXPECT_EQ(r["stdout"], std::string(host) + "\n") << "without sethostname the host's name shows";
  ASSERT_TRUE(r["degradations"].is_array()) << r.dump();
  bool said = false;
  for (const auto& g : r["degradations"]) said = said || g.get<std::string>().find("hostname not set") != std::string::npos;
  EXPECT_TRUE(said) << "the run must say what it went without: " << r["degradations"].dump();

  // Where sethostname is allowed, the sandbox has a name of its own and nothing is said.
  const Sandboxed plain = run_python(kShowHostname, {"--trust", "untrusted"});
  ASSERT_EQ(plain.exec.exit_code, 0) << plain.exec.err;
  if (std::string(host) != "sandbox") {
    EXPECT_NE(plain.stdout_text(), std::string(host) + "\n");
  }
  EXPECT_EQ(plain.result["degradations"].dump().find("hostname"), std::string::npos);
}

TEST(Container, DoctorNeverSaysCanRunWhenARunWouldFail) {
  const std::string deny = source_dir() + "/tests/fixtures/container/deny_syscalls.py";
  // Every probe passes here (user namespaces, seccomp, cgroups...): only a sandbox started shows it.
  const Exec r = run_program("/usr/bin/python3", {deny, "pivot_root", SANDBOXRUN_BIN, "doctor"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("MISSING  trial run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("refuses pivot_root"), std::string::npos) << "the fix names the refused step:\n" << r.out;
  EXPECT_NE(r.out.find("cannot run sandboxes on this host"), std::string::npos) << r.out;
}

// A container's cgroupfs is read-only: untrusted code is refused, and the error names the
// container setting that gives it a writable one. Every cgroup mount is made read-only for this
// run alone: bind remounts (per-mount flags) in a mount namespace of its own.
TEST(Container, AReadOnlyCgroupfsIsRefusedNamingTheContainerSetting) {
  TempDir d;
  const std::string cfg = write_config(d);
  const std::string script = d.write("ok.py", "print('ran')\n");
  const std::string cmd =
      "set -e; for m in $(awk '$3 == \"cgroup\" || $3 == \"cgroup2\" {print $2}' /proc/self/mounts); do "
      "mount -o remount,bind,ro \"$m\"; done; exec " SANDBOXRUN_BIN " --config " + cfg + " --audit-log " + d.path() +
      "/audit.log --trust untrusted " + script;
  const Exec r = run_program("/usr/bin/unshare", {"--mount", "--propagation", "private", "/bin/sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_EQ(r.out.find("ran"), std::string::npos) << "untrusted code ran without limits";
  EXPECT_NE(r.err.find("read-only mount"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--cgroupns=private"), std::string::npos) << "the container setting is named:\n" << r.err;
  EXPECT_NE(r.err.find("cgroup.mode: enclosing"), std::string::npos) << "and one run per container:\n" << r.err;
}

// Root with a container's default capabilities (no CAP_SYS_ADMIN): the image is bound by pid 1
// in the namespaces its own user namespace owns (the image reachable by every user), and the id
// maps are opened as that namespace's owner, so the run has its id slot all the same.
TEST(Container, RootWithoutCapSysAdminRunsInItsIdSlot) {
  TempDir d;
  const std::string src = reachable_source_dir();
  const std::string cfg = write_config(d, "", "", src);
  const std::string script = d.write("who.py", "import os\nprint(os.getuid())\n");
  ::chmod(script.c_str(), 0644);
  const std::string bin = src + "/" + std::filesystem::path(SANDBOXRUN_BIN).lexically_relative(source_dir()).string();
  const Exec r = run_program("/usr/bin/setpriv", {"--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", bin, "--json",
                                                  "--config", cfg, "--audit-log", d.path() + "/audit.log", "--trust",
                                                  "untrusted", script});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_EQ(j["stdout"], "1000\n");
  EXPECT_TRUE(j["id_slot"].is_object()) << r.out;
  EXPECT_TRUE(!j.contains("degradations") || j["degradations"].empty()) << j["degradations"].dump();
}

}  // namespace
