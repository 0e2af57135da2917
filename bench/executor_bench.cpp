// The service case of the start-up benchmark: one long-lived Executor, N runs of one file.
// Prints medians: Executor::open, a whole run() (wall), and the launcher's phases; --samples
// appends every run's wall time (ms, one a line) to PATH, for a caller that pools rounds.
// --warm: the Executor keeps a sandbox set up ahead for the next run (ExecutorOptions::warm).
//   sandboxrun_executor_bench [--config DIR] [--audit-log PATH] [--runs N] [--samples PATH] [--warm] [--output DIR] FILE.py
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "sandboxrun/executor.hpp"

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  sandboxrun::ExecutorOptions options;
  int runs = 30;
  const char* file = nullptr;
  const char* samples = nullptr;
  const char* output = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--config") && i + 1 < argc) options.config = argv[++i];
    else if (!std::strcmp(argv[i], "--audit-log") && i + 1 < argc) options.audit_log = argv[++i];
    else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--samples") && i + 1 < argc) samples = argv[++i];
    else if (!std::strcmp(argv[i], "--warm")) options.warm = true;
    else if (!std::strcmp(argv[i], "--output") && i + 1 < argc) output = argv[++i];
    else file = argv[i];
  }
  if (!file || runs < 1) {
    std::fprintf(stderr, "usage: %s [--config DIR] [--audit-log PATH] [--runs N] [--samples PATH] [--warm] [--output DIR] FILE.py\n", argv[0]);
    return 2;
  }
  std::ifstream in(file);
  std::stringstream code;
  code << in.rdbuf();
  try {
    std::vector<double> open_ms;
    for (int i = 0; i < 5; ++i) {
      auto t = std::chrono::steady_clock::now();
      sandboxrun::Executor::open(options);
      open_ms.push_back(ms_since(t));
    }
    sandboxrun::Executor ex = sandboxrun::Executor::open(options);
    sandboxrun::RunRequest req;
    req.code = code.str();
    req.name = "bench.py";
    if (output) req.output_dir = output;  // what run_python asks for: /work's files come back
    std::vector<double> wall, prepare, cgroup, spawn, run, teardown;
    int failures = 0, prepared = 0;
    for (int i = 0; i < runs + 2; ++i) {
      auto t = std::chrono::steady_clock::now();
      sandboxrun::RunResult r = ex.run(req);
      double w = ms_since(t);
      if (r.status != sandboxrun::RunStatus::exited || r.exit_code != 0) ++failures;
      if (i < 2) continue;  // warm-up runs
      prepared += r.outcome.prepared;
      auto ms = [](std::chrono::microseconds us) { return us.count() / 1000.0; };
      wall.push_back(w);
      prepare.push_back(ms(r.prepare));
      cgroup.push_back(ms(r.outcome.timings.cgroup));
      spawn.push_back(ms(r.outcome.timings.spawn));
      run.push_back(ms(r.outcome.timings.run));
      teardown.push_back(ms(r.outcome.timings.teardown));
    }
    if (samples) {
      std::ofstream out(samples, std::ios::app);
      for (double w : wall) out << w << "\n";
      if (!out) {
        std::fprintf(stderr, "executor_bench: cannot write %s\n", samples);
        return 1;
      }
    }
    std::printf("open %.2f run %.2f prepare %.2f cgroup %.2f spawn %.2f payload %.2f teardown %.2f failures %d prepared %d\n",
                median(open_ms), median(wall), median(prepare), median(cgroup), median(spawn), median(run),
                median(teardown), failures, prepared);
    return failures ? 1 : 0;
  } catch (const sandboxrun::Error& e) {
    std::fprintf(stderr, "executor_bench: %s\n", e.describe().c_str());
    return 125;
  }
}
