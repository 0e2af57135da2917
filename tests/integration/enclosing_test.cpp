// One run per container (cgroup.mode: enclosing, issue 40): sandboxrun started as a container
// runtime starts a pod's command — in a cgroup the runtime made and limited, with every cgroup
// mount read-only — uses that cgroup as the run's. Its limits hold (an OOM kill that takes the
// sandbox, not the launcher; threads bounded where the container has no pids.max of its own),
// looser limits and a cgroup shared with another process are refused with the setting to change.
// On cgroup v1 (this VM) and v2 (CI's guest leg, scripts/v2-guest-checks.sh) alike.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

using namespace sandboxrun::testing;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
}

// The mount point of the cgroup2 hierarchy with controllers, or of the v1 hierarchy carrying
// `controller`: from /proc/self/mounts ("" when there is none).
std::string mount_of(const std::string& controller) {
  std::ifstream in("/proc/self/mounts");
  std::string dev, where, type, opts, rest;
  while (in >> dev >> where >> type >> opts && std::getline(in, rest)) {
    if (controller.empty() && type == "cgroup2" &&
        read_all(where + "/cgroup.controllers").find("memory") != std::string::npos)
      return where;
    if (!controller.empty() && type == "cgroup" && ("," + opts + ",").find("," + controller + ",") != std::string::npos)
      return where;
  }
  return "";
}

// A container's cgroup as a runtime makes one (one CPU, `memory`, `pids` or none), limited by
// the test (root) before anything runs in it; removed, with whatever is left inside, at the end.
class ContainerCgroup {
 public:
  ContainerCgroup(uint64_t memory, std::optional<uint64_t> pids) {
    static std::atomic<int> n{0};
    const std::string name = "sandboxrun-test-container." + std::to_string(::getpid()) + "." + std::to_string(n++);
    if (const std::string v2 = mount_of(""); !v2.empty()) {
      const std::string d = make(v2 + "/" + name);
      put(d + "/memory.max", std::to_string(memory));
      if (::access((d + "/memory.swap.max").c_str(), F_OK) == 0) put(d + "/memory.swap.max", "0");
      put(d + "/pids.max", pids ? std::to_string(*pids) : "max");
      if (::access((d + "/cpu.max").c_str(), F_OK) == 0) put(d + "/cpu.max", "100000 100000");
      return;
    }
    const std::string mem = make(mount_of("memory") + "/" + name);
    put(mem + "/memory.limit_in_bytes", std::to_string(memory));
    if (::access((mem + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0)
      put(mem + "/memory.memsw.limit_in_bytes", std::to_string(memory));
    const std::string p = make(mount_of("pids") + "/" + name);
    put(p + "/pids.max", pids ? std::to_string(*pids) : "max");
    if (const std::string cpu = mount_of("cpu"); !cpu.empty())
      put(make(cpu + "/" + name) + "/cpu.cfs_quota_us", "100000");  // the period's default: 100000
    if (const std::string acct = mount_of("cpuacct"); !acct.empty() && acct != mount_of("cpu")) make(acct + "/" + name);
  }
  ~ContainerCgroup() {
    for (const auto& d : dirs_) {
      for (int i = 0; i < 500 && ::rmdir(d.c_str()) != 0; ++i) {
        std::ifstream procs(d + "/cgroup.procs");
        for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  const std::string& dir() const { return dirs_.front(); }
  ContainerCgroup(const ContainerCgroup&) = delete;
  ContainerCgroup& operator=(const ContainerCgroup&) = delete;

  // A shell command that joins the cgroup, makes every cgroup mount read-only (the mount
  // namespace is the command's own) and runs `then` — the container's command.
  std::string enter_then(const std::string& then) const {
    std::string cmd = "set -e; ";
    for (const auto& d : dirs_) cmd += "echo $$ > " + d + "/cgroup.procs; ";
    cmd += "for m in $(awk '$3 == \"cgroup\" || $3 == \"cgroup2\" {print $2}' /proc/self/mounts); do "
           "mount -o remount,bind,ro \"$m\"; done; " + then;
    return cmd;
  }

 private:
  std::string make(const std::string& dir) {
    EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir << ": " << std::strerror(errno);
    dirs_.push_back(dir);
    return dir;
  }
  std::vector<std::string> dirs_;
};

const std::string kMem = "b = bytearray(1 << 30)\nb[::4096] = b'x' * len(b[::4096])\nprint('allocated')\n";
const std::string kThreads =
    "import threading, time\nn = 0\ntry:\n    while n < 500:\n"
    "        threading.Thread(target=time.sleep, args=(5,)).start()\n        n += 1\n"
    "except RuntimeError:\n    pass\nprint(n)\n";

class Enclosing : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "making a container's cgroup needs root";
    config_ = write_config(dir_, "cgroup:\n  mode: enclosing\n");
  }
  // sandboxrun as the container's command, in a mount namespace of its own; `before` runs first
  // in the container's shell.
  Exec run_in(const ContainerCgroup& c, const std::string& script, const std::string& before = "") {
    const std::string file = dir_.write("job" + std::to_string(runs_++) + ".py", script);
    const std::string cmd = c.enter_then(before + "exec " SANDBOXRUN_BIN " --json --config " + config_ +
                                         " --audit-log " + dir_.path() + "/audit.log --trust untrusted " + file);
    return run_program("/usr/bin/unshare", {"--mount", "--propagation", "private", "/bin/sh", "-c", cmd});
  }
  // The same as uid 1000 with no capability: the least-privileged pod.
  Exec run_as_user_in(const ContainerCgroup& c, const std::string& script) {
    const std::string file = dir_.write("user" + std::to_string(runs_++) + ".py", script);
    const std::string logs = dir_.path() + "/user-logs";
    EXPECT_EQ(::mkdir(logs.c_str(), 0755), 0);
    EXPECT_EQ(::chown(logs.c_str(), 1000, 1000), 0);
    const std::string src = reachable_source_dir();
    const std::string bin = src + "/" + std::filesystem::path(SANDBOXRUN_BIN).lexically_relative(source_dir()).string();
    const std::string cfg = write_config(user_dir_, "cgroup:\n  mode: enclosing\n", "", src);
    const std::string cmd = c.enter_then("exec setpriv --reuid 1000 --regid 1000 --clear-groups --inh-caps=-all env HOME=" +
                                         logs + " " + bin + " --json --config " + cfg + " --audit-log " + logs +
                                         "/audit.log --trust untrusted " + file);
    return run_program("/usr/bin/unshare", {"--mount", "--propagation", "private", "/bin/sh", "-c", cmd});
  }
  static nlohmann::json result_of(const Exec& r) {
    return nlohmann::json::parse(r.out.substr(0, r.out.find('\n')), nullptr, false);
  }

  TempDir dir_;
  TempDir user_dir_;
  std::string config_;
  int runs_ = 0;
};

TEST_F(Enclosing, TheContainersMemoryLimitKillsTheSandboxNotTheLauncher) {
  ContainerCgroup c(200ull << 20, 64);
  const Exec r = run_in(c, kMem);
  const auto j = result_of(r);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["status"], "oom") << "the launcher lived to report the OOM kill: " << r.out << r.err;
  EXPECT_EQ(j["cgroup"], "enclosing");
  EXPECT_TRUE(!j.contains("degradations") || j["degradations"].empty())
      << "one run per container, as root: nothing went without " << j["degradations"].dump();
  EXPECT_EQ(r.out.find("allocated"), std::string::npos);
}

TEST_F(Enclosing, TheLeastPrivilegedContainerRunsWithLimitsAndNoDegradation) {
  ContainerCgroup c(200ull << 20, std::nullopt);
  const Exec r = run_as_user_in(c, kMem);
  const auto j = result_of(r);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["status"], "oom") << r.out << r.err;
  EXPECT_EQ(j["cgroup"], "enclosing");
  EXPECT_TRUE(j["id_slot"].is_null()) << "not root: no id slot, the container is the run's";
  EXPECT_TRUE(!j.contains("degradations") || j["degradations"].empty()) << j["degradations"].dump();
  EXPECT_TRUE(j["landlock"]["enforced"].get<bool>()) << j["landlock"].dump();
}

TEST_F(Enclosing, ThreadsStopAtTheRunsLimitWhereTheContainerHasNone) {
  // Kubernetes limits pids on the pod's cgroup, which the container's cgroup namespace hides.
  ContainerCgroup c(200ull << 20, std::nullopt);
  const Exec r = run_in(c, kThreads);
  const auto j = result_of(r);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  ASSERT_EQ(j["status"], "exited") << r.out << r.err;
  const int started = std::stoi(j["stdout"].get<std::string>());
  EXPECT_GT(started, 0);
  EXPECT_LT(started, 64) << "untrusted allows 64 processes and threads";
}

TEST_F(Enclosing, ALooserContainerIsRefusedNamingThePodSetting) {
  ContainerCgroup c(1ull << 30, 64);
  const Exec r = run_in(c, "print('ran')\n");
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  const auto j = result_of(r);
  EXPECT_EQ(j.value("stdout", ""), "") << "untrusted code ran under a 1 GiB limit: " << r.out;
  const std::string said = r.out + r.err;
  EXPECT_NE(said.find("memory 1GiB"), std::string::npos) << said;
  EXPECT_NE(said.find("resources.limits.memory: 256Mi"), std::string::npos) << said;
  EXPECT_NE(said.find("--memory 256m"), std::string::npos) << said;
}

TEST_F(Enclosing, ACgroupSharedWithAnotherProcessIsRefused) {
  ContainerCgroup c(200ull << 20, 64);
  const Exec r = run_in(c, "print('ran')\n", "sleep 30 >/dev/null 2>&1 & ");
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_EQ(result_of(r).value("stdout", ""), "") << r.out;
  const std::string said = r.out + r.err;
  EXPECT_NE(said.find("other process"), std::string::npos) << said;
  EXPECT_NE(said.find("(sleep)"), std::string::npos) << "the stranger is named: " << said;
}

// A pool of workers per pod (item 2): a container given a writable cgroup namespace of its own
// (CRI-O's cgroup2-mount-hierarchy-rw, privileged) divides its cgroup as a delegated subtree:
// each run gets its own cgroup there, with the trust level's limits, several at once; the
// container's processes move into a leaf so that its cgroup may have controlled children.
TEST_F(Enclosing, AWorkerInAWritableCgroupNamespaceGivesEachRunItsOwnCgroup) {
  if (mount_of("").empty())
    GTEST_SKIP() << "this host has no cgroup v2 hierarchy with the memory controller, which a writable cgroup "
                    "namespace needs (cgroup v1 namespaces cannot be delegated); CI's v2 guest leg runs this";
  ContainerCgroup c(2ull << 30, std::nullopt);  // the pod's limit, for the whole pool
  TempDir worker;
  const std::string cfg = write_config(worker);  // the shipped cgroup.mode: per_run
  const std::string run = SANDBOXRUN_BIN " --json --config " + cfg + " --audit-log " + worker.path() +
                          "/audit.log --trust untrusted ";
  const std::string mem = worker.write("mem.py", kMem);
  const std::string ok = worker.write("ok.py", "import time\ntime.sleep(1)\nprint('ran')\n");
  const std::string out = worker.path() + "/";
  // The container's view: a cgroup2 mount made inside its cgroup namespace (mount(8) will not
  // stack a second cgroup2 on the same place, so the old one goes first).
  const std::string inside = "set -e; umount -l /sys/fs/cgroup; mount -t cgroup2 cgroup2 /sys/fs/cgroup; " + run + mem +
                             " > " + out + "mem.json & " + run + ok + " > " + out + "ok.json; wait; cat /proc/self/cgroup > " +
                             out + "cgroup";
  const Exec r = run_program("/bin/sh", {"-c", "set -e; echo $$ > " + c.dir() +
                                                    "/cgroup.procs; exec unshare --cgroup --mount --propagation private "
                                                    "/bin/sh -c '" + inside + "'"});
  ::rmdir((c.dir() + "/sandboxrun.launcher").c_str());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto m = nlohmann::json::parse(read_all(out + "mem.json"), nullptr, false);
  const auto o = nlohmann::json::parse(read_all(out + "ok.json"), nullptr, false);
  ASSERT_TRUE(m.is_object() && o.is_object()) << read_all(out + "mem.json") << read_all(out + "ok.json") << r.err;
  EXPECT_EQ(m["status"], "oom") << "256 MiB for untrusted code, below the pod's 2 GiB: " << m.dump();
  EXPECT_EQ(m["cgroup"], "v2");
  EXPECT_EQ(o["status"], "exited") << o.dump();
  EXPECT_EQ(o["stdout"], "ran\n");
  EXPECT_EQ(o["cgroup"], "v2");
  for (const auto* j : {&m, &o})
    EXPECT_TRUE(!j->contains("degradations") || (*j)["degradations"].empty()) << (*j)["degradations"].dump();
  EXPECT_EQ(read_all(out + "cgroup"), "0::/sandboxrun.launcher\n")
      << "the container's processes moved into a leaf of its cgroup";
}

}  // namespace
