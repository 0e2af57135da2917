#!/usr/bin/env python3
"""`sandboxrun mcp`, timed by its client (scripts/bench.sh mcp):
  library        Executor::run of print(1), warm sandboxes on, files written come back
                 (sandboxrun_executor_bench --warm --output DIR), in 4 rounds alternating with:
  mcp stdio      run_python of the same code over stdio: request written to response read
  mcp http       8 clients over Streamable HTTP, 100 run_python calls each: failures, wall time,
                 and what is left after they end
usage: bench_mcp.py SANDBOXRUN EXECUTOR_BENCH WORKDIR [CALLS]
"""
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def call(i, code):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "run_python", "arguments": {"code": code}}}


def library(executor_bench, work, calls):
    job = os.path.join(work, "print1.py")
    with open(job, "w") as f:
        f.write("print(1)\n")
    samples = os.path.join(work, "lib-samples.txt")
    if os.path.exists(samples):
        os.unlink(samples)
    # --output: run_python always asks for the files the code writes.
    subprocess.run([executor_bench, "--audit-log", os.path.join(work, "lib-audit.log"), "--runs", str(calls),
                    "--samples", samples, "--warm", "--output", os.path.join(work, "lib-out"), job],
                   check=True, capture_output=True)
    return [float(line) / 1000 for line in open(samples) if line.strip()]


class Stdio:
    """One `sandboxrun mcp` over stdio, initialized; batch() times run_python calls."""

    def __init__(self, sandboxrun, work):
        self.p = subprocess.Popen([sandboxrun, "mcp", "--audit-log", os.path.join(work, "mcp-audit.log")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.p.stdin.write(json.dumps(INIT) + "\n")
        json.loads(self.p.stdout.readline())
        self.i = 0

    def batch(self, calls):
        times = []
        for _ in range(calls):
            self.i += 1
            t = time.perf_counter()
            self.p.stdin.write(json.dumps(call(self.i, "print(1)")) + "\n")
            reply = json.loads(self.p.stdout.readline())
            times.append(time.perf_counter() - t)
            assert reply["result"]["structuredContent"]["stdout"] == "1\n", reply
        return times

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def http_clients(sandboxrun, work, clients, calls):
    p = subprocess.Popen([sandboxrun, "mcp", "--http", "127.0.0.1:0", "--audit-log", os.path.join(work, "http-audit.log")],
                         stderr=subprocess.PIPE, text=True)
    port = int(re.search(r":(\d+)/mcp", p.stderr.readline()).group(1))
    failures, done = [], []

    def client(n):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        hdr = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        c.request("POST", "/mcp", json.dumps(INIT), hdr)
        r = c.getresponse()
        hdr["Mcp-Session-Id"] = r.getheader("Mcp-Session-Id")
        r.read()
        for i in range(1, calls + 1):
            try:
                c.request("POST", "/mcp", json.dumps(call(i, f"print({n * 1000 + i})")), hdr)
                body = c.getresponse().read().decode()
                reply = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")][-1]
                ok = reply["result"]["structuredContent"]["stdout"] == f"{n * 1000 + i}\n"
                (done if ok else failures).append(i)
            except Exception as e:  # counted, not raised: the figure is how many
                failures.append(repr(e))
        c.request("DELETE", "/mcp", headers=hdr)
        c.getresponse().read()
    t = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    p.terminate()
    p.wait()
    sandboxes = subprocess.run(["pgrep", "-f", "sandboxrun-mcp-http"], capture_output=True, text=True).stdout.split()
    return len(done), failures, wall, len(sandboxes)


def main():
    sandboxrun, executor_bench, work = sys.argv[1:4]
    calls = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    # In rounds, one after the other: this VM's speed drifts by more than the difference measured.
    rounds = 4
    lib, mcp = [], []
    server = Stdio(sandboxrun, work)
    server.batch(5)  # its first runs set up what later ones reuse
    for _ in range(rounds):
        lib += library(executor_bench, work, calls // rounds)
        mcp += server.batch(calls // rounds)
    server.close()
    base = statistics.median(lib)
    for name, t in (("library: Executor::run, warm", lib), ("mcp stdio: run_python", mcp)):
        p50 = statistics.median(t)
        print(f"  {name:<46} {p50 * 1000:8.2f} ms p50   {p50 / base:5.2f}x the library")
    ok, failures, wall, left = http_clients(sandboxrun, work, 8, 100)
    print(f"  mcp http: 8 clients x 100 run_python calls: {ok} ok, {len(failures)} failed, {wall:.1f} s; "
          f"{left} server processes left after SIGTERM")


if __name__ == "__main__":
    main()
