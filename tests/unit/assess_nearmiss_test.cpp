// Near misses: honest programs that come close to the BLOCKED line without crossing it (a
// refused run is the costliest mistake), each beside the twin that does cross it.
#include <gtest/gtest.h>

#include <string>

#include "assess_fixture.hpp"
#include "sandboxrun/assess.hpp"

using namespace sandboxrun;
using assess_fixture::level;

TEST(AssessNearMiss, AScannerThatNamesMinersRunsNone) {
  const std::string sigs = "import re, sys\nSIGS = [r'stratum\\+tcp://', r'xmrig']\n"
                           "data = open(sys.argv[1], 'rb').read()\n";
  EXPECT_EQ(level(sigs + "print([s for s in SIGS if re.search(s.encode(), data)])\n"), RiskLevel::low);
  EXPECT_EQ(level("import subprocess\nsubprocess.Popen(['./xmrig', '-o', 'stratum+tcp://pool.example:3333'])\n"),
            RiskLevel::blocked);
}

TEST(AssessNearMiss, DotfilesCopiedIntoItsOwnFolderAreNoPersistence) {
  const std::string dots = "import os, shutil\nDOTS = ['.bashrc', '.profile', '.vimrc']\nos.makedirs('backup', exist_ok=True)\n"
                           "home = os.path.expanduser('~')\n";
  EXPECT_EQ(level(dots + "for d in DOTS:\n    shutil.copy2(os.path.join(home, d), os.path.join('backup', d))\n"),
            RiskLevel::medium);
  // Written into, or copied onto, a startup file or authorized_keys: persistence.
  EXPECT_EQ(level(dots + "with open(os.path.join(home, '.bashrc'), 'a') as f:\n    f.write('python3 /tmp/.x.py &\\n')\n"),
            RiskLevel::blocked);
  EXPECT_EQ(level("import shutil, os\nshutil.copy('key.pub', os.path.expanduser('~/.ssh/authorized_keys'))\n"),
            RiskLevel::blocked);
  // Reading ~/.bashrc to list its aliases installs nothing.
  EXPECT_EQ(level("import os\nfor line in open(os.path.expanduser('~/.bashrc')):\n"
                  "    if line.startswith('alias '):\n        print(line.strip())\n"),
            RiskLevel::low);
}

TEST(AssessNearMiss, AnEncryptedBackupOfKeysIsNoRansom) {
  // A pattern globbed and its matches encrypted into one archive of its own: HIGH (secrets read).
  EXPECT_EQ(level("import glob, os\nfrom cryptography.fernet import Fernet\nf = Fernet(Fernet.generate_key())\n"
                  "keys = [open(p, 'rb').read() for p in glob.glob(os.path.expanduser('~/.ssh/id_*'))]\n"
                  "open('keys.enc', 'wb').write(f.encrypt(b''.join(keys)))\n"),
            RiskLevel::high);
  // The home tree walked and each file encrypted in place: ransomware.
  EXPECT_EQ(level("import os\nfrom cryptography.fernet import Fernet\nf = Fernet(Fernet.generate_key())\n"
                  "for d, _, fs in os.walk(os.path.expanduser('~')):\n    for n in fs:\n"
                  "        p = os.path.join(d, n)\n        data = open(p, 'rb').read()\n"
                  "        open(p, 'wb').write(f.encrypt(data))\n"),
            RiskLevel::blocked);
}

TEST(AssessNearMiss, ATemplateCompilerRunsTextBuiltFromItsInput) {
  // Lines appended at run time from the template: exec of input (HIGH), not a hidden constant.
  const std::string compiler = "import sys\ndef translate(text):\n    lines = ['def render(ctx):', '    out = []']\n"
                               "    for tok in text.split('{{'):\n"
                               "        lines.append(f'    out.append(str({tok}))')\n"
                               "    return '\\n'.join(lines)\n";
  EXPECT_EQ(level(compiler + "ns = {}\nexec(compile(translate(open(sys.argv[1]).read()), '<t>', 'exec'), ns)\n"),
            RiskLevel::high);
  // Constant pieces joined and run: hidden code.
  EXPECT_EQ(level("parts = ['imp', 'ort os; os.sys', 'tem(\"id\")']\nexec(''.join(parts))\n"), RiskLevel::blocked);
}

TEST(AssessNearMiss, ReportsThatReadModesAndCronTablesChangeNothing) {
  // A setuid audit tests st_mode for the bit; a chmod that sets it is HIGH.
  EXPECT_EQ(level("import os, stat, sys\nfor d, _, fs in os.walk(sys.argv[1]):\n    for n in fs:\n"
                  "        st = os.lstat(os.path.join(d, n))\n        if st.st_mode & stat.S_ISUID:\n"
                  "            print(os.path.join(d, n))\n"),
            RiskLevel::low);
  EXPECT_EQ(level("import os, stat, sys\np = sys.argv[1]\nos.chmod(p, os.stat(p).st_mode | stat.S_ISUID)\n"),
            RiskLevel::high);
  // /etc/crontab read and printed installs nothing; written to, it is persistence.
  EXPECT_EQ(level("for line in open('/etc/crontab'):\n    print(line.rstrip())\n"), RiskLevel::low);
  EXPECT_EQ(level("with open('/etc/crontab', 'a') as f:\n    f.write('* * * * * root /tmp/x\\n')\n"), RiskLevel::blocked);
}

TEST(AssessNearMiss, EveryProcessListedIsAnEnumerationItsOwnStatusIsNot) {
  // As the policy's account database enumerated: every process of the host (MEDIUM), not the
  // program's own /proc/self.
  EXPECT_EQ(level("import psutil\nfor p in psutil.process_iter(['pid', 'name']):\n    print(p.info)\n"), RiskLevel::medium);
  EXPECT_EQ(level("import glob\nfor f in glob.glob('/proc/*/cmdline'):\n    print(open(f, 'rb').read())\n"),
            RiskLevel::medium);
  EXPECT_EQ(level("print(open('/proc/self/status').read())\n"), RiskLevel::low);
}
