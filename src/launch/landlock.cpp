// Landlock ruleset of a run. The uapi structs and flags are spelled out here: Debian 12's
// linux-libc-dev predates ABI 4 (network), 5 (ioctl on devices) and 6 (scoping), and the kernel's
// struct layout is a stable ABI (extensible structs: unknown trailing fields must be zero).
#include "landlock.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "child_plan.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::launch {

namespace {

struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};

struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

struct NetPortAttr {
  uint64_t allowed_access;
  uint64_t port;
};

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;
constexpr int kRuleNetPort = 2;

constexpr uint64_t kFsExecute = 1ull << 0;
constexpr uint64_t kFsWriteFile = 1ull << 1;
constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsReadDir = 1ull << 3;
constexpr uint64_t kFsAbi1 = (1ull << 13) - 1;  // execute .. make_sym
constexpr uint64_t kFsRefer = 1ull << 13;       // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;    // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;    // ABI 5
constexpr uint64_t kNetConnectTcp = 1ull << 1;  // ABI 4
constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ull << 1;

constexpr uint16_t kProxyPort = 3128;  // network_setup.cpp listens there in allowlist mode

// Opens a post-pivot_root path for a rule; -1 with errno set.
int open_beneath(const std::string& path) noexcept {
  return ::open(path.c_str(), O_PATH | O_CLOEXEC);
}

}  // namespace

int landlock_abi() noexcept {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

void prepare_landlock(const SandboxSpec& spec, LandlockPlan& p) {
  p = LandlockPlan{};
  if (spec.landlock == LandlockMode::off) return;
  const int abi = landlock_abi();
  if (abi == 0) {
    if (spec.landlock == LandlockMode::required)
      throw Error("landlock: required in sandbox.yaml, but this kernel offers no Landlock",
                  "boot a kernel with CONFIG_SECURITY_LANDLOCK and `landlock` in lsm=, or set landlock: best_effort");
    return;
  }
  p.abi = abi;
  p.handled_fs = kFsAbi1 | (abi >= 2 ? kFsRefer : 0) | (abi >= 3 ? kFsTruncate : 0) | (abi >= 5 ? kFsIoctlDev : 0);
  p.read_access = kFsExecute | kFsReadFile | kFsReadDir;
  p.write_access = p.handled_fs;
  // Device nodes are files: only the file rights apply (Landlock refuses directory rights on them).
  p.device_access = p.handled_fs & (kFsReadFile | kFsWriteFile | kFsTruncate | kFsIoctlDev);
  // /dev/pts holds the ptys (and ptmx); ptys need ioctl (termios) on the device, hence the
  // whole write set there. /work exists only with the job features.
  p.writable_dirs = {"/tmp", "/dev/shm", "/dev/pts", "/work"};
  // Writable host directories bound under /run (the dependency phase's output).
  for (const auto& b : spec.run_binds)
    if (b.writable) p.writable_dirs.push_back("/run/" + b.name);
  p.device_files = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
  // TCP: in allowlist mode the only way out is the egress proxy on 127.0.0.1:3128, so connect is
  // limited to that port. In `none` mode the network namespace holds nothing but loopback, and
  // Landlock cannot tell loopback from the rest (its TCP rules are per port, not per address):
  // restricting TCP there would only break local servers (asyncio, http.server, tests) that the
  // workload contract keeps working.
  if (abi >= 4 && spec.network.mode == NetworkMode::allowlist) {
    p.handled_net = kNetConnectTcp;
    p.connect_ports = {kProxyPort};
  }
  if (abi >= 6) p.scoped = kScopeAbstractUnixSocket | kScopeSignal;
}

bool apply_landlock(const ChildPlan& plan) {
  const LandlockPlan& p = plan.landlock;
  if (p.abi == 0) return true;
  RulesetAttr attr{p.handled_fs, p.handled_net, p.scoped};
  int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0u));
  if (ruleset < 0) {
    report_error(plan, "create landlock ruleset", errno, "landlock_create_ruleset");
    return false;
  }
  auto fail = [&](const char* stage, const char* what) {
    int err = errno;
    ::close(ruleset);
    report_error(plan, stage, err, what);
    return false;
  };
  auto add_path = [&](const std::string& path, uint64_t access) -> int {
    int fd = open_beneath(path);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    PathBeneathAttr rule{access, fd};
    long rc = ::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0u);
    int err = errno;
    ::close(fd);
    errno = err;
    return rc == 0 ? 0 : -1;
  };
  if (add_path("/", p.read_access) != 0) return fail("landlock rule for the image", "/");
  for (const auto& d : p.writable_dirs)
    if (add_path(d, p.write_access) != 0) return fail("landlock rule for a writable directory", d.c_str());
  for (const auto& f : p.device_files)
    if (add_path(f, p.device_access) != 0) return fail("landlock rule for a device", f.c_str());
  for (uint16_t port : p.connect_ports) {
    NetPortAttr rule{kNetConnectTcp, port};
    if (::syscall(SYS_landlock_add_rule, ruleset, kRuleNetPort, &rule, 0u) != 0)
      return fail("landlock rule for a TCP port", "connect");
  }
  // pid 1 is root (of its user namespace) here: restrict_self needs no no_new_privs first.
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0u) != 0) return fail("landlock restrict_self", "ruleset");
  ::close(ruleset);
  return true;
}

}  // namespace sandboxrun::launch
