// What the egress proxy's parts share: the accept thread (egress_proxy.cpp), the thread of each
// connection (proxy_connection.cpp), and the settings, answers and name resolution
// (proxy_setup.cpp).
#pragma once

#include <netdb.h>
#include <sys/eventfd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/egress_proxy.hpp"
#include "net/net_policy.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::net::proxy {

using Clock = std::chrono::steady_clock;

constexpr int kPipeSize = 256 << 10;  // per direction
constexpr size_t kMaxConnectionsCap = 1024;  // one thread each
constexpr auto kReplyTimeout = std::chrono::seconds(2);
constexpr auto kDrainTimeout = std::chrono::milliseconds(200);
constexpr size_t kDrainBytes = 64 * 1024;
constexpr size_t kMaxRecordHost = 256;
constexpr size_t kMaxRecordReason = 512;

struct Config {
  Allowlist allowlist;
  AddressPolicy policy;
  std::map<std::string, IpAddress> extra_hosts;  // normalised name -> address
  uint32_t max_connections;
  uint64_t max_bytes;
  std::chrono::milliseconds idle;
};

// Checks every setting (allowlist, networks, extra_hosts, limits); throws Error naming the bad one.
Config validate(const NetworkSettings& s);
// Throws unless `fd` is a listening stream socket; makes it non-blocking.
void check_listening(int fd);
int millis_until(Clock::time_point deadline);
// A complete HTTP error response with `reason` as its text body.
std::string error_response(int status, const std::string& reason);

// Name resolution on a helper thread so that a slow resolver cannot outlive the deadline or
// stop(): the thread owns its share of the job and finishes on its own if nobody waits.
struct ResolveJob {
  UniqueFd done{eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::mutex mu;
  int rc = EAI_SYSTEM;
  std::vector<IpAddress> addresses;
};

std::shared_ptr<ResolveJob> start_resolve(const std::string& name);

// What the accept thread and every connection thread share.
struct Shared {
  explicit Shared(Config c) : config(std::move(c)) {}

  const Config config;
  UniqueFd stop_fd;  // eventfd; readable from stop() on, which wakes every poll

  std::atomic<uint32_t> active{0};
  std::atomic<uint64_t> budget_used{0};  // bytes read for forwarding, both ways
  std::atomic<uint64_t> bytes_up{0};
  std::atomic<uint64_t> bytes_down{0};

  mutable std::mutex records_mu;
  std::vector<ConnectionRecord> records;
  uint64_t allowed = 0;
  uint64_t denied = 0;
  uint64_t records_dropped = 0;

  void finish(ConnectionRecord rec) {
    std::lock_guard lock(records_mu);
    ++(rec.verdict == Verdict::allowed ? allowed : denied);
    if (records.size() < EgressProxy::kMaxRecords)
      records.push_back(std::move(rec));
    else
      ++records_dropped;
  }

  // Takes up to `want` bytes from the run's byte budget; returns what was granted.
  uint64_t reserve(uint64_t want) {
    uint64_t used = budget_used.load();
    while (true) {
      if (used >= config.max_bytes) return 0;
      const uint64_t grant = std::min(want, config.max_bytes - used);
      if (budget_used.compare_exchange_weak(used, used + grant)) return grant;
    }
  }
  void give_back(uint64_t n) { budget_used -= n; }
};

// Serves one admitted client on the calling thread, start to end; records it in `shared`.
void serve_connection(Shared& shared, UniqueFd client) noexcept;

}  // namespace sandboxrun::net::proxy
