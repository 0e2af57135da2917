// A service that runs generated code for its users through one long-lived Executor: it opens
// the configuration once and runs three jobs on three threads. Exit status 0 when every job did
// what was expected (the middle one is refused by the assessor).
#include <sandboxrun/executor.hpp>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  try {
    sandboxrun::ExecutorOptions options;
    if (argc > 1) options.config = argv[1];  // sandbox.yaml or its directory
    if (argc > 2) options.audit_log = argv[2];
    options.warm = true;  // a sandbox set up ahead for the next run: a fitting run only starts it
    sandboxrun::Executor executor = sandboxrun::Executor::open(options);
    // Ready to take work once the first sandbox is set up (a real service would report healthy
    // here); if none comes, runs still go the usual way.
    executor.wait_warm(executor.config().default_trust, std::chrono::seconds(10));

    struct Job {
      const char* code;
      sandboxrun::RunStatus expected;
      sandboxrun::RunResult result;
    };
    std::vector<Job> jobs = {
        {"print(sum(range(10)))\n", sandboxrun::RunStatus::exited, {}},
        {"import os\nos.system('rm -rf --no-preserve-root /')\n", sandboxrun::RunStatus::blocked, {}},
        {"import json\nprint(json.dumps({'ok': True}))\n", sandboxrun::RunStatus::exited, {}},
    };
    std::vector<std::thread> threads;
    for (auto& job : jobs)
      threads.emplace_back([&executor, &job] {
        sandboxrun::RunRequest req;
        req.code = job.code;
        req.trust = sandboxrun::Trust::untrusted;
        job.result = executor.run(req);
      });
    for (auto& t : threads) t.join();

    int bad = 0;
    for (const auto& job : jobs) {
      const auto& r = job.result;
      std::printf("job %s: %s, exit %d, assessment %s, stdout %s", r.run_id.c_str(), sandboxrun::to_string(r.status),
                  r.exit_code, sandboxrun::to_string(r.assessment.level),
                  r.outcome.stdout_data.empty() ? "(none)\n" : r.outcome.stdout_data.c_str());
      if (r.status != job.expected) {
        std::fprintf(stderr, "job %s: expected %s: %s\n", r.run_id.c_str(), sandboxrun::to_string(job.expected),
                     r.error.c_str());
        ++bad;
      }
    }
    return bad == 0 ? 0 : 1;
  } catch (const sandboxrun::Error& e) {
    std::fprintf(stderr, "example-service: %s\n", e.describe().c_str());
    return 125;
  }
}
