// Assessor benchmark: built-in assessment of generated realistic 1,000- and 10,000-line
// Python files (median of many runs, MB/s), side by side with `bandit -f json -q FILE` on the
// same files when Bandit is installed.
//
//   sandboxrun_assess_bench [--out DIR] [--runs N] [--bandit-runs N] [--no-bandit]
//
// The generated files stay in DIR (default: a fresh /tmp/sandboxrun-assess-bench-*), so the
// same files can be fed to bandit by hand: bandit -f json -q DIR/lines_1000.py
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sandboxrun/assess.hpp"
#include "assess/assess_bandit.hpp"

using namespace sandboxrun;
using Clock = std::chrono::steady_clock;

namespace {

// One module's worth of everyday code: imports, classes, comprehensions, f-strings,
// docstrings, subprocess and file I/O, a little risk for the rules to find.
std::string block(int n) {
  std::string s = R"(

class Service{N}:
    """Handles requests of kind {N}; never uses eval() or os.system('rm -rf /')."""

    def __init__(self, root, retries=3):
        self.root = Path(root)
        self.retries = retries
        self.cache = {}
        self.log = logging.getLogger(f"service.{N}")

    def load(self, name):
        path = self.root / f"{name}.json"
        if name in self.cache:
            return self.cache[name]
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        self.cache[name] = data
        return data

    def summarize(self, rows):
        totals = defaultdict(int)
        for row in rows:
            totals[row["kind"]] += int(row.get("count", 0))
        return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))

    def run_tool(self, args):
        # subprocess with a list: no shell involved
        out = subprocess.run(["tool", "--id", str({N})] + list(args), capture_output=True, text=True)
        if out.returncode != 0:
            self.log.warning("tool failed: %s", out.stderr.strip())
        return out.stdout

    def digest(self, payload: bytes) -> str:
        return hashlib.sha256(payload).hexdigest()[:16]


def helper_{N}(values, *, scale=1.0):
    result = [v * scale for v in values if v is not None]
    mean = sum(result) / len(result) if result else 0.0
    return {"n": len(result), "mean": round(mean, 3), "label": f"h{N}:{mean:.2f}"}
)";
  std::string out;
  const std::string num = std::to_string(n);
  for (size_t p = 0;;) {
    size_t q = s.find("{N}", p);
    out.append(s, p, q == std::string::npos ? std::string::npos : q - p);
    if (q == std::string::npos) break;
    out += num;
    p = q + 3;
  }
  return out;
}

std::string generate(int lines) {
  std::string s =
      "\"\"\"Generated benchmark module.\"\"\"\nimport hashlib\nimport json\nimport logging\nimport "
      "subprocess\nfrom collections import defaultdict\nfrom pathlib import Path\n";
  for (int n = 0;; ++n) {
    std::string b = block(n);
    if (std::count(s.begin(), s.end(), '\n') + std::count(b.begin(), b.end(), '\n') > lines) break;
    s += b;
  }
  while (std::count(s.begin(), s.end(), '\n') < lines) s += "CONSTANT = {'key': [1, 2, 3]}  # padding\n";
  return s;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir;
  int runs = 200, bandit_runs = 3;
  bool bandit = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_dir = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--bandit-runs" && i + 1 < argc) bandit_runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-bandit") bandit = false;
    else {
      std::fprintf(stderr, "usage: %s [--out DIR] [--runs N] [--bandit-runs N] [--no-bandit]\n", argv[0]);
      return 2;
    }
  }
  if (out_dir.empty()) {
    char tmpl[] = "/tmp/sandboxrun-assess-bench-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      std::perror("mkdtemp");
      return 1;
    }
    out_dir = tmpl;
  }
  std::filesystem::create_directories(out_dir);

  const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
  SecurityConfig cfg = load_security_config(root / "config/security.yaml", root);
  const bool have_bandit = bandit && assess::find_executable("bandit").has_value();

  // Median and best of the runs: on a shared machine the best shows the cost of the code, the
  // median what a run costs under the current load. Bandit: median of its runs.
  std::printf("%-15s %6s %8s %11s %11s %8s %8s %10s %8s\n", "file", "lines", "bytes", "median_ms", "best_ms",
              "MB/s", "level", "bandit_ms", "speedup");
  for (int lines : {1000, 10000}) {
    const std::string src = generate(lines);
    const std::filesystem::path file = std::filesystem::path(out_dir) / ("lines_" + std::to_string(lines) + ".py");
    std::ofstream(file) << src;

    Assessment a = assess_source(src, cfg);  // warm-up
    std::vector<double> t;
    const int n = lines >= 10000 ? std::max(1, runs / 10) : runs;
    for (int i = 0; i < n; ++i) {
      auto t0 = Clock::now();
      a = assess_source(src, cfg);
      t.push_back(ms(Clock::now() - t0));
    }
    const double builtin = median(t);
    const double best = *std::min_element(t.begin(), t.end());
    const double mbps = (static_cast<double>(src.size()) / (1 << 20)) / (builtin / 1000.0);

    std::string bandit_col = "-", speed_col = "-";
    if (have_bandit) {
      std::vector<double> bt;
      size_t findings = 0;
      for (int i = 0; i < bandit_runs; ++i) {
        auto t0 = Clock::now();
        assess::BanditResult r = assess::run_bandit(file, cfg.bandit);
        bt.push_back(ms(Clock::now() - t0));
        findings = r.findings.size();
        for (const auto& note : r.notes) std::fprintf(stderr, "bandit: %s\n", note.c_str());
      }
      const double b = median(bt);
      bandit_col = std::to_string(static_cast<long>(b + 0.5));
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0fx", b / builtin);  // against the median
      speed_col = buf;
      std::fprintf(stderr, "bandit reported %zu findings on %s\n", findings, file.c_str());
    }
    std::printf("%-15s %6d %8zu %11.3f %11.3f %8.1f %8s %10s %8s\n", file.filename().c_str(), lines, src.size(),
                builtin, best, mbps, to_string(a.level), bandit_col.c_str(), speed_col.c_str());
  }
  std::printf("files kept in %s%s\n", out_dir.c_str(),
              have_bandit ? "" : " (bandit not run: not installed, or --no-bandit)");
  return 0;
}
