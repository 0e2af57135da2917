// Ids that belong to no one, checked from the host: a root launcher's payload runs as a host uid
// of the reserved range (config/sandbox.yaml id_ranges), a different one per live sandbox, in a
// user namespace of its own; a launcher killed with SIGKILL frees its slot, and the next run
// removes the cgroups it left.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/nsfs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "harness.hpp"
#include "sandboxrun/fd.hpp"

using sandboxrun::testing::read_text;
using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;

namespace {

constexpr uint64_t kBase = 100000000, kSize = 2048, kSlotSize = 2;  // config/sandbox.yaml

// The host pid of the payload started with `marker` as its argument (argv[0] python3; the
// launcher's own command line carries the marker too), or -1.
pid_t find_payload(const std::string& marker) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string cmd = read_text(e.path().string() + "/cmdline");
    if (cmd.rfind("/usr/bin/python3", 0) == 0 && cmd.find(std::string(1, '\0') + marker) != std::string::npos)
      return static_cast<pid_t>(std::stol(e.path().filename().string()));
  }
  return -1;
}

pid_t wait_for_payload(const std::string& marker) {
  pid_t found = -1;
  sandboxrun::testing::eventually([&] { return (found = find_payload(marker)) > 0; });
  return found;
}

// The real uid of a host process, from /proc/PID/status ("Uid:\treal\teffective\t...").
long host_uid(pid_t pid) {
  std::string status = read_text("/proc/" + std::to_string(pid) + "/status");
  auto at = status.find("\nUid:\t");
  return at == std::string::npos ? -1 : std::stol(status.substr(at + 6));
}

// The host uid owning the user namespace of `pid` (NS_GET_OWNER_UID), or -1.
long userns_owner(pid_t pid) {
  sandboxrun::UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  uid_t owner = 0;
  return ns && ::ioctl(ns.get(), NS_GET_OWNER_UID, &owner) == 0 ? static_cast<long>(owner) : -1;
}

std::string userns(pid_t pid) {
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/ns/user").string();
}

const char* kSleeper = "import sys, time\ntime.sleep(float(sys.argv[2]))\nprint('done')\n";

TEST(IdSlots, ConcurrentSandboxesRunAsDistinctUnownedHostIdsInTheirOwnUserNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "id slots are for root launchers";
  const std::string tag = std::to_string(::getpid());
  sandboxrun::testing::Sandboxed runs[2];
  // Each payload lives 8 s, so both are alive together however slowly the second one starts;
  // each is read as soon as it is found.
  std::thread t0([&] { runs[0] = run_python(kSleeper, {"--", "slotA" + tag, "8"}); });
  std::thread t1([&] { runs[1] = run_python(kSleeper, {"--", "slotB" + tag, "8"}); });
  const pid_t a = wait_for_payload("slotA" + tag);
  const long uid_a = a > 0 ? host_uid(a) : -1, owner_a = a > 0 ? userns_owner(a) : -1;
  const std::string ns_a = a > 0 ? userns(a) : "";
  const pid_t b = wait_for_payload("slotB" + tag);
  const long uid_b = b > 0 ? host_uid(b) : -1, owner_b = b > 0 ? userns_owner(b) : -1;
  const std::string ns_b = b > 0 ? userns(b) : "";
  const bool a_alive = a > 0 && ::kill(a, 0) == 0;
  t0.join();
  t1.join();
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  ASSERT_TRUE(a_alive) << "the first sandbox ended before the second started: no overlap to test";
  for (long uid : {uid_a, uid_b}) {
    EXPECT_GE(uid, static_cast<long>(kBase)) << "the payload runs as a host account's uid";
    EXPECT_LT(uid, static_cast<long>(kBase + kSize));
  }
  EXPECT_NE(uid_a, uid_b) << "two live sandboxes share a host uid";
  EXPECT_NE(ns_a, userns(::getpid())) << "the sandbox shares the host's user namespace";
  EXPECT_NE(ns_a, ns_b);
  for (int i = 0; i < 2; ++i) {
    const auto& r = runs[i].result;
    ASSERT_EQ(r.value("status", ""), "exited") << runs[i].exec.err;
    EXPECT_EQ(r["id_slot"]["host_uid"], i == 0 ? uid_a : uid_b);
    EXPECT_EQ(r["id_slot"]["host_uid"].get<uint64_t>(),
              kBase + r["id_slot"]["slot"].get<uint64_t>() * kSlotSize + 1);
    // The namespace belongs to the slot (its first id), not to root: per-user counts made
    // inside are charged to it at the host level.
    EXPECT_EQ(r["id_slot"]["host_root_uid"], i == 0 ? owner_a : owner_b) << "the user namespace's owner";
  }
}

// Inotify instances taken by the host process `pid` (links to anon_inode:inotify in its fd table).
int inotify_fds(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code lec;
    if (std::filesystem::read_symlink(e.path(), lec).string() == "anon_inode:inotify") ++n;
  }
  return n;
}

// Limits the kernel counts per user through the user-namespace hierarchy (ucounts: inotify
// instances, fanotify groups, user namespaces, RLIMIT_NPROC/MSGQUEUE) are charged at the host
// level to each namespace's owner. A sandbox that takes every inotify instance it can must
// leave another sandbox (and host root) its own budget.
TEST(IdSlots, OneSandboxExhaustingInotifyInstancesLeavesAnotherItsOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "id slots are for root launchers";
  const std::string tag = std::to_string(::getpid());
  const char* hog =
      "import ctypes, sys, time\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "fds = []\n"
      "while len(fds) < 4096:\n"
      "    fd = libc.inotify_init1(0)\n"
      "    if fd < 0:\n"
      "        break\n"
      "    fds.append(fd)\n"
      "print(len(fds), ctypes.get_errno())\n"
      "sys.stdout.flush()\n"
      "time.sleep(float(sys.argv[2]))\n";
  const char* one =
      "import ctypes, os\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "fd = libc.inotify_init1(0)\n"
      "print('ok' if fd >= 0 else os.strerror(ctypes.get_errno()))\n";
  sandboxrun::testing::Sandboxed a_run;
  std::thread t([&] { a_run = run_python(hog, {"--", "inoA" + tag, "6"}); });
  const pid_t a = wait_for_payload("inoA" + tag);
  // Wait until the hog has stopped taking instances (its count is stable).
  int taken = -1;
  for (int i = 0, stable = 0; a > 0 && i < 200 && stable < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int now = inotify_fds(a);
    stable = now == taken && now > 0 ? stable + 1 : 0;
    taken = now;
  }
  auto b_run = run_python(one);
  t.join();
  ASSERT_GT(a, 0);
  ASSERT_EQ(a_run.result.value("status", ""), "exited") << a_run.exec.err;
  ASSERT_EQ(b_run.result.value("status", ""), "exited") << b_run.exec.err;
  EXPECT_GT(taken, 0) << a_run.stdout_text();
  EXPECT_EQ(b_run.stdout_text(), "ok\n")
      << "sandbox A holds " << taken << " inotify instances (A says: " << a_run.stdout_text()
      << ") and sandbox B got none: both are charged to the same host owner";
}

TEST(IdSlots, InsideTheSandboxUserIs1000AndHostRootIsNobody) {
  auto r = run_python("import os\nprint(os.getuid(), os.getgid(), os.stat('/usr/bin').st_uid)\n");
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.err;
  // The image stays owned by host root, which is unmapped inside: it shows as the overflow id.
  EXPECT_EQ(r.stdout_text(), "1000 1000 65534\n");
}

TEST(IdSlots, ALauncherKilledWithSigkillFreesItsSlotAndTheNextRunItsCgroups) {
  if (::geteuid() != 0) GTEST_SKIP() << "id slots are for root launchers";
  TempDir d;
  const std::string script = d.write("sleep.py", kSleeper);
  const std::string marker = "slotK" + std::to_string(::getpid());
  // A cgroup parent of this test's own: any other run on the host sweeps the stale cgroups under
  // its parent, so a test running beside this one would remove the killed launcher's first.
  const std::string parent = "sandboxrun-test-slots-" + std::to_string(::getpid());
  const std::string config = write_config(d, "cgroup:\n  parent: " + parent + "\n");
  pid_t launcher = ::fork();
  if (launcher == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execl(SANDBOXRUN_BIN, SANDBOXRUN_BIN, "--config", config.c_str(), "--json", script.c_str(), "--", marker.c_str(),
            "30", nullptr);
    ::_exit(127);
  }
  const pid_t payload = wait_for_payload(marker);
  ASSERT_GT(payload, 0);
  const long uid = host_uid(payload);
  ASSERT_GE(uid, static_cast<long>(kBase));
  const std::string lock = "/run/sandboxrun/slots/" + std::to_string((uid - kBase) / kSlotSize);
  int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << lock;
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0) << "the slot of a live run is not held";
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  const bool freed = sandboxrun::testing::eventually([&] { return ::flock(fd, LOCK_EX | LOCK_NB) == 0; });
  ::close(fd);
  EXPECT_TRUE(freed) << "the killed launcher's slot " << lock << " stayed claimed";
  EXPECT_TRUE(sandboxrun::testing::eventually([&] { return find_payload(marker) < 0; }))
      << "the payload outlived its killed launcher";
  // Nothing removed the killed launcher's cgroups (a run's is named RUN_ID@PID.START after the
  // launcher that made it); the next launcher's sweep does.
  const std::string owner = "@" + std::to_string(launcher) + ".";
  EXPECT_GT(sandboxrun::testing::cgroups_named(owner, parent), 0u) << "no run cgroup of the killed launcher " << launcher;
  auto next = run_python("print('next')\n", {"--config", config});
  EXPECT_EQ(next.stdout_text(), "next\n") << next.exec.err;
  EXPECT_EQ(sandboxrun::testing::cgroups_named(owner, parent), 0u) << "the killed launcher's cgroups were not swept";
  sandboxrun::testing::remove_cgroup_parent(parent);
}

}  // namespace
