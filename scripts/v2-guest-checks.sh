#!/bin/bash
# pid 1 of the cgroup v2 guest (scripts/v2-guest.sh starts it): sets up a host as a cgroup v2
# machine has it (cgroup2 only, its controllers enabled, systemd's open-files limit 1024/4096,
# the launcher in a service's cgroup), runs the cgroup, resource, lifecycle, id-slot, executor,
# Landlock and enclosing-cgroup test binaries and a check list of the CLI, writes the exit
# status to the host's out/rc and powers the guest off.
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 CI=true
repo=$(cd "$(dirname "$0")/.." && pwd)
out=/mnt/v2-out
failed=0
finish() {
  echo "$1" >"$out/rc"
  sync
  echo o >/proc/sysrq-trigger
  sleep 30
}

# The kernel's file systems (the shared root shows this machine's /proc and /sys otherwise),
# and fresh /run, /tmp, /var/tmp: what this machine has there is not the guest's.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm
for d in /run /tmp /var/tmp /dev/shm; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
mkdir -p /dev/pts && mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control || true; done
hostname v2-guest
ulimit -Hn 4096 && ulimit -Sn 1024
echo "== guest: $(uname -sr), $(nproc) cpus, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB;" \
     "cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.subtree_control); open files $(ulimit -Sn)/$(ulimit -Hn)"
grep -c cgroup /proc/self/mounts | sed 's/^/   cgroup mounts: /'
# A service's cgroup, as systemd gives one with Delegate=yes: the launcher moves into a leaf
# below it and makes the runs' cgroups beside that leaf.
svc=/sys/fs/cgroup/sandboxrun-ci.service
mkdir "$svc" && echo $$ >"$svc/cgroup.procs"
cd "$repo" || finish 1
check() {  # check NAME COMMAND...: a line each, the command's output on failure
  local what=$1 log
  shift
  log=$(mktemp)
  if "$@" >"$log" 2>&1; then echo "   ok   $what"; else echo "   FAIL $what"; sed 's/^/        /' "$log" | tail -20; failed=$((failed + 1)); fi
  rm -f "$log"
}
run_cgroups() { find /sys/fs/cgroup -mindepth 2 -maxdepth 4 -type d -name '*@*' 2>/dev/null | sort; }

echo "== doctor"
build/sandboxrun doctor 2>&1 | sed 's/^/   /'
echo "== test binaries"
for t in build/tests/unit_cgroup*_test build/tests/integration_resources_test build/tests/integration_lifecycle_test \
         build/tests/integration_id_slots_test build/tests/integration_executor_test \
         build/tests/integration_landlock_test build/tests/integration_enclosing_test; do
  [ -x "$t" ] || { echo "   missing $t"; failed=$((failed + 1)); continue; }
  start=$(date +%s)
  if timeout 1200 "$t" --gtest_brief=1 >"/tmp/$(basename "$t").log" 2>&1; then
    echo "   ok   $(basename "$t") ($(( $(date +%s) - start )) s)"
  else
    echo "   FAIL $(basename "$t")"; tail -40 "/tmp/$(basename "$t").log" | sed 's/^/        /'; failed=$((failed + 1))
  fi
done

echo "== the command, on cgroup v2"
w=$(mktemp -d)
chmod 755 "$w"
status_of() { python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['status'])"; }
printf 'b = bytearray(1 << 30)\nb[::4096] = b"x" * len(b[::4096])\nprint("allocated")\n' >"$w/mem.py"
printf 'import threading, time\nn = 0\ntry:\n    while n < 500:\n        threading.Thread(target=time.sleep, args=(5,)).start()\n        n += 1\nexcept RuntimeError:\n    pass\nprint(n)\n' >"$w/pids.py"
printf 'import time\nt = time.time()\nwhile time.time() - t < 3:\n    pass\nprint(time.process_time())\n' >"$w/cpu.py"
printf 'import time\ntime.sleep(60)\n' >"$w/sleep.py"
printf 'print("ok")\n' >"$w/ok.py"
chmod 644 "$w"/*.py
memory() { [ "$(build/sandboxrun --json --trust untrusted --audit-log "$w/a.log" "$w/mem.py" | status_of)" = oom ]; }
pids() {
  local n
  n=$(build/sandboxrun --trust untrusted --audit-log "$w/a.log" "$w/pids.py") || true
  echo "threads started: $n"
  [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -lt 500 ]
}
cpu() {  # 3 s of a busy loop at --cpus 0.5: about 1.5 s of CPU, well under 3
  local t
  t=$(build/sandboxrun --trust untrusted --cpus 0.5 --audit-log "$w/a.log" "$w/cpu.py")
  echo "cpu seconds: $t"
  python3 -c "import sys; sys.exit(0 if float('$t') < 2.4 else 1)"
}
timeout_() {
  local s=$SECONDS
  ! build/sandboxrun --trust untrusted --timeout 2 --audit-log "$w/a.log" "$w/sleep.py" && [ $((SECONDS - s)) -lt 30 ]
}
parallel() {
  local i n=0
  for i in $(seq 20); do build/sandboxrun --trust untrusted --audit-log "$w/p$i.log" "$w/ok.py" >"$w/p$i.out" 2>&1 & done
  wait
  for i in $(seq 20); do grep -qx ok "$w/p$i.out" && n=$((n + 1)); done
  echo "$n of 20 printed ok"
  [ "$n" -eq 20 ]
}
delegated() {  # a non-root service with Delegate=yes: started in its subtree, which is its user's
  local d=/sys/fs/cgroup/deleg.service p=$repo
  mkdir "$d" && chown 1000:1000 "$d" "$d/cgroup.procs" "$d/cgroup.subtree_control" "$d/cgroup.threads"
  # The checkout may sit in a 0700 directory: uid 1000 may pass (in the guest's copy only).
  while [ "$p" != / ]; do chmod o+x "$p"; p=$(dirname "$p"); done
  bash -c "echo \$\$ >$d/cgroup.procs && exec setpriv --reuid 1000 --regid 1000 --clear-groups env HOME=/tmp \
           build/sandboxrun --json --trust untrusted --audit-log /tmp/deleg.log $w/mem.py" >"$w/deleg.json"
  head -c 800 "$w/deleg.json"
  # Not root: no id slot, said as such; nothing else went without.
  python3 -c "import json; d = json.load(open('$w/deleg.json')); assert d['status'] == 'oom' and [g[:10] for g in d.get('degradations', [])] == ['no id slot'], d"
}
check "memory: 1 GiB under untrusted is an OOM kill" memory
check "pids: threads stop below the untrusted pids.max" pids
check "cpu.max: a busy loop at --cpus 0.5 gets half a CPU" cpu
check "timeout: a 60 s sleep ends at --timeout 2" timeout_
check "parallel: 20 runs at once all succeed" parallel
check "delegated: uid 1000 in its own subtree, an OOM kill, only the id slot missing" delegated
sleep 2
left=$(run_cgroups | wc -l)
if [ "$left" -eq 0 ]; then echo "   ok   nothing left: no run cgroups once the runs ended"; else
  echo "   FAIL nothing left: $left run cgroups remain"; run_cgroups | sed 's/^/        /'; failed=$((failed + 1)); fi
echo "== $failed checks failed"
finish $(( failed > 0 ? 1 : 0 ))
