// Each isolation property, checked from inside a real sandbox.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "harness.hpp"

using sandboxrun::testing::run_python;
using sandboxrun::testing::TempDir;

namespace {

// Runs a script that prints one JSON object and returns it.
nlohmann::json probe(const std::string& script, const std::vector<std::string>& extra = {},
                     const std::vector<std::string>& env = {}) {
  auto r = run_python(script, extra, env);
  EXPECT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
  auto j = nlohmann::json::parse(r.stdout_text(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "stdout: " << r.stdout_text() << "\nstderr: " << r.result.value("stderr", "");
  return j.is_discarded() ? nlohmann::json::object() : j;
}

}  // namespace

TEST(Isolation, RunsAsUnprivilegedUserWithNoCapabilitiesNoNewPrivsAndSeccomp) {
  auto j = probe(R"(
import json, os
st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print(json.dumps({'sid': os.getsid(0), 'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(), 'groups': os.getgroups(),
  'caps': {k: st[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')},
  'nnp': st['NoNewPrivs'].strip(), 'seccomp': st['Seccomp'].strip()}))
)");
  EXPECT_EQ(j["sid"], 1) << "the sandbox must be its own session, away from the caller's terminal";
  EXPECT_EQ(j["uid"], 1000);
  EXPECT_EQ(j["euid"], 1000);
  EXPECT_EQ(j["gid"], 1000);
  EXPECT_TRUE(j["groups"].empty()) << j["groups"];
  for (const auto& [k, v] : j["caps"].items()) EXPECT_EQ(v, "0000000000000000") << k;
  EXPECT_EQ(j["nnp"], "1");
  EXPECT_EQ(j["seccomp"], "2");
}

TEST(Isolation, RootIsReadOnlyAndTmpIsWritableAndBounded) {
  // The probe tries to write /etc/passwd, which the assessor rightly blocks: the run overrides.
  auto j = probe(R"(
import json, errno, os
res = {}
for p in ('/etc/passwd', '/usr/x', '/x', '/run/sandbox/x', '/dev/x'):
    try:
        open(p, 'a').close(); res[p] = 'written'
    except OSError as e:
        res[p] = errno.errorcode[e.errno]
open('/tmp/ok', 'w').write('fine')
try:
    with open('/tmp/big', 'wb') as f:
        for _ in range(200):
            f.write(b'x' * (1 << 20))
    res['tmp_fill'] = 'unbounded'
except OSError as e:
    res['tmp_fill'] = errno.errorcode[e.errno]
print(json.dumps(res))
)", {"--override", "isolation test: the root file system must refuse these writes"});
  for (const char* p : {"/etc/passwd", "/usr/x", "/x", "/run/sandbox/x", "/dev/x"})
    EXPECT_TRUE(j[p] == "EROFS" || j[p] == "EACCES") << p << " -> " << j[p];
  EXPECT_EQ(j["tmp_fill"], "ENOSPC");
}

TEST(Isolation, NoNetworkButLoopback) {
  auto j = probe(R"(
import json, os, socket, errno
res = {'ifaces': sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:])}
for name, addr in (('public', ('1.1.1.1', 53)), ('private', ('10.0.0.1', 80))):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect(addr); res[name] = 'connected'
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e))
try:
    socket.getaddrinfo('example.com', 80); res['dns'] = 'resolved'
except OSError as e:
    res['dns'] = 'failed'
a = socket.socket(); a.bind(('127.0.0.1', 0)); a.listen(); b = socket.create_connection(a.getsockname())
res['loopback'] = 'ok'
print(json.dumps(res))
)");
  EXPECT_EQ(j["ifaces"], nlohmann::json::array({"lo"}));
  EXPECT_EQ(j["public"], "ENETUNREACH");
  EXPECT_EQ(j["private"], "ENETUNREACH");
  EXPECT_EQ(j["dns"], "failed");
  EXPECT_EQ(j["loopback"], "ok");
}

TEST(Isolation, HostLoopbackServicesAreUnreachable) {
  // A listener on the host's loopback must not be reachable from the sandbox's own loopback.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(s, 4), 0);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  auto j = probe("import json, socket, errno\ns = socket.socket()\ntry:\n    s.connect(('127.0.0.1', " +
                 std::to_string(port) +
                 "))\n    print(json.dumps('connected'))\nexcept OSError as e:\n    "
                 "print(json.dumps(errno.errorcode[e.errno]))\n");
  EXPECT_EQ(j, "ECONNREFUSED");
  close(s);
}

TEST(Isolation, HostProcessesAreInvisible) {
  auto j = probe(R"(
import json, os
print(json.dumps(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())))
)");
  // pid 1 (the sandbox's reaper) and the payload itself; nothing of the host.
  EXPECT_EQ(j, nlohmann::json::array({1, 2}));
}

TEST(Isolation, HostFilesAreUnreachable) {
  TempDir host;
  host.write("canary", "host secret");
  std::string log = host.path() + "/audit/audit.log";
  auto j = probe("import json, os\nprint(json.dumps({'canary': os.path.exists('" + host.path() +
                 "/canary'), 'audit': [p for p in ('" + log + "', '/var/log/sandboxrun') if os.path.exists(p)], 'root_home': os.listdir('/root') if os.access('/root', os.R_OK) else 'denied', "
                 "'sys': os.listdir('/sys'), 'cgroup': os.path.exists('/sys/fs/cgroup/memory')}))\n",
                 {"--audit-log", log});
  EXPECT_EQ(j["canary"], false);
  EXPECT_EQ(j["audit"], nlohmann::json::array()) << "the audit log must never be visible inside";
  EXPECT_EQ(j["sys"], nlohmann::json::array());
  EXPECT_EQ(j["cgroup"], false);
}

TEST(Isolation, CallerEnvironmentDoesNotLeak) {
  auto j = probe(R"(
import json, os
res = {'env': dict(os.environ)}
try:
    res['pid1_environ'] = open('/proc/1/environ', 'rb').read().decode('latin1')
except OSError as e:
    res['pid1_environ'] = 'denied'
res['pid1_cmdline'] = open('/proc/1/cmdline', 'rb').read().replace(b'\0', b'').decode('latin1')
print(json.dumps(res))
)",
                 {"--override", "probes what the sandbox leaks"}, {"SANDBOXRUN_TEST_SECRET=hunter2-token"});
  EXPECT_FALSE(j["env"].contains("SANDBOXRUN_TEST_SECRET"));
  EXPECT_EQ(j["env"].value("HOME", ""), "/tmp");
  EXPECT_EQ(j["pid1_environ"].get<std::string>().find("hunter2"), std::string::npos);
  EXPECT_EQ(j["pid1_cmdline"], "") << "the launcher's command line is visible at /proc/1/cmdline";
}

TEST(Isolation, HostnameDevAndProcAreMinimal) {
  auto j = probe(R"(
import json, os, socket, errno
res = {'hostname': socket.gethostname(), 'dev': sorted(os.listdir('/dev'))}
for p in ('/proc/sys/kernel/hostname', '/proc/sysrq-trigger'):
    try:
        open(p, 'w').write('x'); res[p] = 'written'
    except OSError as e:
        res[p] = errno.errorcode[e.errno]
for p in ('/proc/keys', '/proc/timer_list', '/proc/kallsyms'):
    res[p] = open(p).read() if os.path.exists(p) else ''
print(json.dumps(res))
)",
                 {"--override", "writes /proc/sys on purpose"});
  EXPECT_EQ(j["hostname"], "sandbox");
  EXPECT_EQ(j["dev"], nlohmann::json::parse(
                          R"(["fd","full","null","ptmx","pts","random","shm","stderr","stdin","stdout","urandom","zero"])"));
  EXPECT_NE(j["/proc/sys/kernel/hostname"], "written");
  EXPECT_NE(j["/proc/sysrq-trigger"], "written");
  EXPECT_EQ(j["/proc/keys"], "");
  EXPECT_EQ(j["/proc/timer_list"], "");
  EXPECT_EQ(j["/proc/kallsyms"], "");
}

TEST(Isolation, ScriptIsTheAssessedCopyAndReadOnly) {
  auto j = probe(R"(
import json, os, sys
print(json.dumps({'argv0': sys.argv[0], 'args': sys.argv[1:], 'cwd': os.getcwd(),
                  'writable': os.access(sys.argv[0], os.W_OK)}))
)",
                 {"--", "--flag", "two words"});
  EXPECT_EQ(j["argv0"], "/work/job.py");
  EXPECT_EQ(j["args"], nlohmann::json::parse(R"(["--flag","two words"])"));
  EXPECT_EQ(j["cwd"], "/work");
  EXPECT_EQ(j["writable"], false);
}
