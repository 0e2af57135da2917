#!/usr/bin/env bash
# Benchmarks: prints sandboxrun's figures side by side with its peers (bare python3, bwrap, crun,
# umoci, bandit). Run as root after scripts/setup.sh. Figures on a loaded machine are noisy: run
# it on a quiet one. Sections: startup, cgroup, parallel, assess, audit, image, network, deps,
# config, session, mcp.
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
chmod 755 "$work"  # the peers run the job file as uid 1000
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
# The assessor needs only the binary; every other section runs sandboxes in the rootfs.
needs_rootfs=0
for s in "${sections[@]}"; do [ "$s" = assess ] || [ "$s" = config ] || needs_rootfs=1; done
[ -x "$sandboxrun" ] && { [ $needs_rootfs = 0 ] || [ -d "$rootfs" ]; } || { echo "bench: run scripts/setup.sh first" >&2; exit 1; }

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

# Bare python3 runs the image's interpreter on the host, as root. Its byte-code cache goes to
# $work: written into the image, it would be checked against the host's files (the image's
# sitecustomize.py is a symlink to /etc/python3.11/), so every sandboxed run would then find it
# stale and compile sitecustomize again (~0.8 ms a start). The peers must not see the variable.
# Bare python3 must be free to write that cache (the warm-up runs fill it): with a prefix, it
# reads byte code from there alone, and without writes it would compile every module each run.
export PYTHONPYCACHEPREFIX="$work/pycache"
unset PYTHONDONTWRITEBYTECODE
bwrap_args=(--unshare-all --die-with-parent --new-session --cap-drop ALL --uid 1000 --gid 1000
            --unsetenv PYTHONPYCACHEPREFIX
            --ro-bind "$rootfs" / --proc /proc --dev /dev --tmpfs /tmp --hostname sandbox)

# Byte code in the image that no longer matches its source, as the sandbox sees the files (an
# absolute symlink resolves inside the image): python compiles such a module again on every start,
# since the image is read-only there. Says so, because it slows every sandbox alike but not bare.
stale_bytecode() {
  python3 - "$rootfs" <<'PY'
import glob, os, struct, sys
root = sys.argv[1]
def inside(path):  # resolve symlinks the way the sandbox would, with `root` as /
    rel = os.path.relpath(path, root)
    for _ in range(40):
        full = os.path.join(root, rel)
        if not os.path.islink(full):
            return full
        target = os.readlink(full)
        rel = os.path.normpath(target.lstrip("/") if target.startswith("/") else os.path.join(os.path.dirname(rel), target))
    return None
stale = []
for pyc in glob.glob(root + "/usr/lib/python3*/**/__pycache__/*.pyc", recursive=True):
    name = os.path.basename(pyc).split(".")[0] + ".py"
    src = inside(os.path.join(os.path.dirname(os.path.dirname(pyc)), name))
    if not src or not os.path.exists(src):
        continue
    with open(pyc, "rb") as f:
        head = f.read(16)
    flags, mtime, size = struct.unpack("<III", head[4:16])
    st = os.stat(src)
    if flags == 0 and (mtime != int(st.st_mtime) & 0xFFFFFFFF or size != st.st_size & 0xFFFFFFFF):
        stale.append(os.path.relpath(pyc, root))
if stale:
    print("  WARNING: %d byte-code file(s) in the image are stale, so every sandboxed start compiles them"
          " again (scripts/build-image.sh --rebuild): %s" % (len(stale), ", ".join(stale[:3])))
PY
}

startup() {
  # Rounds of one hyperfine run over every command, then the Executor: a drift of the machine
  # (this VM's speed wanders by tens of percent over minutes) lands on every command alike, so
  # it cancels in the ratios. Samples are pooled over the rounds.
  local n=${RUNS:-40} rounds=${ROUNDS:-5} audit="$work/audit.log"
  local per=$(( (n + rounds - 1) / rounds ))
  : >"$work/empty.py"
  echo "== startup: python3 running an empty file, $((per * rounds)) runs each in $rounds interleaved rounds, medians; ratios to bwrap from the same rounds"
  local bundle="$work/bundle" have_crun=0 have_docker=0
  stale_bytecode
  make_crun_bundle "$bundle" /usr/bin/python3 /work/empty.py && have_crun=1
  start_docker && have_docker=1
  local -a cmds=(
    -n bare "$rootfs/usr/bin/python3 $work/empty.py"
    -n bwrap "bwrap ${bwrap_args[*]} --ro-bind $work /work /usr/bin/python3 /work/empty.py"
    -n sandboxrun "$sandboxrun --trust untrusted --audit-log $audit $work/empty.py"
  )
  ((have_crun)) && cmds+=(-n crun "crun run --bundle $bundle sandboxrun-bench")
  ((have_docker)) && cmds+=(-n docker "docker run --rm --read-only --cap-drop ALL --security-opt no-new-privileges \
--user 1000:1000 --network none --memory 256m --cpus 1 --pids-limit 64 -v $work:/work:ro \
sandboxrun-bench:default python3 /work/empty.py")
  printf "%s\n" "${cmds[@]}" >"$work/cmds.txt"
  : >"$work/svc-samples.txt"
  : >"$work/svc-phases.txt"
  : >"$work/warm-samples.txt"
  : >"$work/warm-phases.txt"
  for ((r = 0; r < rounds; r++)); do
    hyperfine -N --warmup 2 --runs "$per" --export-json "$work/startup-$r.json" "${cmds[@]}" >/dev/null 2>&1 ||
      hyperfine --warmup 2 --runs "$per" --export-json "$work/startup-$r.json" "${cmds[@]}" >/dev/null
    # The service case: one long-lived Executor, the same file.
    "$bin/src/core/sandboxrun_executor_bench" --audit-log "$audit" --runs "$per" --samples "$work/svc-samples.txt" \
      "$work/empty.py" >>"$work/svc-phases.txt"
    # And with a sandbox set up ahead for each next run (ExecutorOptions::warm).
    "$bin/src/core/sandboxrun_executor_bench" --audit-log "$audit" --runs "$per" --samples "$work/warm-samples.txt" \
      --warm "$work/empty.py" >>"$work/warm-phases.txt"
  done
  python3 - "$work" "$rounds" "$per" <<'PY'
import collections, json, statistics, sys
work, rounds, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
times = collections.OrderedDict()
for r in range(rounds):
    for res in json.load(open("%s/startup-%d.json" % (work, r)))["results"]:
        times.setdefault(res["command"], []).extend(res["times"])
res = {name: statistics.median(t) * 1000 for name, t in times.items()}
def samples(name):
    return statistics.median(float(l) for l in open("%s/%s" % (work, name)) if l.strip())
def phases(name):
    p = collections.defaultdict(list)
    for line in open("%s/%s" % (work, name)):
        f = line.split()
        for k, v in zip(f[0::2], f[1::2]):
            p[k].append(float(v))
    return {k: statistics.median(v) for k, v in p.items()}
res["sandboxrun Executor (service)"] = samples("svc-samples.txt")
res["sandboxrun Executor, warm"] = samples("warm-samples.txt")
bare, bwrap = res["bare"], res["bwrap"]
print("  %-32s %9s %9s %10s" % ("", "median", "vs bwrap", "overhead"))
for name, ms in res.items():
    print("  %-32s %7.2f ms %8.2fx %7.2f ms" % (name, ms, ms / bwrap, ms - bare))
print("  targets: sandboxrun CLI <= 1.00x bwrap (now %.2fx); service overhead <= half of bwrap's "
      "(%.2f vs %.2f ms; warm: a sandbox set up ahead for each next run, ExecutorOptions::warm)"
      % (res["sandboxrun"] / bwrap, res["sandboxrun Executor, warm"] - bare, (bwrap - bare) / 2))
for label, f in (("Executor", "svc-phases.txt"), ("Executor, warm", "warm-phases.txt")):
    svc = phases(f)
    print("  %s phases (median of the rounds' medians): open %.2f ms (once per service), prepare %.2f, cgroup %.2f, "
          "spawn %.2f, payload %.2f, teardown %.2f%s" % (label, svc["open"], svc["prepare"], svc["cgroup"], svc["spawn"],
                                                        svc["payload"], svc["teardown"],
                                                        "; runs in a prepared sandbox: %d of %d a round" % (svc.get("prepared", 0), per) if "warm" in f else ""))
per_round = []
for r in range(rounds):
    rr = {x["command"]: statistics.median(x["times"]) for x in json.load(open("%s/startup-%d.json" % (work, r)))["results"]}
    per_round.append("%.2fx" % (rr["sandboxrun"] / rr["bwrap"]))
print("  CLI vs bwrap per round: " + " ".join(per_round))
PY
  stop_docker
  # The CLI's own phases (its --json timings_ms), then where its CPU goes against bwrap's.
  local i
  for ((i = 0; i < per; i++)); do
    "$sandboxrun" --json --trust untrusted --audit-log "$audit" "$work/empty.py"
    echo
  done >"$work/cli-json.txt"
  python3 - "$work/cli-json.txt" <<'PY'
import json, statistics, sys
rows = [json.loads(l)["timings_ms"] for l in open(sys.argv[1]) if l.strip()]
print("  CLI phases (timings_ms, median of %d): %s" % (len(rows), ", ".join(
    "%s %.2f" % (k, statistics.median(r[k] for r in rows)) for k in ("open", "prepare", "cgroup", "spawn", "run", "teardown"))))
PY
  profile_startup
}

# Where a start's CPU goes, for the CLI and for bwrap: `perf record` over RUNS starts of each
# (one sample per 250 us of CPU: faster sampling slows a VM's processes), sorted into steps by
# scripts/profile-startup.py. Needs perf (Debian's linux-perf).
profile_startup() {
  command -v perf >/dev/null || { echo "  (profile: perf is not installed; apt-get install linux-perf)"; return; }
  local n=${PROFILE_RUNS:-60} period=250000
  echo "  profile: CPU per start by step, perf record over $n starts each (the launcher, its pid 1 and payload until exec)"
  if ! perf record -q -o "$work/perf-sr.data" -e cpu-clock -c $period -g -- sh -c \
      'for i in $(seq "$0"); do "$1" --trust untrusted --audit-log "$2" "$3"; done' \
      "$n" "$sandboxrun" "$work/audit.log" "$work/empty.py" >/dev/null 2>"$work/perf.err"; then
    echo "  (profile: perf record failed: $(tail -n1 "$work/perf.err"))"
    return
  fi
  perf record -q -o "$work/perf-bw.data" -e cpu-clock -c $period -g -- sh -c \
    'for i in $(seq "$0"); do bwrap "$@" /usr/bin/python3 /work/empty.py; done' \
    "$n" "${bwrap_args[@]}" --ro-bind "$work" /work >/dev/null 2>>"$work/perf.err"
  echo "  sandboxrun:"
  python3 "$root/scripts/profile-startup.py" "$work/perf-sr.data" "$n" $period sandboxrun
  echo "  bwrap:"
  python3 "$root/scripts/profile-startup.py" "$work/perf-bw.data" "$n" $period bwrap
  # Wall-clock time around the program, cut by kernel tracepoints (execs, exit signals), the two
  # launchers alternating: what the launcher costs before python3 starts and after it ends.
  echo "  wall clock around the program, $n starts of each alternating (perf tracepoints; scripts/trace-startup.py):"
  if perf record -q -a -o "$work/perf-tr.data" -e sched:sched_process_exec -e signal:signal_generate -- sh -c \
      'n=$1; sr=$2; audit=$3; py=$4; shift 4
       for i in $(seq "$n"); do "$sr" --trust untrusted --audit-log "$audit" "$py"; bwrap "$@" /usr/bin/python3 /work/empty.py; done' \
      sh "$n" "$sandboxrun" "$work/audit.log" "$work/empty.py" "${bwrap_args[@]}" --ro-bind "$work" /work \
      >/dev/null 2>>"$work/perf.err"; then
    python3 "$root/scripts/trace-startup.py" "$work/perf-tr.data" sandboxrun bwrap
  else
    echo "    (trace: perf record -a failed: $(tail -n1 "$work/perf.err"))"
  fi
}

# A crun bundle running ARGS as 1000:1000 on the default rootfs with the bench directory at /work.
make_crun_bundle() {
  local bundle=$1; shift
  command -v crun >/dev/null || return 1
  mkdir -p "$bundle"
  (cd "$bundle" && crun spec >/dev/null 2>&1) || return 1
  python3 - "$bundle/config.json" "$rootfs" "$work" "$@" <<'PY'
import json, sys
p, rootfs, job, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
c = json.load(open(p))
c["root"] = {"path": rootfs, "readonly": True}
c["process"]["terminal"] = False
c["process"]["args"] = args
c["process"]["user"] = {"uid": 1000, "gid": 1000}
c["mounts"].append({"destination": "/work", "type": "bind", "source": job, "options": ["rbind", "ro"]})
json.dump(c, open(p, "w"))
PY
  # crun refuses some hosts (cgroup v1 hybrid with controllers on v2): say so once and skip it.
  local why
  if ! why=$(crun run --bundle "$bundle" sandboxrun-bench-probe 2>&1 >/dev/null); then
    echo "  (crun: skipped, it does not run on this host: $(tail -n1 <<<"$why"))"
    return 1
  fi
}

# Docker (Debian's docker.io) as the original design's peer: an already running daemon, or one
# started here without touching the host's network (no iptables, no bridge) and stopped after.
started_dockerd=""
start_docker() {
  command -v dockerd >/dev/null && command -v docker >/dev/null || {
    echo "  (docker: not installed; apt-get install docker.io to compare)"; return 1; }
  if ! docker info >/dev/null 2>&1; then
    dockerd --iptables=false --ip6tables=false --bridge=none >"$work/dockerd.log" 2>&1 &
    started_dockerd=$!
    for _ in $(seq 50); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
    docker info >/dev/null 2>&1 || { echo "  (docker: dockerd did not start: $(tail -n1 "$work/dockerd.log"))"; return 1; }
  fi
  docker image inspect sandboxrun-bench:default >/dev/null 2>&1 ||
    tar -C "$rootfs" -c . | docker import - sandboxrun-bench:default >/dev/null
}
stop_docker() {
  if [ -n "$started_dockerd" ]; then kill "$started_dockerd" 2>/dev/null; wait "$started_dockerd" 2>/dev/null || true; fi
  started_dockerd=""
}

cgroup() {
  echo "== cgroup setup + teardown"
  "$bin/src/cgroup/sandboxrun_cgroup_bench" 100 | sed 's/^/  /'
}

parallel() {
  echo "== 100 sandboxes running an empty file, 8 at a time (target: sandboxrun <= 1.2x bwrap, 0 failures, nothing left)"
  : >"$work/empty.py"
  local bundle="$work/bundle-parallel" have_crun=0
  make_crun_bundle "$bundle" /usr/bin/python3 /work/empty.py && have_crun=1
  local t0 t1 fails sr_ms bw_ms
  t0=$(date +%s%N)
  fails=$(seq 100 | xargs -P8 -I{} sh -c '"$0" --audit-log "$2" "$1" >/dev/null 2>&1 || echo fail' \
            "$sandboxrun" "$work/empty.py" "$work/parallel-audit.log" | wc -l)
  t1=$(date +%s%N)
  sr_ms=$(( (t1 - t0) / 1000000 ))
  printf '  %-20s %8.0f ms  failures %s\n' sandboxrun "$sr_ms" "$fails"
  t0=$(date +%s%N)
  fails=$(seq 100 | xargs -P8 -I{} sh -c 'bwrap "$@" --ro-bind "$0" /work /usr/bin/python3 /work/empty.py >/dev/null 2>&1 || echo fail' \
            "$work" "${bwrap_args[@]}" | wc -l)
  t1=$(date +%s%N)
  bw_ms=$(( (t1 - t0) / 1000000 ))
  printf '  %-20s %8.0f ms  failures %s\n' bwrap "$bw_ms" "$fails"
  if ((have_crun)); then
    t0=$(date +%s%N)
    fails=$(seq 100 | xargs -P8 -I{} sh -c 'crun run --bundle "$0" "bench-$$-{}" >/dev/null 2>&1 || echo fail' "$bundle" | wc -l)
    t1=$(date +%s%N)
    printf '  %-20s %8.0f ms  failures %s\n' crun "$(( (t1 - t0) / 1000000 ))" "$fails"
  fi
  echo "  sandboxrun / bwrap: $(ratio "$sr_ms" "$bw_ms")"
  local left_cg left_proc
  left_cg=$(find /sys/fs/cgroup -maxdepth 3 -path '*sandboxrun/*@*' -type d 2>/dev/null | wc -l)
  left_proc=$(pgrep -fc '/run/sandbox/empty.py' || true)
  echo "  leftovers after the sandboxrun batch: cgroups $left_cg, processes $left_proc"
}

assess() {
  echo "== assessor vs bandit (same generated files)"
  "$bin/src/assess/sandboxrun_assess_bench" --out "$work" | sed 's/^/  /'
  # Whole processes, as a user or a CI job runs them: rules load included. hyperfine -N starts
  # each directly (a shell and date(1) around every run add ~1.7 ms, more than half of it).
  local f="$work/lines_1000.py" small="$work/lines_20.py" n=${RUNS:-50}
  [ -f "$f" ] || { echo "  (no generated 1,000-line file)"; return; }
  head -n 20 "$f" >"$small"
  local many="" i
  for ((i = 0; i < 100; i++)); do many+=" $f"; done
  local -a cmds=(
    -n "sandboxrun 1000" "$sandboxrun assess --json --config-dir $root/config $f"
    -n "sandboxrun 20" "$sandboxrun assess --json --config-dir $root/config $small"
  )
  hyperfine -N --warmup 5 --runs "$n" --export-json "$work/assess.json" "${cmds[@]}" >/dev/null 2>&1
  hyperfine -N --warmup 1 --runs 5 --export-json "$work/assess-batch.json" -n batch \
    "$sandboxrun assess --json --config-dir $root/config$many" >/dev/null 2>&1
  if command -v bandit >/dev/null; then
    # Bandit exits 1 when it reports findings (-i).
    hyperfine -N -i --warmup 1 --runs "${BANDIT_RUNS:-5}" --export-json "$work/assess-bandit.json" \
      -n "bandit 1000" "bandit -q -f json $f" -n "bandit 20" "bandit -q -f json $small" >/dev/null 2>&1
  fi
  python3 - "$work" <<'PY'
import json, os, statistics, sys
res = {}
for name in ("assess.json", "assess-batch.json", "assess-bandit.json"):
    p = os.path.join(sys.argv[1], name)
    if os.path.exists(p):
        for r in json.load(open(p))["results"]:
            res[r["command"]] = (statistics.median(r["times"]) * 1000, (r["user"] + r["system"]) * 1000)
print("  whole process (hyperfine -N)              median wall   mean cpu")
rows = [("sandboxrun assess --json, 1,000 lines", "sandboxrun 1000"), ("sandboxrun assess --json, 20 lines", "sandboxrun 20"),
        ("bandit -q -f json, 1,000 lines", "bandit 1000"), ("bandit -q -f json, 20 lines", "bandit 20")]
for label, key in rows:
    if key in res:
        print("  %-44s %8.2f ms %8.2f ms" % (label, *res[key]))
wall, cpu = res["batch"]
print("  %-44s %8.2f ms %8.2f ms" % ("batch: 100 files in one call, per file", wall / 100, cpu / 100))
for size, target in (("1000", " (target: >= 100x, and under 5 ms)"), ("20", "")):
    if "bandit " + size in res:
        print("  %s lines: sandboxrun %.0fx faster than bandit%s" % (size, res["bandit " + size][0] / res["sandboxrun " + size][0], target))
PY
  echo "  own corpus (tests/fixtures/assess, labels from the policy):"
  "$bin/tests/unit_assess_corpus_test" 2>/dev/null | grep '^assess corpus' | sed 's/^/    /'
  # The newest holdout: written from ASSESS-LEVELS.md alone, never tuned against (its README).
  local holdout
  holdout=$(ls -d "$root"/tests/fixtures/assess-holdout/v* | sort -V | tail -1)
  echo "  holdout $(basename "$holdout") (tests/fixtures/assess-holdout, written without reading the rules):"
  python3 "$root/scripts/score-assess.py" "$holdout" "$sandboxrun" | head -1 | sed 's/^/    /'
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
  # The same program for all three: without requirements the imports fail and are skipped.
  printf 'try:\n    import alpha_b, beta_b, gamma_b\nexcept ImportError:\n    pass\n' >"$work/deps.py"
  sleep 0.3
  local miss hit none
  export SANDBOXRUN_CACHE_DIR=$work/deps-cache
  miss_run() { rm -rf "$SANDBOXRUN_CACHE_DIR/deps"; "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" --requirements "$work/requirements.txt" "$work/deps.py"; }
  miss=$(median_ms 5 miss_run)
  "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" --requirements "$work/requirements.txt" "$work/deps.py" \
    || echo "  (the install failed: the figures below are not meaningful)"
  hit=$(median_ms 20 "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" --requirements "$work/requirements.txt" "$work/deps.py")
  none=$(median_ms 20 "$sandboxrun" --config "$cfg" --audit-log "$work/deps-audit.log" "$work/deps.py")
  # The dependency phase's own time on a hit (cache lookup, manifest check, lock), from --json.
  local phase
  phase=$(for _ in $(seq 20); do
            "$sandboxrun" --json --config "$cfg" --audit-log "$work/deps-audit.log" --requirements "$work/requirements.txt" \
              "$work/deps.py" | python3 -c 'import json, sys; print(json.load(sys.stdin)["deps"]["duration_ms"])'
          done | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}')
  unset SANDBOXRUN_CACHE_DIR
  kill "$server"
  row "no requirements" "$none"
  row "3 requirements, cache miss (install phase)" "$miss" "overhead $(sub "$miss" "$none") ms"
  row "3 requirements, cache hit" "$hit" "overhead $(sub "$hit" "$none") ms"
  row "  of which the dependency phase (in-process)" "$phase"
}

# What the parsed-config caches save each start: yaml-cpp against a decoded cache entry.
config() {
  echo "== config: loading the three configuration files, caches off and on"
  "$bin/src/config/sandboxrun_config_bench" 200
}

# Sessions (scripts/bench_session.py): a `1 + 1` cell against a local interpreter, a one-shot run
# and docker exec; a plot cell on the science image; 50 idle sessions; 8 at once.
session() {
  echo "== session: a '1 + 1' cell timed by its caller, 200 cells (50 through the CLI, 20 one-shot runs and docker execs)"
  python3 "$root/scripts/bench_session.py" "$sandboxrun" "$rootfs" "$work" 200
}

# `sandboxrun mcp` (scripts/bench_mcp.py): run_python over stdio against Executor::run, and 8
# clients over Streamable HTTP.
mcp() {
  echo "== mcp: print(1) through MCP against the library, 200 calls; 8 HTTP clients x 100 calls"
  python3 "$root/scripts/bench_mcp.py" "$sandboxrun" "$bin/src/core/sandboxrun_executor_bench" "$work" 200
}

for s in "${sections[@]}"; do "$s"; done
