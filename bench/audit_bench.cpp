// Audit log benchmark: appends/s with sync none and each, verify MB/s on a 1,000,000-record
// log and verify's peak RSS (measured in a child, for a small and the big log, to show that
// memory does not grow with the log).
//   sandboxrun_audit_bench [--records N] [--dir DIR]    (default 1000000, /tmp)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "sandboxrun/audit.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/error.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// User + system CPU seconds of this process (or of its waited-for children).
double cpu_seconds(int who = RUSAGE_SELF) {
  rusage ru{};
  ::getrusage(who, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Wall-clock and per-CPU-second rates: on a shared, loaded host the second is the stable one.
struct Rate {
  double wall = 0, cpu = 0;
};

// A realistic mix: assessment, run_start, run_end per run.
void append_run(sandboxrun::AuditLog& log, uint64_t i, const sandboxrun::CodeRef& code) {
  std::string id = "r" + std::to_string(i);
  switch (i % 3) {
    case 0:
      log.append("assessment", id,
                 {{"level", "MEDIUM"}, {"score", 42}, {"code", code},
                  {"findings", json::array({{{"rule", "subprocess"}, {"severity", "medium"}, {"line", 3},
                                             {"message", "runs a subprocess"}}})}});
      break;
    case 1:
      log.append("run_start", id,
                 {{"trust_requested", "unknown"}, {"trust_used", "untrusted"}, {"code", code},
                  {"limits", {{"cpus", 1.5}, {"memory_bytes", 268435456}, {"pids", 64}, {"timeout_s", 30}}},
                  {"config_digest", std::string(64, 'c')}, {"image_digest", std::string(64, 'd')}});
      break;
    default:
      log.append("run_end", id,
                 {{"status", "exited"}, {"exit_code", 0}, {"duration_ms", 812}, {"cpu_ms", 640},
                  {"memory_peak_bytes", 31457280}, {"pids_peak", 3}, {"code", code}});
  }
}

Rate appends_per_second(const fs::path& dir, sandboxrun::AuditSync sync, uint64_t n) {
  sandboxrun::AuditConfig cfg;
  cfg.sync = sync;
  cfg.rotate_max_bytes = 0;
  fs::path path = dir / ("append-" + std::string(sandboxrun::to_string(sync)) + ".log");
  auto log = sandboxrun::AuditLog::open(cfg, path);
  sandboxrun::CodeRef code{"job.py", std::string(64, 'a'), 1234};
  auto t0 = Clock::now();
  double c0 = cpu_seconds();
  for (uint64_t i = 0; i < n; ++i) append_run(log, i, code);
  auto count = static_cast<double>(n);
  return Rate{count / seconds_since(t0), count / (cpu_seconds() - c0)};
}

// `writers` processes appending to one log at once (sync none): every append takes the lock
// from another process and must notice the others' records.
Rate concurrent_appends_per_second(const fs::path& dir, int writers, uint64_t per_writer) {
  sandboxrun::AuditConfig cfg;
  cfg.sync = sandboxrun::AuditSync::none;
  cfg.rotate_max_bytes = 0;
  fs::path path = dir / "append-concurrent.log";
  auto t0 = Clock::now();
  double c0 = cpu_seconds(RUSAGE_CHILDREN);
  for (int w = 0; w < writers; ++w) {
    pid_t pid = ::fork();
    if (pid < 0) sandboxrun::throw_errno("fork");
    if (pid == 0) {
      int rc = 0;
      try {
        auto log = sandboxrun::AuditLog::open(cfg, path);
        sandboxrun::CodeRef code{"job.py", std::string(64, 'a'), 1234};
        for (uint64_t i = 0; i < per_writer; ++i) append_run(log, i, code);
      } catch (const sandboxrun::Error& e) {
        std::fprintf(stderr, "audit bench writer: %s\n", e.describe().c_str());
        rc = 1;
      }
      ::_exit(rc);
    }
  }
  bool ok = true;
  for (int status = 0; ::wait(&status) > 0;) ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok) throw sandboxrun::Error("a concurrent audit bench writer failed");
  auto count = static_cast<double>(writers) * static_cast<double>(per_writer);
  return Rate{count / seconds_since(t0), count / (cpu_seconds(RUSAGE_CHILDREN) - c0)};
}

struct VerifyRun {
  double seconds = 0, cpu = 0;
  uint64_t bytes = 0, records = 0;
  long max_rss_kb = 0;
  bool ok = false;
};

// Verifies in a child so that its peak RSS is verify's alone.
VerifyRun verify_in_child(const fs::path& log) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) sandboxrun::throw_errno("pipe");
  pid_t pid = ::fork();
  if (pid < 0) sandboxrun::throw_errno("fork");
  if (pid == 0) {
    ::close(pipefd[0]);
    sandboxrun::AuditVerifyOptions opt;
    opt.log = log;
    opt.anchor = fs::path(log.string() + ".anchor");
    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    auto res = sandboxrun::verify_audit_log(opt);
    VerifyRun v{seconds_since(t0), cpu_seconds() - c0, res.bytes, res.records, 0, res.ok()};
    if (!res.ok()) std::fprintf(stderr, "verify: %s: %s\n", to_string(res.damage->kind), res.damage->detail.c_str());
    (void)!::write(pipefd[1], &v, sizeof v);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  VerifyRun v;
  (void)!::read(pipefd[0], &v, sizeof v);
  ::close(pipefd[0]);
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  v.max_rss_kb = ru.ru_maxrss;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t records = 1000000;
  fs::path base = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--records") == 0) records = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--dir") == 0) base = argv[i + 1];
  }
  std::string tmpl = (base / "sandboxrun-audit-bench-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  fs::path dir = tmpl;
  int rc = 0;
  try {
    Rate none = appends_per_second(dir, sandboxrun::AuditSync::none, 200000);
    std::printf("append (sync none):  %8.0f records/s wall, %8.0f per CPU-second\n", none.wall, none.cpu);
    Rate many = concurrent_appends_per_second(dir, 4, 50000);
    bool many_ok = verify_in_child(dir / "append-concurrent.log").ok;
    std::printf("append (sync none, 4 processes): %8.0f records/s wall, %8.0f per CPU-second (chain %s)\n",
                many.wall, many.cpu, many_ok ? "intact" : "DAMAGED");
    if (!many_ok) rc = 1;
    Rate each = appends_per_second(dir, sandboxrun::AuditSync::each, 5000);
    std::printf("append (sync each):  %8.0f records/s wall, %8.0f per CPU-second (fdatasync each, %s)\n",
                each.wall, each.cpu, dir.c_str());

    fs::path small = dir / "small.log";
    fs::path big = dir / "big.log";
    {
      sandboxrun::AuditConfig cfg;
      cfg.sync = sandboxrun::AuditSync::none;
      cfg.rotate_max_bytes = 0;
      sandboxrun::CodeRef code{"job.py", std::string(64, 'a'), 1234};
      auto s = sandboxrun::AuditLog::open(cfg, small);
      for (uint64_t i = 0; i < 1000; ++i) append_run(s, i, code);
      auto b = sandboxrun::AuditLog::open(cfg, big);
      auto t0 = Clock::now();
      for (uint64_t i = 0; i < records; ++i) append_run(b, i, code);
      std::printf("generated %llu records in %.1fs\n", static_cast<unsigned long long>(records), seconds_since(t0));
    }
    VerifyRun vs = verify_in_child(small);
    VerifyRun vb = verify_in_child(big);
    if (!vs.ok || !vb.ok) rc = 1;
    std::printf("verify %llu records, %.1f MB: %.3fs wall = %.0f MB/s (%.0f records/s); %.3fs CPU = %.0f MB per CPU-second\n",
                static_cast<unsigned long long>(vb.records), vb.bytes / 1e6, vb.seconds,
                vb.bytes / 1e6 / vb.seconds, vb.records / vb.seconds, vb.cpu, vb.bytes / 1e6 / vb.cpu);
    std::printf("verify peak RSS: %ld KiB for %llu records, %ld KiB for %llu records\n", vs.max_rss_kb,
                static_cast<unsigned long long>(vs.records), vb.max_rss_kb,
                static_cast<unsigned long long>(vb.records));
  } catch (const sandboxrun::Error& e) {
    std::fprintf(stderr, "audit bench: %s\n", e.describe().c_str());
    rc = 1;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return rc;
}
