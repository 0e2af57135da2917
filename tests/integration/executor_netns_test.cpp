// The Executor's pool of network namespaces (launch/netns_pool.hpp): made ahead of the runs, each
// used by one run only, lo up, owned by the host's user namespace; the launcher's own thread
// goes back to its namespace after every clone.
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "launch/netns_pool.hpp"
#include "sandboxrun/executor.hpp"

using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace sandboxrun {
namespace {

ino_t inode_of(const char* path) {
  struct stat st {};
  EXPECT_EQ(::stat(path, &st), 0) << path;
  return st.st_ino;
}

UniqueFd take_within_seconds(launch::NetnsPool& pool, int seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (UniqueFd ns = pool.take()) return ns;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return UniqueFd();
}

// What a thread that enters `ns` sees: its interfaces and whether lo is up.
struct Seen {
  std::vector<std::string> interfaces;
  bool lo_up = false;
  bool entered = false;
};

Seen look_inside(int ns) {
  Seen seen;
  std::thread([&] {
    if (::setns(ns, CLONE_NEWNET) != 0) return;
    seen.entered = true;
    if (struct if_nameindex* names = ::if_nameindex()) {
      for (struct if_nameindex* i = names; i->if_index != 0; ++i) seen.interfaces.push_back(i->if_name);
      ::if_freenameindex(names);
    }
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, IFNAMSIZ, "lo");
    seen.lo_up = s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
    if (s >= 0) ::close(s);
  }).join();  // the thread ends in that namespace; no other thread's namespace changes
  return seen;
}

TEST(NetnsPool, HandsOutFreshNamespacesWithOnlyLoUp) {
  if (::geteuid() != 0) GTEST_SKIP() << "the pool makes namespaces only as root (CAP_SYS_ADMIN on the host)";
  const ino_t home = inode_of("/proc/thread-self/ns/net");
  launch::NetnsPool pool(2);
  UniqueFd a = take_within_seconds(pool, 10);
  ASSERT_TRUE(a) << "the pool made no namespace";
  pool.replenish();
  UniqueFd b = take_within_seconds(pool, 10);
  ASSERT_TRUE(b) << "the pool made no second namespace after replenish()";
  struct stat sa {}, sb {};
  ASSERT_EQ(::fstat(a.get(), &sa), 0);
  ASSERT_EQ(::fstat(b.get(), &sb), 0);
  EXPECT_NE(sa.st_ino, home);
  EXPECT_NE(sb.st_ino, home);
  EXPECT_NE(sa.st_ino, sb.st_ino) << "one namespace handed out twice";
  for (int ns : {a.get(), b.get()}) {
    Seen seen = look_inside(ns);
    ASSERT_TRUE(seen.entered);
    EXPECT_EQ(seen.interfaces, std::vector<std::string>{"lo"});
    EXPECT_TRUE(seen.lo_up);
  }
  // The pool's thread went back home after making them: this thread never moved.
  EXPECT_EQ(inode_of("/proc/thread-self/ns/net"), home);
}

// A run that comes while the pool is still making its namespace gets one (it waits for that one
// rather than make a whole one of its own; a cost only: either way the namespace is fresh and
// the host's, so the wait itself is not observable here).
TEST(NetnsPool, TakeWaitsForTheNamespaceBeingMade) {
  if (::geteuid() != 0) GTEST_SKIP() << "the pool makes namespaces only as root (CAP_SYS_ADMIN on the host)";
  launch::NetnsPool pool(1);
  EXPECT_TRUE(pool.take()) << "take() returned nothing while the pool was making a namespace";
}

// A one-run caller's pool (the CLI, size 0): no thread, and take() makes the namespace on the
// caller's thread, which goes back home after.
TEST(NetnsPool, AnEmptyPoolMakesTheNamespaceOnTheCallersThread) {
  if (::geteuid() != 0) GTEST_SKIP() << "the pool makes namespaces only as root (CAP_SYS_ADMIN on the host)";
  const ino_t home = inode_of("/proc/thread-self/ns/net");
  launch::NetnsPool pool(0);
  UniqueFd ns = pool.take();
  ASSERT_TRUE(ns) << "an empty pool made no namespace";
  struct stat st {};
  ASSERT_EQ(::fstat(ns.get(), &st), 0);
  EXPECT_NE(st.st_ino, home);
  Seen seen = look_inside(ns.get());
  ASSERT_TRUE(seen.entered);
  EXPECT_EQ(seen.interfaces, std::vector<std::string>{"lo"});
  EXPECT_TRUE(seen.lo_up);
  EXPECT_EQ(inode_of("/proc/thread-self/ns/net"), home) << "the caller's thread stayed in the namespace it made";
}

// A single run (the CLI) gets a namespace made by the launcher too: owned by the host's user
// namespace, not by the sandbox's.
TEST(NetnsPool, ASingleRunGetsAPreparedNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "the pool makes namespaces only as root (CAP_SYS_ADMIN on the host)";
  TempDir d;
  Executor ex = Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log", .single_run = true});
  RunRequest req;
  req.code =
      "import errno, fcntl, os\n"
      "fd = os.open('/proc/self/ns/net', os.O_RDONLY)\n"
      "try:\n"
      "    os.close(fcntl.ioctl(fd, 0xb701)); print('sandbox')\n"  // NS_GET_USERNS
      "except OSError as e:\n"
      "    print('host' if e.errno == errno.EPERM else 'error %d' % e.errno)\n";
  req.trust = Trust::trusted;
  RunResult r = ex.run(req);
  ASSERT_EQ(r.status, RunStatus::exited) << r.error << r.outcome.stderr_data;
  EXPECT_EQ(r.outcome.stdout_data, "host\n") << "the single run's clone made its own namespace";
}

// Through the Executor: every run in a namespace of its own, with localhost working; from the
// second run on, one made ahead (owned by the host's user namespace, so the sandbox's
// NS_GET_USERNS on it is refused), and the caller's thread back in its own namespace.
TEST(NetnsPool, EachExecutorRunGetsItsOwnPreparedNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "the pool makes namespaces only as root (CAP_SYS_ADMIN on the host)";
  TempDir d;
  Executor ex = Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log"});
  RunRequest req;
  // Fresh: nothing has gone through its lo yet (a namespace handed out again would show the
  // last run's traffic). Inode numbers cannot tell: a freed namespace's number is reused.
  req.code =
      "import errno, fcntl, os, socket\n"
      "lo = [l.split() for l in open('/proc/net/dev') if l.strip().startswith('lo:')][0]\n"
      "fresh = 'fresh' if int(lo[2]) == 0 else 'used'\n"
      "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
      "c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n"
      "c.sendall(b'ping'); assert a.recv(4) == b'ping'\n"
      "fd = os.open('/proc/self/ns/net', os.O_RDONLY)\n"
      "try:\n"
      "    os.close(fcntl.ioctl(fd, 0xb701)); owner = 'sandbox'\n"  // NS_GET_USERNS
      "except OSError as e:\n"
      "    owner = 'host' if e.errno == errno.EPERM else 'error %d' % e.errno\n"
      "print(os.stat('/proc/self/ns/net').st_ino, owner, fresh)\n";
  req.trust = Trust::trusted;
  const ino_t home = inode_of("/proc/thread-self/ns/net");
  for (int i = 0; i < 4; ++i) {
    RunResult r = ex.run(req);
    ASSERT_EQ(r.status, RunStatus::exited) << r.error << r.outcome.stderr_data;
    ASSERT_EQ(r.exit_code, 0) << r.outcome.stderr_data;
    std::istringstream out(r.outcome.stdout_data);
    unsigned long ino = 0;
    std::string owner, fresh;
    out >> ino >> owner >> fresh;
    EXPECT_NE(ino, home);
    EXPECT_EQ(fresh, "fresh") << "run " << i << " got a network namespace an earlier run had used";
    if (i > 0) {
      EXPECT_EQ(owner, "host") << "run " << i << " did not get a prepared namespace";
    }
    EXPECT_EQ(inode_of("/proc/thread-self/ns/net"), home) << "the launcher's thread stayed in a sandbox's namespace";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the pool refills between runs
  }
}

}  // namespace
}  // namespace sandboxrun
