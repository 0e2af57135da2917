"""A first program for the sandbox: it shows what the sandbox looks like from inside."""
import json
import os
import platform
import sqlite3

db = sqlite3.connect(":memory:")
db.execute("create table t (x)")
db.executemany("insert into t values (?)", [(i,) for i in range(10)])
total = db.execute("select sum(x) from t").fetchone()[0]

print(json.dumps({
    "hello": "from the sandbox",
    "python": platform.python_version(),
    "uid": os.getuid(),
    "hostname": platform.node(),
    "pid": os.getpid(),
    "sqlite_sum": total,
    "network_interfaces": sorted(os.listdir("/proc/sys/net/ipv4/conf")),
}, indent=2))
