#!/usr/bin/env python3
"""Sessions, timed by their caller (scripts/bench.sh session).
A `1 + 1` cell, end to end:
  local driver   the session driver (src/session/driver.py) under the image's python3 on the host,
                 spoken to through pipes: the cost of the protocol without a sandbox
  session        `sandboxrun repl --json`: the same cell in a live sandboxed session
  session run    `sandboxrun session run ID -`: the same, a client process per cell (the CLI)
  docker exec    `docker exec C python3 -c ...` into a running container of the same image (a
                 new interpreter each time: docker keeps no interpreter state); when docker runs
  one-shot run   `sandboxrun --json` of a file holding the cell: a fresh sandbox and interpreter
A plot cell in a science session against the same cell in the local driver (rootfs/science).
50 idle sessions (memory per session: PSS of each holder and its sandbox), then 8 sessions
running cells at once (failures, and what is left after they stop).
usage: bench_session.py SANDBOXRUN ROOTFS WORKDIR [CELLS]
"""
import glob
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def read_frame(f):
    n = struct.unpack(">I", f.read(4))[0]
    return json.loads(f.read(n))


def local_driver(rootfs, work, cells, code="1 + 1", setup=None):
    """The driver in the image, on the host without a sandbox: chroot, the driver bound in."""
    shutil.copy(os.path.join(ROOT, "src", "session", "driver.py"), os.path.join(work, "driver.py"))
    p = subprocess.Popen(["unshare", "-m", "sh", "-c", f"mount --bind {work} {rootfs}/mnt && mount --rbind /dev {rootfs}/dev && "
                          f"mount -t tmpfs tmpfs {rootfs}/tmp && mount -t proc proc {rootfs}/proc && "
                          f"exec chroot {rootfs} sh -c 'cd /mnt && exec python3 -I /mnt/driver.py'"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read_frame(p.stdout)  # ready
    n = 0
    if setup:
        n += 1
        p.stdin.write(frame({"op": "run", "id": n, "code": setup}))
        p.stdin.flush()
        read_frame(p.stdout)
    times = []
    for _ in range(cells):
        n += 1
        t = time.perf_counter()
        p.stdin.write(frame({"op": "run", "id": n, "code": code}))
        p.stdin.flush()
        reply = read_frame(p.stdout)
        times.append(time.perf_counter() - t)
        assert reply["status"] == "ok", reply
    p.stdin.close()
    p.wait()
    return times


def cli(sandboxrun, *args, data=None):
    return subprocess.run([sandboxrun, "session", *args], input=data, capture_output=True, check=True).stdout


def start(sandboxrun, work, *extra):
    out = cli(sandboxrun, "start", "--audit-log", os.path.join(work, "session-audit.log"), *extra)
    return out.decode().strip().splitlines()[-1]


def session_run(sandboxrun, work, cells, code="1 + 1", setup=None, extra=()):
    sid = start(sandboxrun, work, *extra)
    if setup:
        cli(sandboxrun, "run", sid, "-", data=setup.encode())
    times = []
    for _ in range(cells):
        t = time.perf_counter()
        reply = json.loads(cli(sandboxrun, "run", sid, "-", "--json", data=code.encode()))
        times.append(time.perf_counter() - t)
        assert reply["status"] == "ok", reply
    cli(sandboxrun, "stop", sid)
    return times


def docker_exec(rootfs, cells):
    if not shutil.which("docker") or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return None
    image = "sandboxrun-bench:" + os.path.basename(rootfs)
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        subprocess.run(f"tar -C {rootfs} -c . | docker import - {image}", shell=True, check=True, capture_output=True)
    name = f"sandboxrun-bench-{os.getpid()}"
    subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", "--name", name, image, "sleep", "600"],
                   check=True, capture_output=True)
    try:
        times = []
        for _ in range(cells):
            t = time.perf_counter()
            out = subprocess.run(["docker", "exec", name, "python3", "-c", "print(1 + 1)"], capture_output=True,
                                 check=True).stdout
            times.append(time.perf_counter() - t)
            assert out == b"2\n", out
        return times
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def session(sandboxrun, work, cells):
    p = subprocess.Popen([sandboxrun, "repl", "--json", "--audit-log", os.path.join(work, "session-audit.log")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    times = []
    for _ in range(cells):
        t = time.perf_counter()
        p.stdin.write("1 + 1\n\n")
        p.stdin.flush()
        reply = json.loads(p.stdout.readline())
        times.append(time.perf_counter() - t)
        assert reply["result"]["text/plain"] == "2", reply
    p.stdin.close()
    p.wait()
    return times


def one_shot(sandboxrun, work, runs):
    job = os.path.join(work, "cell.py")
    with open(job, "w") as f:
        f.write("print(1 + 1)\n")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run([sandboxrun, "--json", "--audit-log", os.path.join(work, "oneshot-audit.log"), job],
                             capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - t)
        assert json.loads(out)["stdout"] == "2\n"
    return times


def print_rows(rows):
    base = statistics.median(rows[0][1])
    for name, t in rows:
        if t is None:
            print(f"  {name:<46} (docker is not running here)")
            continue
        p50, p90 = statistics.median(t), statistics.quantiles(t, n=10)[-1]
        print(f"  {name:<46} {p50 * 1000:8.3f} ms p50 {p90 * 1000:8.3f} ms p90   "
              f"{p50 / base:6.2f}x  +{(p50 - base) * 1000:.3f} ms over the local driver")


def tree_pss_kib(pid):
    """PSS of a process and its descendants (threads' children included), in KiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def leftovers(sandboxrun, ids, pids):
    def running(p):  # a zombie has ended; who reaps it is up to this host's pid 1
        try:
            with open(f"/proc/{p}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    alive = [p for p in pids if running(p)]
    listed = json.loads(cli(sandboxrun, "ls", "--json"))
    cgroups = [c for c in glob.glob("/sys/fs/cgroup/*/sandboxrun*/*") + glob.glob("/sys/fs/cgroup/sandboxrun*/*")
               if any(i in c for i in ids)]
    return f"{len(alive)} holders alive, {len(listed)} sessions listed, {len(cgroups)} cgroups left"


def idle_and_concurrent(sandboxrun, work):
    ids = [start(sandboxrun, work, "--caller", f"bench{i}") for i in range(50)]
    time.sleep(1)
    infos = json.loads(cli(sandboxrun, "ls", "--json"))
    pss = [tree_pss_kib(i["pid"]) for i in infos]
    print(f"  50 idle sessions: {len(infos)} listed, PSS per session (holder + sandbox) "
          f"{statistics.median(pss) / 1024:.1f} MiB median, {sum(pss) / 1024:.0f} MiB in all")
    pids = [i["pid"] for i in infos]
    for sid in ids:
        cli(sandboxrun, "stop", sid)
    time.sleep(1)
    print(f"  after stopping them: {leftovers(sandboxrun, ids, pids)}")

    ids = [start(sandboxrun, work, "--caller", f"conc{i}") for i in range(8)]
    pids = [i["pid"] for i in json.loads(cli(sandboxrun, "ls", "--json"))]
    failures, done = [], []
    code = b"total = sum(i * i for i in range(200000))\ntotal"

    def worker(sid):
        for _ in range(25):
            try:
                r = json.loads(cli(sandboxrun, "run", sid, "-", "--json", data=code))
                (done if r["status"] == "ok" else failures).append(r["status"])
            except subprocess.CalledProcessError as e:
                failures.append(str(e))
    t = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(sid,)) for sid in ids]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    for sid in ids:
        cli(sandboxrun, "stop", sid)
    time.sleep(1)
    print(f"  8 sessions at once, 25 cells each: {len(done)} ok, {len(failures)} failed, {wall:.1f} s; "
          f"after stop: {leftovers(sandboxrun, ids, pids)}")


def main():
    sandboxrun, rootfs, work = sys.argv[1:4]
    cells = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    os.environ["SANDBOXRUN_SESSIONS_DIR"] = sessions = os.path.join(work, "sessions")
    os.makedirs(sessions, mode=0o700, exist_ok=True)
    print_rows([("local driver (no sandbox)", local_driver(rootfs, work, cells)),
                ("session (sandboxrun repl)", session(sandboxrun, work, cells)),
                ("session (sandboxrun session run, a CLI per cell)", session_run(sandboxrun, work, cells // 4)),
                ("docker exec into a running container", docker_exec(rootfs, cells // 10)),
                ("one-shot run (sandboxrun --json)", one_shot(sandboxrun, work, max(10, cells // 10)))])
    science = os.path.join(os.path.dirname(rootfs), "science")
    if os.path.isdir(os.path.join(science, "usr")):
        setup = "import pandas as pd, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt"
        plot = "plt.plot(range(100), [i * i for i in range(100)])\nplt.show()"
        print("  a plot cell (PNG back), after `import pandas, matplotlib` in an earlier cell:")
        print_rows([("local driver (no sandbox), science image", local_driver(science, work, 20, plot, setup)),
                    ("session run, science image", session_run(sandboxrun, work, 20, plot, setup,
                                                              ("--image", "science")))])
    else:
        print("  (rootfs/science is not built: no plot figures; scripts/build-image.sh science)")
    idle_and_concurrent(sandboxrun, work)


if __name__ == "__main__":
    main()
