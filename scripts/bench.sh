#!/usr/bin/env bash
# Benchmarks: prints sandboxrun's figures side by side with its peers (bare python3, bwrap, crun,
# umoci, bandit). Run as root after scripts/setup.sh. Figures on a loaded machine are noisy: run
# it on a quiet one. Sections: startup, cgroup, parallel, assess, audit, image, network, deps.
#   scripts/bench.sh [section ...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/build
sandboxrun=$bin/sandboxrun
rootfs=$root/rootfs/default
sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(startup cgroup parallel assess audit image network deps)
work=$(mktemp -d /tmp/sandboxrun-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
[ -x "$sandboxrun" ] && [ -d "$rootfs" ] || { echo "bench: run scripts/setup.sh first" >&2; exit 1; }

# median_ms RUNS CMD...: median wall time of CMD in milliseconds (output discarded).
median_ms() {
  local runs=$1; shift
  local -a t=()
  for ((i = 0; i < runs; i++)); do
    local s e
    s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N)
    t+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.2f", m / 1000}'
}
row() { printf '  %-46s %10s ms %s\n' "$1" "$2" "${3:-}"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }'; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

bwrap_args=(--unshare-all --die-with-parent --new-session --cap-drop ALL --uid 1000 --gid 1000
            --ro-bind "$rootfs" / --proc /proc --dev /dev --tmpfs /tmp --hostname sandbox)

startup() {
  echo "== startup (median of 30; overhead = minus bare)"
  : >"$work/empty.py"
  local audit="$work/audit.log" n=30
  local bare_true bwrap_true bare_py bwrap_py sr sr_tmpfs
  bare_true=$(median_ms $n /bin/true)
  bwrap_true=$(median_ms $n bwrap "${bwrap_args[@]}" /bin/true)
  bare_py=$(median_ms $n "$rootfs/usr/bin/python3" -c pass)
  bwrap_py=$(median_ms $n bwrap "${bwrap_args[@]}" /usr/bin/python3 -c pass)
  sr=$(median_ms $n "$sandboxrun" "$work/empty.py")
  sr_tmpfs=$(median_ms $n "$sandboxrun" --audit-log /dev/shm/sandboxrun-bench-audit.log "$work/empty.py")
  rm -f /dev/shm/sandboxrun-bench-audit.log*
  rm -rf /dev/shm/objects
  row "true: bare" "$bare_true"
  row "true: bwrap (all namespaces, no seccomp)" "$bwrap_true" "overhead $(sub "$bwrap_true" "$bare_true") ms"
  row "python3 -c pass: bare" "$bare_py"
  row "python3 -c pass: bwrap" "$bwrap_py" "overhead $(sub "$bwrap_py" "$bare_py") ms, $(ratio "$bwrap_py" "$bare_py")"
  row "empty.py: sandboxrun (full pipeline, audit on disk)" "$sr" "overhead $(sub "$sr" "$bare_py") ms, $(ratio "$sr" "$bare_py")"
  row "empty.py: sandboxrun (audit log on tmpfs)" "$sr_tmpfs" "overhead $(sub "$sr_tmpfs" "$bare_py") ms, $(ratio "$sr_tmpfs" "$bare_py")"
  echo "  (sandboxrun = assessment + audit records + cgroup + namespaces + seccomp + pivot_root + python3;"
  echo "   bwrap has no cgroup, no seccomp filter here, no assessment and no audit log)"
  # The launcher's own account of each phase (--json timings_ms), median over the same runs:
  # "spawn" is the isolation itself (namespaces, placement, mounts, pivot_root, credentials,
  # seccomp, up to the payload's execve) -- the part comparable with bwrap's overhead.
  for ((i = 0; i < n; i++)); do
    "$sandboxrun" --json --audit-log /dev/shm/sandboxrun-bench-audit.log "$work/empty.py" 2>/dev/null || true
  done | python3 -c '
import json, statistics, sys
rows = [json.loads(l)["timings_ms"] for l in sys.stdin if l.strip()]
print("  launcher phases, median of %d (--json timings_ms):" % len(rows))
for k in ("prepare", "cgroup", "spawn", "run", "teardown"):
    print("    %-10s %8.2f ms" % (k, statistics.median(r[k] for r in rows)))'
  rm -f /dev/shm/sandboxrun-bench-audit.log*
  rm -rf /dev/shm/objects
}

cgroup() {
  echo "== cgroup setup + teardown"
  "$bin/src/cgroup/sandboxrun_cgroup_bench" 100 | sed 's/^/  /'
}

parallel() {
  echo "== 100 sandboxes, 8 at a time (python3 -c pass / empty.py)"
  : >"$work/empty.py"
  local bundle="$work/bundle"
  mkdir -p "$bundle"
  (cd "$bundle" && crun spec --rootless >/dev/null 2>&1 || crun spec >/dev/null)
  python3 - "$bundle/config.json" "$rootfs" <<'PY'
import json, sys
p, rootfs = sys.argv[1], sys.argv[2]
c = json.load(open(p))
c["root"] = {"path": rootfs, "readonly": True}
c["process"]["terminal"] = False
c["process"]["args"] = ["/usr/bin/python3", "-c", "pass"]
c["process"]["user"] = {"uid": 1000, "gid": 1000}
json.dump(c, open(p, "w"))
PY
  local t0 t1 fails
  t0=$(date +%s%N)
  fails=$(seq 100 | xargs -P8 -I{} sh -c '"$0" "$1" >/dev/null 2>&1 || echo fail' "$sandboxrun" "$work/empty.py" | wc -l)
  t1=$(date +%s%N)
  printf '  %-20s %8.0f ms  failures %s\n' sandboxrun "$(( (t1 - t0) / 1000000 ))" "$fails"
  t0=$(date +%s%N)
  fails=$(seq 100 | xargs -P8 -I{} sh -c 'bwrap "$@" /usr/bin/python3 -c pass >/dev/null 2>&1 || echo fail' _ "${bwrap_args[@]}" | wc -l)
  t1=$(date +%s%N)
  printf '  %-20s %8.0f ms  failures %s\n' bwrap "$(( (t1 - t0) / 1000000 ))" "$fails"
  t0=$(date +%s%N)
  fails=$(seq 100 | xargs -P8 -I{} sh -c 'crun run --bundle "$0" "bench-$$-{}" >/dev/null 2>&1 || echo fail' "$bundle" | wc -l)
  t1=$(date +%s%N)
  printf '  %-20s %8.0f ms  failures %s\n' crun "$(( (t1 - t0) / 1000000 ))" "$fails"
  if [ "$fails" -gt 0 ]; then
    echo "  crun failed: $(crun run --bundle "$bundle" "bench-$$-why" 2>&1 | tail -n1)"
  fi
  local left_cg left_proc
  left_cg=$(find /sys/fs/cgroup -maxdepth 3 -path '*sandboxrun/*@*' -type d 2>/dev/null | wc -l)
  left_proc=$(pgrep -fc '/run/sandbox/empty.py' || true)
  echo "  leftovers after the sandboxrun batch: cgroups $left_cg, processes $left_proc"
}

assess() {
  echo "== assessor vs bandit (same generated files)"
  "$bin/src/assess/sandboxrun_assess_bench" --out "$work" | sed 's/^/  /'
}

audit() {
  echo "== audit log (1,000,000 records)"
  "$bin/src/audit/sandboxrun_audit_bench" --dir /var/tmp | sed 's/^/  /'
}

image() {
  echo "== image unpack vs umoci"
  bash bench/image_bench.sh | sed 's/^/  /'
}

network() {
  echo "== egress proxy throughput (100 MB on loopback)"
  "$bin/src/net/net_bench" 100 5 | sed 's/^/  /'
}

# A run with a 3-package requirement set from a loopback index (wheels built here): the first
# run installs (cache miss: phase 1 sandbox + pip + publish), later runs bind the cached set.
deps() {
  echo "== dependencies: 3 wheels from a loopback index (miss: median of 5; others: median of 20)"
  local idx=$work/idx cfg=$work/deps-cfg port
  mkdir -p "$idx/files" "$cfg"
  python3 - "$idx" <<'PY'
import hashlib, os, sys, zipfile
idx = sys.argv[1]
for n in ("alpha_b", "beta_b", "gamma_b"):
    whl = f"{n}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(f"{idx}/files/{whl}", "w") as z:
        z.writestr(f"{n}/__init__.py", f"NAME = '{n}'\n")
        z.writestr(f"{n}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {n}\nVersion: 1.0\n")
        z.writestr(f"{n}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{n}-1.0.dist-info/RECORD", "")
    h = hashlib.sha256(open(f"{idx}/files/{whl}", "rb").read()).hexdigest()
    os.makedirs(f"{idx}/simple/{n.replace('_', '-')}", exist_ok=True)
    open(f"{idx}/simple/{n.replace('_', '-')}/index.html", "w").write(f'<a href="/files/{whl}#sha256={h}">{whl}</a>')
PY
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 -m http.server "$port" --bind 127.0.0.1 --directory "$idx" >/dev/null 2>&1 &
  local server=$!
  cp config/sandbox.yaml config/security.yaml config/audit.yaml "$cfg/"
  sed -i '/^extra_hosts:/d' "$cfg/sandbox.yaml"
  printf 'extra_hosts: {pkgs.bench: 127.0.0.1}\nallow_networks: [127.0.0.0/8]\npackage_index: {url: "http://pkgs.bench:%s/simple", hosts: []}\n' "$port" >>"$cfg/sandbox.yaml"
  printf 'alpha-b==1.0\nbeta-b==1.0\ngamma-b==1.0\n' >"$work/requirements.txt"
  printf 'import alpha_b, beta_b, gamma_b\n' >"$work/deps.py"
  printf 'pass\n' >"$work/nodeps.py"
  sleep 0.3
  local miss hit none
  export SANDBOXRUN_CACHE_DIR=$work/deps-cache
  miss_run() { rm -rf "$SANDBOXRUN_CACHE_DIR"; "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" --requirements "$work/requirements.txt" "$work/deps.py"; }
  miss=$(median_ms 5 miss_run)
  "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" --requirements "$work/requirements.txt" "$work/deps.py" \
    || echo "  (the install failed: the figures below are not meaningful)"
  hit=$(median_ms 20 "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" --requirements "$work/requirements.txt" "$work/deps.py")
  none=$(median_ms 20 "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" "$work/nodeps.py")
  unset SANDBOXRUN_CACHE_DIR
  kill "$server"
  row "no requirements" "$none"
  row "3 requirements, cache miss (install phase)" "$miss" "overhead $(sub "$miss" "$none") ms"
  row "3 requirements, cache hit" "$hit" "overhead $(sub "$hit" "$none") ms"
}

for s in "${sections[@]}"; do "$s"; done
