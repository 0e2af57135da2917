// Dependencies through real sandboxes: phase 1 installs from a loopback package index (a PEP 503
// simple index of wheels this test builds with zipfile), phase 2 runs with the network off, and
// the cache serves later runs without any connection. No internet is used.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "harness.hpp"

using sandboxrun::testing::read_text;
using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;
namespace fs = std::filesystem;

namespace {

// A pure-Python wheel built with the host's python3 and zipfile; returns its bytes.
std::string build_wheel(const TempDir& dir, const std::string& name, const std::string& version,
                        const std::string& module_body) {
  const std::string file = dir.path() + "/" + name + "-" + version + "-py3-none-any.whl";
  const std::string cmd = "python3 - '" + file + "' '" + name + "' '" + version + "' '" + module_body + "' <<'PY'\n"
                          "import sys, zipfile\n"
                          "f, n, v, body = sys.argv[1:]\n"
                          "with zipfile.ZipFile(f, 'w') as z:\n"
                          "    z.writestr(n + '/__init__.py', body + '\\n')\n"
                          "    z.writestr(f'{n}-{v}.dist-info/METADATA', f'Metadata-Version: 2.1\\nName: {n}\\nVersion: {v}\\n')\n"
                          "    z.writestr(f'{n}-{v}.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
                          "    z.writestr(f'{n}-{v}.dist-info/RECORD', '')\n"
                          "PY";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("host python3 is needed to build the test wheels");
  return read_text(file);
}

std::string sha256_of(const TempDir& dir, const std::string& file) {
  const std::string out = dir.path() + "/sum";
  std::system(("sha256sum '" + dir.path() + "/" + file + "' | cut -c1-64 > '" + out + "'").c_str());
  std::string s = read_text(out);
  return s.substr(0, 64);
}

// A PEP 503 index on 127.0.0.1, one response per connection, a thread per connection.
class PackageIndex {
 public:
  explicit PackageIndex(std::map<std::string, std::string> files) : files_(std::move(files)) {
    fd_ = sandboxrun::testing::listen_on_loopback(64, &port_);
    thread_ = std::thread([this] { serve(); });
  }
  ~PackageIndex() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  int hits(const std::string& path) {
    std::lock_guard l(mu_);
    return hits_[path];
  }
  int total_hits() {
    std::lock_guard l(mu_);
    int n = 0;
    for (const auto& [k, v] : hits_) n += v;
    return n;
  }

 private:
  void serve() {
    for (;;) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::thread([this, c] { answer(c); }).detach();
    }
  }
  void answer(int c) {
    const std::string path = sandboxrun::testing::read_request_target(c);
    {
      std::lock_guard l(mu_);
      ++hits_[path];
    }
    auto it = files_.find(path);
    std::string status = it == files_.end() ? "404 Not Found" : "200 OK";
    std::string body = it == files_.end() ? "not here" : it->second;
    std::string type = path.ends_with(".whl") ? "application/octet-stream" : "text/html";
    std::string resp = "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    (void)!write(c, resp.data(), resp.size());
    close(c);
  }
  std::map<std::string, std::string> files_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, int> hits_;
};

// One index with the packages the tests install, a config pointing at it and a private cache.
struct Fixture {
  TempDir dir;
  std::string wheel_sha;
  std::unique_ptr<PackageIndex> index;
  std::string config;
  std::string cache;
  explicit Fixture(const std::string& config_extra = "") {
    std::map<std::string, std::string> files;
    for (const char* n : {"alpha_sr", "beta_sr", "gamma_sr"}) {
      const std::string whl = std::string(n) + "-1.0-py3-none-any.whl";
      files["/files/" + whl] = build_wheel(dir, n, "1.0", std::string("NAME = \"") + n + "\"");
      std::string project = n;
      project.replace(project.find('_'), 1, "-");
      files["/simple/" + project + "/"] = "<html><body><a href=\"/files/" + whl + "#sha256=" + sha256_of(dir, whl) +
                                          "\">" + whl + "</a></body></html>";
    }
    wheel_sha = sha256_of(dir, "alpha_sr-1.0-py3-none-any.whl");
    // A project with only a source distribution: refused with --only-binary :all:.
    files["/simple/delta-sr/"] = "<a href=\"/files/delta_sr-1.0.tar.gz\">delta_sr-1.0.tar.gz</a>";
    files["/files/delta_sr-1.0.tar.gz"] = "not really a tarball";
    index = std::make_unique<PackageIndex>(files);
    config = write_config(dir, "extra_hosts: {pkgs.test: 127.0.0.1}\n"
                               "allow_networks: [127.0.0.0/8]\n"
                               "package_index: {url: 'http://pkgs.test:" + std::to_string(index->port()) +
                                   "/simple', hosts: []}\n" + config_extra);
    cache = dir.path() + "/cache";
  }
  sandboxrun::testing::Sandboxed run(const std::string& script, const std::string& requirements,
                                     std::vector<std::string> extra = {}, const std::string& other_config = {}) {
    const std::string req = dir.write("requirements-" + std::to_string(++n_) + ".txt", requirements);
    std::vector<std::string> args = {"--config", other_config.empty() ? config : other_config, "--audit-log", dir.path() + "/audit.log", "--requirements", req};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_python(script, args, {"SANDBOXRUN_CACHE_DIR=" + cache});
  }
  size_t entries() const {
    std::error_code ec;
    size_t n = 0;
    for (auto it = fs::directory_iterator(cache + "/deps/entries", ec); !ec && it != fs::directory_iterator(); ++it) ++n;
    return n;
  }
  std::atomic<int> n_{0};
};

// Imports the installed package, then shows that phase 2 has no network: a connection to the
// index's own port is refused at once.
const char* kImportAndProbe = R"(
import socket, sys, time
import alpha_sr
print(alpha_sr.NAME)
s = socket.socket(); s.settimeout(20)
t = time.monotonic()
try:
    s.connect(('127.0.0.1', int(sys.argv[1]))); print('connected')
except OSError as e:
    print('refused' if time.monotonic() - t < 2 else 'slow', e.errno)
)";

}  // namespace

TEST(Deps, FirstRunInstallsSecondRunIsACacheHitWithoutConnections) {
  Fixture f;
  const std::string port = std::to_string(f.index->port());
  auto first = f.run(kImportAndProbe, "alpha-sr==1.0\n", {"--", port});
  ASSERT_EQ(first.result.value("status", ""), "exited") << first.exec.err << first.result.dump();
  EXPECT_EQ(first.stdout_text(), "alpha_sr\nrefused 111\n") << first.result.value("stderr", "");
  EXPECT_EQ(first.result["limits"]["network_mode"], "none");
  const auto& d = first.result["deps"];
  EXPECT_EQ(d["cache"], "miss");
  EXPECT_EQ(d["requirements"], nlohmann::json::array({"alpha-sr==1.0"}));
  ASSERT_EQ(d["installed"].size(), 1u) << d.dump();
  EXPECT_EQ(d["installed"][0]["name"], "alpha_sr");  // as its METADATA spells it
  EXPECT_EQ(d["installed"][0]["version"], "1.0");
  EXPECT_EQ(d["installed"][0]["sha256"], f.wheel_sha);
  ASSERT_GE(d["connections"].size(), 2u) << "the project page and the wheel";
  for (const auto& c : d["connections"]) EXPECT_EQ(c["host"], "pkgs.test");
  EXPECT_EQ(f.index->hits("/files/alpha_sr-1.0-py3-none-any.whl"), 1);
  const int hits_after_first = f.index->total_hits();

  auto second = f.run(kImportAndProbe, "# the same set, written differently\nalpha-sr==1.0   \n", {"--", port});
  ASSERT_EQ(second.result.value("status", ""), "exited") << second.exec.err;
  EXPECT_EQ(second.stdout_text(), "alpha_sr\nrefused 111\n");
  EXPECT_EQ(second.result["deps"]["cache"], "hit");
  EXPECT_EQ(second.result["deps"]["connections"].size(), 0u);
  EXPECT_EQ(f.index->total_hits(), hits_after_first) << "a cache hit makes no connection";

  const std::string audit = read_text(f.dir.path() + "/audit.log");
  EXPECT_NE(audit.find("\"event\":\"deps\""), std::string::npos);
  EXPECT_NE(audit.find(f.wheel_sha), std::string::npos) << "the installed wheel's sha256 is audited";
  EXPECT_EQ(sandboxrun::testing::run_binary({"audit", "verify", "--log", f.dir.path() + "/audit.log"}).exit_code, 0);
}

TEST(Deps, ConfigRequirementsAreMergedWithTheRequestsAndImagesAreListedByName) {
  Fixture f("requirements: [alpha-sr==1.0]\n");
  auto r = f.run("import alpha_sr, beta_sr; print(alpha_sr.NAME, beta_sr.NAME)\n", "beta-sr==1.0\n");
  EXPECT_EQ(r.stdout_text(), "alpha_sr beta_sr\n") << r.exec.err << r.result.value("stderr", "");
  EXPECT_EQ(r.result["deps"]["requirements"], nlohmann::json::array({"alpha-sr==1.0", "beta-sr==1.0"}));
  auto ls = sandboxrun::testing::run_binary({"deps", "ls", "--config", f.config}, {"SANDBOXRUN_CACHE_DIR=" + f.cache});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("alpha-sr==1.0, beta-sr==1.0"), std::string::npos) << ls.out;
  auto rm = sandboxrun::testing::run_binary({"deps", "rm", "--all", "--config", f.config},
                                            {"SANDBOXRUN_CACHE_DIR=" + f.cache});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(f.entries(), 0u);
  auto images = sandboxrun::testing::run_binary({"image", "ls"},
                                                {"SANDBOXRUN_IMAGE_STORE=" + sandboxrun::testing::source_dir()});
  EXPECT_EQ(images.exit_code, 0) << images.err;
  EXPECT_NE(images.out.find("default       sha256:"), std::string::npos) << images.out;
}

TEST(Deps, ConcurrentFirstRunsBuildTheEntryOnce) {
  Fixture f;
  sandboxrun::testing::Sandboxed a, b;
  std::thread ta([&] { a = f.run("import beta_sr; print(beta_sr.NAME)\n", "beta-sr==1.0\n"); });
  std::thread tb([&] { b = f.run("import beta_sr; print(beta_sr.NAME)\n", "beta-sr==1.0\n"); });
  ta.join();
  tb.join();
  EXPECT_EQ(a.stdout_text(), "beta_sr\n") << a.exec.err << a.result.value("stderr", "");
  EXPECT_EQ(b.stdout_text(), "beta_sr\n") << b.exec.err << b.result.value("stderr", "");
  std::multiset<std::string> kinds = {a.result["deps"].value("cache", ""), b.result["deps"].value("cache", "")};
  EXPECT_EQ(kinds, (std::multiset<std::string>{"hit", "miss"}));
  EXPECT_EQ(f.index->hits("/files/beta_sr-1.0-py3-none-any.whl"), 1) << "the second run waited and reused";
  EXPECT_EQ(f.entries(), 1u);
}

TEST(Deps, HashMismatchMissingPackageSdistAndDeadIndexFailFastAndCacheNothing) {
  Fixture f;
  // An index nobody listens on: the port of a socket that was closed again.
  TempDir dead_dir;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  const std::string dead = write_config(dead_dir, "extra_hosts: {pkgs.test: 127.0.0.1}\nallow_networks: [127.0.0.0/8]\n"
                                                  "package_index: {url: 'http://pkgs.test:" +
                                                      std::to_string(ntohs(a.sin_port)) + "/simple', hosts: []}\n");
  struct Case {
    std::string requirements, reason, config;
  };
  for (const Case& c : {Case{"alpha-sr==1.0 --hash=sha256:" + std::string(64, '0') + "\n", "HASH", ""},
                        Case{"nothere-sr==1.0\n", "nothere-sr", ""},
                        Case{"delta-sr==1.0\n", "delta-sr", ""},
                        Case{"alpha-sr==1.0\n", "alpha-sr", dead}}) {
    const auto start = std::chrono::steady_clock::now();
    auto r = f.run("print('must not run')\n", c.requirements, {}, c.config);
    const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exec.exit_code, 125) << r.exec.err;
    EXPECT_LT(secs, 20) << "failure must be fast";
    EXPECT_EQ(r.result.value("stdout", ""), "");
    EXPECT_NE(r.exec.err.find(c.reason), std::string::npos) << "pip's reason must be shown: " << r.exec.err;
    EXPECT_NE(r.exec.err.find("installing the requirements failed"), std::string::npos) << r.exec.err;
    // A dead index is named as such (pip itself only says "no matching distribution").
    if (!c.config.empty()) {
      EXPECT_NE(r.exec.err.find("the package index could not be reached: pkgs.test:"), std::string::npos) << r.exec.err;
    }
    EXPECT_EQ(f.entries(), 0u) << c.requirements;
  }
  const std::string audit = read_text(f.dir.path() + "/audit.log");
  EXPECT_NE(audit.find("\"status\":\"failed\""), std::string::npos) << "failed installs are audited";
  EXPECT_EQ(audit.find("\"event\":\"run_start\""), std::string::npos) << "the program never started";
}

TEST(Deps, ATruncatedCacheEntryIsRebuiltNotUsed) {
  Fixture f;
  const char* script = "import gamma_sr; print(gamma_sr.NAME)\n";
  auto first = f.run(script, "gamma-sr==1.0\n");
  ASSERT_EQ(first.stdout_text(), "gamma_sr\n") << first.exec.err;
  const std::string key = first.result["deps"]["key"];
  const std::string module = f.cache + "/deps/entries/" + key + "/site/gamma_sr/__init__.py";
  ASSERT_EQ(truncate(module.c_str(), 3), 0) << module;
  auto second = f.run(script, "gamma-sr==1.0\n");
  EXPECT_EQ(second.stdout_text(), "gamma_sr\n") << second.exec.err << second.result.value("stderr", "");
  EXPECT_EQ(second.result["deps"]["cache"], "miss");
  EXPECT_NE(second.result["deps"].value("rebuilt", "").find("gamma_sr/__init__.py"), std::string::npos)
      << second.result["deps"].dump();
  EXPECT_EQ(f.index->hits("/files/gamma_sr-1.0-py3-none-any.whl"), 2);
}

TEST(Deps, ScienceImageImportsTheStackAndWritesAPlot) {
  const bool ci = std::getenv("CI") && std::string(std::getenv("CI")) == "true";
  if (!fs::exists(sandboxrun::testing::source_dir() + "/rootfs/science/usr")) {
    if (ci) FAIL() << "rootfs/science is missing: CI must build it (scripts/build-image.sh science)";
    GTEST_SKIP() << "rootfs/science is not built (scripts/build-image.sh science); skipped outside CI";
  }
  auto r = run_python(
      "import numpy, pandas, matplotlib, scipy\n"
      "matplotlib.use('Agg')\n"
      "import matplotlib.pyplot as plt\n"
      "df = pandas.DataFrame({'x': numpy.arange(10), 'y': numpy.arange(10) ** 2})\n"
      "df.plot(x='x', y='y'); plt.savefig('/tmp/plot.png')\n"
      "import os; print(open('/tmp/plot.png', 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n', os.path.getsize('/tmp/plot.png') > 1000)\n",
      {"--image", "science", "--trust", "trusted"});
  EXPECT_EQ(r.result.value("status", ""), "exited") << r.exec.err << r.result.value("stderr", "");
  EXPECT_EQ(r.stdout_text(), "True True\n") << r.result.value("stderr", "");
}
