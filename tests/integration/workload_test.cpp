// Ordinary programs must work inside: a sandbox that breaks them gets switched off.
#include <gtest/gtest.h>

#include "harness.hpp"

using sandboxrun::testing::run_python;

namespace {

void expect_ok(const std::string& script, const std::string& expected_stdout,
               const std::vector<std::string>& extra = {}) {
  auto r = run_python(script, extra);
  EXPECT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
  EXPECT_EQ(r.result.value("exit_code", -1), 0) << r.result.value("stderr", "");
  EXPECT_EQ(r.stdout_text(), expected_stdout) << r.result.value("stderr", "");
}

}  // namespace

TEST(Workload, StandardLibraryImports) {
  expect_ok("import json, csv, sqlite3, decimal, ssl, hashlib, zlib, ctypes, asyncio, multiprocessing, "
            "subprocess, threading, pty, mmap, socket, select, uuid, datetime, re, tempfile, shutil, "
            "unittest, xml.etree.ElementTree, email, http.client, urllib.request, venv, lzma, bz2\n"
            "print(decimal.Decimal('0.1') + decimal.Decimal('0.2'))\n",
            "0.3\n", {"--trust", "trusted"});
}

TEST(Workload, Threads) {
  expect_ok("import threading\nres = []\nts = [threading.Thread(target=lambda i=i: res.append(i * i)) for i in range(16)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\nprint(sum(res))\n",
            "1240\n");
}

// Named time zones (tzdata in the image, as in Docker's python images) and the account of the
// run's user (getpass, pwd, `~`).
TEST(Workload, TimeZonesAndTheCurrentUser) {
  expect_ok("import datetime, getpass, os, pwd, zoneinfo\n"
            "d = datetime.datetime(2026, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo('Europe/Paris'))\n"
            "print(d.utcoffset(), getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir, os.path.expanduser('~'))\n",
            "2:00:00 sandbox /tmp /tmp\n");
}

TEST(Workload, SubprocessAndShell) {
  expect_ok("import subprocess\nprint(subprocess.run(['python3', '-c', 'print(6*7)'], capture_output=True, "
            "text=True).stdout.strip())\nprint(subprocess.run('echo hi | tr a-z A-Z', shell=True, capture_output=True, "
            "text=True).stdout.strip())\n",
            "42\nHI\n");
}

TEST(Workload, MultiprocessingForkAndSpawn) {
  expect_ok("import multiprocessing as mp\n"
            "def sq(x): return x * x\n"
            "if __name__ == '__main__':\n"
            "    for method in ('fork', 'spawn', 'forkserver'):\n"
            "        with mp.get_context(method).Pool(2) as p:\n"
            "            print(method, sum(p.map(sq, range(10))))\n"
            "    q = mp.Queue(); l = mp.Lock()\n"
            "    with l: q.put('sem ok')\n"
            "    print(q.get())\n",
            "fork 285\nspawn 285\nforkserver 285\nsem ok\n");
}

TEST(Workload, AsyncioWithSubprocessesAndSockets) {
  expect_ok("import asyncio\n"
            "async def handle(r, w):\n"
            "    w.write((await r.readline()).upper()); await w.drain(); w.close()\n"
            "async def main():\n"
            "    srv = await asyncio.start_server(handle, '127.0.0.1', 0)\n"
            "    port = srv.sockets[0].getsockname()[1]\n"
            "    r, w = await asyncio.open_connection('127.0.0.1', port)\n"
            "    w.write(b'ping\\n'); await w.drain()\n"
            "    print((await r.readline()).decode().strip())\n"
            "    p = await asyncio.create_subprocess_exec('echo', 'sub', stdout=asyncio.subprocess.PIPE)\n"
            "    print((await p.communicate())[0].decode().strip())\n"
            "    await asyncio.gather(*(asyncio.sleep(0.01) for _ in range(100)))\n"
            "    srv.close()\n"
            "asyncio.run(main())\n",
            "PING\nsub\n");
}

TEST(Workload, Sqlite3OnDiskInTmp) {
  expect_ok("import sqlite3\ndb = sqlite3.connect('/tmp/t.db')\ndb.execute('pragma journal_mode=wal')\n"
            "db.execute('create table t(x)')\ndb.executemany('insert into t values (?)', [(i,) for i in range(1000)])\n"
            "db.commit()\nprint(db.execute('select count(*), sum(x) from t').fetchone())\n",
            "(1000, 499500)\n");
}

TEST(Workload, SignalsAndTimers) {
  expect_ok("import signal, os, time\nhits = []\nsignal.signal(signal.SIGALRM, lambda *a: hits.append('alrm'))\n"
            "signal.signal(signal.SIGUSR1, lambda *a: hits.append('usr1'))\nsignal.setitimer(signal.ITIMER_REAL, 0.05)\n"
            "time.sleep(0.2)\nos.kill(os.getpid(), signal.SIGUSR1)\nprint(hits)\n",
            "['alrm', 'usr1']\n");
}

TEST(Workload, PseudoTerminals) {
  expect_ok("import os, pty\nm, s = pty.openpty()\nos.write(m, b'hello\\n')\nprint(os.read(s, 100).strip().decode())\n"
            "print(os.isatty(s), os.ttyname(s).startswith('/dev/pts/'))\n"
            "pid, fd = pty.fork()\nif pid == 0:\n    print('child on a pty', flush=True); os._exit(0)\n"
            "print(os.read(fd, 100).decode().strip())\nos.waitpid(pid, 0)\n",
            "hello\nTrue True\nchild on a pty\n");
}

TEST(Workload, MmapAnonymousAndFileBacked) {
  expect_ok("import mmap\nm = mmap.mmap(-1, 1 << 20)\nm[0:5] = b'hello'\nprint(m[0:5].decode())\n"
            "with open('/tmp/f', 'wb') as f: f.write(b'x' * 4096)\n"
            "with open('/tmp/f', 'r+b') as f:\n    fm = mmap.mmap(f.fileno(), 0)\n    fm[0:2] = b'ok'\n    fm.flush()\n"
            "print(open('/tmp/f', 'rb').read(2).decode())\n",
            "hello\nok\n");
}

TEST(Workload, TempfilesAndSharedMemory) {
  expect_ok("import tempfile, os\nfrom multiprocessing import shared_memory\n"
            "with tempfile.NamedTemporaryFile() as f: f.write(b'x'); f.flush(); print(os.path.getsize(f.name))\n"
            "sm = shared_memory.SharedMemory(create=True, size=1024)\nsm.buf[0] = 7\nprint(sm.buf[0])\nsm.close(); sm.unlink()\n",
            "1\n7\n");
}

TEST(Workload, DockersDefaultSeccompProfileWorksUnchanged) {
  sandboxrun::testing::TempDir d;
  std::string profile = SANDBOXRUN_DOCKER_PROFILE;
  auto config = sandboxrun::testing::write_config(
      d, "security_opt: [no-new-privileges, seccomp=" + profile + "]\ntrust_levels:\n  untrusted: {}\n");
  auto r = run_python("import threading, subprocess, ctypes, errno\n"
                      "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
                      "print(subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout.strip())\n"
                      "libc = ctypes.CDLL(None, use_errno=True)\n"
                      "print('kexec_load', libc.syscall(246, 0, 0, None, 0), errno.errorcode[ctypes.get_errno()])\n"
                      "ctx = ctypes.c_ulong(0)\n"
                      "print('io_setup', libc.syscall(206, 1, ctypes.byref(ctx)))\n",
                      {"--config", config, "--audit-log", d.path() + "/audit.log", "--override", "probes kexec_load"});
  EXPECT_EQ(r.result.value("status", ""), "exited") << r.exec.err << r.result.value("stderr", "");
  // io_setup: Docker's profile allows it, our untrusted profile does not, so this shows which
  // profile is in force.
  EXPECT_EQ(r.stdout_text(), "thread\nsub\nkexec_load -1 EPERM\nio_setup 0\n") << r.result.value("stderr", "");
}

// A program may lower its own scheduling (SCHED_BATCH/IDLE, posix_spawn's setscheduler), as under
// Docker and podman; raising it still needs CAP_SYS_NICE, which no sandbox has, and the kernel
// refuses that itself (EPERM from the kernel, not the profile: nothing shows up as denied).
TEST(Workload, ProgramsMayLowerTheirSchedulingButNotRaiseIt) {
  auto r = run_python(R"PY(import os, subprocess, sys
# As CPython's own test_posix does: the spawned child sets the current policy again.
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", "import os; print(os.sched_getscheduler(0) == os.SCHED_OTHER)"],
                     os.environ, scheduler=(os.sched_getscheduler(0), os.sched_param(0)))
print(os.waitpid(pid, 0)[1])
os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
print(os.sched_getscheduler(0) == os.SCHED_BATCH)
os.sched_setparam(0, os.sched_param(0))
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    print("raised")
except PermissionError:
    print("refused")
)PY",
                      {"--trust", "untrusted"});
  EXPECT_EQ(r.result.value("exit_code", -1), 0) << r.result.value("stderr", "");
  EXPECT_EQ(r.stdout_text(), "True\n0\nTrue\nrefused\n") << r.result.value("stderr", "");
  EXPECT_FALSE(r.result.contains("denied")) << r.result["denied"].dump();
}
