// Child side: the sandbox's network namespace has only `lo`. In allowlist mode the child also
// opens the proxy's listening socket inside that namespace and hands it to the launcher, which
// serves it from the host side: programs inside can reach the proxy and nothing else.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "child_plan.hpp"
#include "fd_passing.hpp"

namespace sandboxrun::launch {

int bring_up_loopback() noexcept {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  if (ok) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    ok = ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  }
  int err = ok ? 0 : errno;
  ::close(s);
  return err;
}

namespace {

bool bring_up_lo(const ChildPlan& plan) {
  if (int err = bring_up_loopback()) {
    report_error(plan, "bring up lo", err, "lo");
    return false;
  }
  return true;
}

bool pass_proxy_socket(const ChildPlan& plan) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    report_error(plan, "proxy socket", errno, "127.0.0.1:3128");
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(3128);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, 128) != 0) {
    report_error(plan, "proxy listen", errno, "127.0.0.1:3128");
    ::close(s);
    return false;
  }
  bool ok = send_fd(plan.control_write, s, kProxySocketTag);
  int saved = errno;
  ::close(s);  // the launcher holds it now; nothing inside keeps the listening socket
  if (!ok) report_error(plan, "pass proxy socket", saved, "control socket");
  return ok;
}

}  // namespace

bool setup_network(const ChildPlan& plan) {
  // A namespace from the launcher's pool has lo up already, and pid 1 has no capability there.
  if (!plan.netns_prepared && !bring_up_lo(plan)) return false;
  if (plan.proxy_socket && !pass_proxy_socket(plan)) return false;
  return true;
}

}  // namespace sandboxrun::launch
