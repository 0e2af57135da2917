// Network policy through real sandboxes: `none` reaches nothing; `allowlist` reaches listed
// names only through the launcher's egress proxy, and every connection is reported and audited.
// Test hosts live on this machine's loopback only.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.hpp"

using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::run_binary;
using sandboxrun::testing::write_config;

namespace {

// A one-response-per-connection HTTP server on 127.0.0.1 (the "package index"): serves `files`
// by path, anything else with a fixed greeting.
class TinyHttpServer {
 public:
  explicit TinyHttpServer(std::map<std::string, std::string> files = {}) : files_(std::move(files)) {
    fd_ = sandboxrun::testing::listen_on_loopback(16, &port_);
    thread_ = std::thread([this] { serve(); });
  }
  ~TinyHttpServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  int hits() const { return hits_; }

 private:
  void serve() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++hits_;
      const std::string path = sandboxrun::testing::read_request_target(c);
      auto it = files_.find(path);
      std::string body = it != files_.end() ? it->second : "index says hello";
      std::string type = path.size() > 4 && path.substr(path.size() - 4) == ".whl" ? "application/octet-stream"
                                                                                   : "text/html";
      std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\nConnection: close\r\n\r\n" + body;
      (void)!write(c, resp.data(), resp.size());
      close(c);
    }
  }
  std::map<std::string, std::string> files_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> hits_{0};
  std::thread thread_;
};

const char* kProbe = R"(
import json, os, socket, errno, urllib.request, urllib.error, sys
port = int(sys.argv[1])
res = {'proxy_env': os.environ.get('HTTPS_PROXY', '')}
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except urllib.error.HTTPError as e:
        return 'HTTP %d' % e.code
    except Exception as e:
        return 'failed: %s' % type(e).__name__
res['allowed'] = get('http://pypi.test:%d/simple/' % port)
res['unlisted'] = get('http://evil-pypi.test:%d/' % port)
res['ip_literal'] = get('http://127.0.0.1:%d/' % port)
s = socket.socket(); s.settimeout(3)
try:
    s.connect(('127.0.0.1', port)); res['direct'] = 'connected'
except OSError as e:
    res['direct'] = errno.errorcode.get(e.errno, str(e))
# No DNS inside: an allowlisted name resolves only in the proxy. extra_hosts names are in the
# sandbox's /etc/hosts too, as with Docker's --add-host.
try:
    socket.getaddrinfo('files.pythonhosted.test', 80); res['dns'] = 'resolved'
except OSError:
    res['dns'] = 'failed'
try:
    res['etc_hosts'] = socket.gethostbyname('pypi.test')
except OSError:
    res['etc_hosts'] = 'failed'
print(json.dumps(res))
)";

}  // namespace

TEST(Network, AllowlistReachesListedNamesOnlyThroughTheProxy) {
  TinyHttpServer index;
  TempDir dir;
  std::string config = write_config(dir,
                                    "network_mode: allowlist\n"
                                    "network_allowlist: [pypi.test, '*.pythonhosted.test']\n"
                                    "extra_hosts:\n  pypi.test: 127.0.0.1\n");
  std::string log = dir.path() + "/audit.log";
  auto r = run_python(kProbe, {"--config", config, "--audit-log", log, "--", std::to_string(index.port())});
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
  auto j = nlohmann::json::parse(r.stdout_text(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.stdout_text() << r.result.value("stderr", "");
  EXPECT_EQ(j["proxy_env"], "http://127.0.0.1:3128");
  EXPECT_EQ(j["allowed"], "index says hello");
  EXPECT_EQ(j["unlisted"], "HTTP 403");
  EXPECT_EQ(j["ip_literal"], "HTTP 403");
  // EACCES where Landlock (ABI >= 4) limits TCP connect to the proxy's port, else nothing listens.
  EXPECT_TRUE(j["direct"] == "EACCES" || j["direct"] == "ECONNREFUSED")
      << j["direct"] << ": the host's loopback must be unreachable from inside";
  EXPECT_EQ(j["dns"], "failed");
  EXPECT_EQ(j["etc_hosts"], "127.0.0.1");
  EXPECT_EQ(index.hits(), 1);

  const auto& net = r.result["network"];
  EXPECT_EQ(net["allowed"], 1);
  EXPECT_EQ(net["denied"], 2);
  bool saw_allowed = false, saw_evil = false;
  for (const auto& c : net["connections"]) {
    if (c["host"] == "pypi.test" && c["verdict"] == "allowed") saw_allowed = c["bytes_down"].get<int>() > 0;
    if (c["host"] == "evil-pypi.test" && c["verdict"] == "denied") saw_evil = !c["reason"].get<std::string>().empty();
  }
  EXPECT_TRUE(saw_allowed) << net.dump();
  EXPECT_TRUE(saw_evil) << net.dump();
  std::string audit = sandboxrun::testing::read_text(log);
  EXPECT_NE(audit.find("\"event\":\"network\""), std::string::npos);
  EXPECT_NE(audit.find("evil-pypi.test"), std::string::npos) << "denials must be audited";
}

// A flood of refused requests (long names, 1,000 of them: more than a record may hold) is
// listed up to a bound and counted beyond it: the run still ends with its own status and a
// run_end record, and the log holds ~100 refusals, not all of them.
TEST(Network, RefusalFloodCannotUnauditTheRun) {
  TempDir dir;
  std::string config = write_config(dir, "network_mode: allowlist\nnetwork_allowlist: [pypi.test]\n");
  std::string log = dir.path() + "/audit.log";
  auto r = run_python(R"(import socket
pad = "x" * 200
for i in range(1000):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        s.sendall(b"GET http://%s%d.example/ HTTP/1.1\r\n\r\n" % (pad.encode(), i)); s.recv(100); s.close()
    except OSError:
        pass
print("done")
)",
                      {"--config", config, "--audit-log", log, "--timeout", "60"});
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
  EXPECT_EQ(r.stdout_text(), "done\n");
  EXPECT_EQ(r.result["denied"]["network"].size(), 100u);
  EXPECT_EQ(r.result["denied"].value("network_refused_count", 0), 1000);
  const std::string audit = sandboxrun::testing::read_text(log);
  EXPECT_NE(audit.find("\"event\":\"run_end\""), std::string::npos);
  size_t records = 0;
  for (size_t at = 0; (at = audit.find("\"event\":\"network\"", at)) != std::string::npos; ++at) ++records;
  EXPECT_EQ(records, 101u) << "100 refusals one by one and one record counting the rest";
  EXPECT_NE(audit.find("\"omitted\":900"), std::string::npos);
  auto verify = run_binary({"audit", "verify", "--log", log});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST(Network, NoneModeReachesNothingAndHasNoProxy) {
  TinyHttpServer index;
  auto r = run_python(kProbe, {"--", std::to_string(index.port())});
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.err;
  auto j = nlohmann::json::parse(r.stdout_text(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.stdout_text();
  EXPECT_EQ(j["proxy_env"], "");
  EXPECT_EQ(j["allowed"].get<std::string>().rfind("failed", 0), 0u) << j["allowed"];
  EXPECT_EQ(j["direct"], "ECONNREFUSED");
  EXPECT_EQ(j["dns"], "failed");
  EXPECT_EQ(j["etc_hosts"], "failed");
  EXPECT_EQ(index.hits(), 0);
  EXPECT_FALSE(r.result.contains("network"));
}

TEST(Network, InvalidAllowlistFailsClosed) {
  TempDir dir;
  std::string config = write_config(dir, "network_mode: allowlist\nnetwork_allowlist: ['*']\n");
  auto r = run_python("print('ran')\n", {"--config", config, "--audit-log", dir.path() + "/audit.log"});
  EXPECT_EQ(r.exec.exit_code, 125) << r.exec.out << r.exec.err;
  EXPECT_NE(r.exec.err.find("*"), std::string::npos) << "the message must name the bad entry: " << r.exec.err;
  // Refused before the sandbox started: the audit log has no run_start for it.
  std::string audit = sandboxrun::testing::read_text(dir.path() + "/audit.log");
  EXPECT_EQ(audit.find("\"event\":\"run_start\""), std::string::npos);
}

TEST(Network, PipInstallsAWheelFromAnAllowlistedIndex) {
  // The wheel is built by the test (host python3, stdlib zipfile): a real package index flow.
  TempDir work;
  std::string wheel = work.path() + "/hello_sr-1.0-py3-none-any.whl";
  std::string build = "python3 - '" + wheel + "' <<'PY'\n"
                      "import sys, zipfile\n"
                      "with zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
                      "    z.writestr('hello_sr/__init__.py', 'GREETING = \\'installed through the proxy\\'\\n')\n"
                      "    z.writestr('hello_sr-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: hello-sr\\nVersion: 1.0\\n')\n"
                      "    z.writestr('hello_sr-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
                      "    z.writestr('hello_sr-1.0.dist-info/RECORD', '')\n"
                      "PY";
  ASSERT_EQ(std::system(build.c_str()), 0) << "host python3 is needed to build the test wheel";
  std::string whl = sandboxrun::testing::read_text(wheel);
  ASSERT_FALSE(whl.empty());
  TinyHttpServer index({{"/simple/hello-sr/",
                         "<html><body><a href=\"/files/hello_sr-1.0-py3-none-any.whl\">hello_sr-1.0-py3-none-any.whl</a>"
                         "</body></html>"},
                        {"/files/hello_sr-1.0-py3-none-any.whl", whl}});
  TempDir dir;
  std::string config = write_config(dir,
                                    "network_mode: allowlist\n"
                                    "network_allowlist: [pypi.test]\n"
                                    "extra_hosts:\n  pypi.test: 127.0.0.1\n"
                                    "timeout: 120\n");
  const std::string port = std::to_string(index.port());
  auto r = run_python(
      "import subprocess, sys\n"
      "p = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-cache-dir', '--disable-pip-version-check',\n"
      "                    '--break-system-packages', '--target', '/tmp/site', '--index-url',\n"
      "                    'http://pypi.test:" + port + "/simple', '--trusted-host', 'pypi.test', 'hello-sr'],\n"
      "                   capture_output=True, text=True)\n"
      "print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)\n"
      "sys.path.insert(0, '/tmp/site')\n"
      "import hello_sr\n"
      "print(hello_sr.GREETING)\n",
      {"--config", config, "--audit-log", dir.path() + "/audit.log", "--trust", "trusted"});
  EXPECT_EQ(r.result.value("status", ""), "exited") << r.exec.err;
  EXPECT_EQ(r.stdout_text(), "installed through the proxy\n") << r.result.value("stderr", "");
  EXPECT_GE(r.result["network"]["allowed"].get<int>(), 2) << "the index page and the wheel";
}
