#!/usr/bin/env python3
"""A `1 + 1` cell, end to end, timed by its caller (scripts/bench.sh session):
  local driver   the session driver (src/session/driver.py) under the image's python3 on the host,
                 spoken to through pipes: the cost of the protocol without a sandbox
  session        `sandboxrun repl --json`: the same cell in a live sandboxed session
  one-shot run   `sandboxrun --json` of a file holding the cell: a fresh sandbox and interpreter
usage: bench_session.py SANDBOXRUN PYTHON3 WORKDIR [CELLS]
"""
import json
import os
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def read_frame(f):
    n = struct.unpack(">I", f.read(4))[0]
    return json.loads(f.read(n))


def local_driver(python3, cells):
    p = subprocess.Popen([python3, "-I", os.path.join(ROOT, "src", "session", "driver.py")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    read_frame(p.stdout)  # ready
    times = []
    for i in range(1, cells + 1):
        t = time.perf_counter()
        p.stdin.write(frame({"op": "run", "id": i, "code": "1 + 1"}))
        p.stdin.flush()
        reply = read_frame(p.stdout)
        times.append(time.perf_counter() - t)
        assert reply["result"]["text/plain"] == "2", reply
    p.stdin.close()
    p.wait()
    return times


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


def main():
    sandboxrun, python3, work = sys.argv[1:4]
    cells = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    rows = [("local driver (no sandbox)", local_driver(python3, cells)),
            ("session (sandboxrun repl)", session(sandboxrun, work, cells)),
            ("one-shot run (sandboxrun --json)", one_shot(sandboxrun, work, max(10, cells // 10)))]
    base = statistics.median(rows[0][1])
    for name, t in rows:
        p50, p90 = statistics.median(t), statistics.quantiles(t, n=10)[-1]
        print(f"  {name:<46} {p50 * 1000:8.3f} ms p50 {p90 * 1000:8.3f} ms p90   "
              f"+{(p50 - base) * 1000:.3f} ms over the local driver")


if __name__ == "__main__":
    main()
