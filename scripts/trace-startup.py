#!/usr/bin/env python3
"""Where a sandbox start's wall-clock time goes, from kernel tracepoints (called by scripts/bench.sh).

    trace-startup.py PERF_DATA COMM [COMM ...]

PERF_DATA was recorded with `-e sched:sched_process_exec -e signal:signal_generate` over a
shell loop of commands named COMM (the launcher: sandboxrun, bwrap) that each run python3 in a
sandbox. Each start is cut at three points the kernel reports at no cost to the processes:

  before the program  the launcher's exec -> python3's exec
  the program         python3's exec -> its exit (the SIGCHLD it sends its parent)
  after the program   that SIGCHLD -> the launcher's own exit (its SIGCHLD to its parent)

The launcher's own timings cannot show the last part: it ends after the launcher has returned
its result (pid 1 reaped, the cgroup removed, the process's exit itself). Prints the medians in
milliseconds, one line per COMM.
"""
import re
import statistics
import subprocess
import sys

LINE = re.compile(r"\s*(\S+)\s+(\d+)\s+([0-9.]+):\s+\S+:(\S+):\s*(.*)")


def events(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,time,event,trace"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            yield m.group(1), float(m.group(3)) * 1000, m.group(4), m.group(5)


def sigchld(args, to=None):
    """A signal_generate event's arguments say SIGCHLD (to a process named `to`, when given)."""
    fields = args.split()
    return "sig=17" in fields and (to is None or "comm=" + to in fields)


def starts(data, comms):
    """(launcher, before, program, after) for each complete start."""
    cur = None
    for comm, t, ev, args in events(data):
        if ev == "sched_process_exec" and comm in comms:
            cur = {"comm": comm, "exec": t}
        elif cur is None:
            continue
        elif ev == "sched_process_exec" and comm == "python3":
            cur["py_exec"] = t
        elif ev == "signal_generate" and sigchld(args) and comm == "python3" and "py_exec" in cur:
            cur.setdefault("py_exit", t)
        elif (ev == "signal_generate" and sigchld(args) and comm == cur["comm"] and not sigchld(args, to=comm)
              and "py_exit" in cur):  # the launcher's own exit, not its pid 1's (sent to the launcher)
            yield cur["comm"], cur["py_exec"] - cur["exec"], cur["py_exit"] - cur["py_exec"], t - cur["py_exit"]
            cur = None


def main():
    data, comms = sys.argv[1], set(sys.argv[2:])
    rows = {}
    for comm, before, program, after in starts(data, comms):
        rows.setdefault(comm, []).append((before, program, after))
    if not rows:
        print("    (no complete starts traced)")
        return
    print("    %-12s %19s %12s %18s   (ms, medians)" % ("", "before the program", "the program", "after the program"))
    for comm in sorted(rows):
        r = rows[comm]
        med = [statistics.median(x[i] for x in r) for i in range(3)]
        print("    %-12s %19.2f %12.2f %18.2f   %d starts" % (comm, med[0], med[1], med[2], len(r)))


if __name__ == "__main__":
    main()
