// The egress proxy of network_mode "allowlist". The launcher hands it a listening TCP socket that
// lives in the sandbox's network namespace (127.0.0.1:3128 there); the proxy accepts on it from
// the host side and makes every outbound connection from the host namespace, after checking the
// allowlist, the resolved destination addresses and, for CONNECT, the TLS SNI. It fails closed:
// invalid settings throw, and anything it cannot check is refused.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sandboxrun/fd.hpp"
#include "sandboxrun/result_records.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun::net {

enum class Verdict { allowed, denied };
const char* to_string(Verdict v);

// One connection the sandbox made to the proxy, recorded when it ends.
struct ConnectionRecord {
  std::string host;     // as asked for (normalised when it could be); empty if never read
  uint16_t port = 0;
  std::string address;  // the address connected to, empty if none
  Verdict verdict = Verdict::denied;
  // Denied: why. Allowed: how it ended when that was not a normal close ("idle timeout",
  // "byte limit reached", "proxy stopped", "connect failed: ..."); empty otherwise.
  std::string reason;
  uint64_t bytes_up = 0;    // sandbox -> destination, including the forwarded request head
  uint64_t bytes_down = 0;  // destination -> sandbox
};

struct ProxyCounters {
  uint64_t allowed = 0;
  uint64_t denied = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  uint64_t records_dropped = 0;  // connections counted but not kept (kMaxRecords reached)
  uint32_t active = 0;           // connections open now
};

// The checks the constructor makes, for callers that must fail before starting anything.
void validate_network_settings(const NetworkSettings& settings);

class EgressProxy {
 public:
  // Records kept per run; later connections are still counted (records_dropped).
  static constexpr size_t kMaxRecords = 10000;

  // `listen_fd` must be a listening TCP socket. Validates `settings` (mode allowlist, every
  // allowlist entry, extra_hosts name and address, allow_networks CIDR, non-zero limits) and
  // throws sandboxrun::Error naming the bad key on anything invalid.
  EgressProxy(UniqueFd listen_fd, const NetworkSettings& settings);
  ~EgressProxy();  // stop()
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Starts the accept thread; throws Error if it cannot, or if already started.
  void start();
  // Closes the listening socket and every connection, then joins all threads. Idempotent.
  void stop() noexcept;

  std::vector<ConnectionRecord> records() const;  // thread-safe snapshot
  ProxyCounters counters() const;
  // Counters and records as a run reports them (its result, its audit records).
  NetworkReport report() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandboxrun::net
