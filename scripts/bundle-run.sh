#!/usr/bin/env bash
# The other host's side of scripts/bundle.sh (copied into the bundle as run.sh): unpacks the
# build and the rootfs into the checkout, then runs the tests or the benchmark. As root.
#   run.sh tests [TEST-BINARY...] | bench [SECTION...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cat "$here/source_dir")
mode=${1:-tests}
[ $# -gt 0 ] && shift
[ -d "$src/scripts" ] || { echo "run.sh: put the checkout at $src first (the test binaries look for it there)" >&2; exit 1; }
cd "$src" || exit 1
echo "== host: $(uname -sr), $(nproc) cpus; $(grep -c . /proc/self/mountinfo) mounts"
grep cgroup /proc/self/mounts
echo "cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null || echo none)"
tar -xJf "$here/build.tar.xz" && mkdir -p rootfs && tar -C rootfs -xJf "$here/rootfs.tar.xz" || exit 1
export PATH="$here/peers/bin:$PATH"
if [ -f "$here/seccomp.json" ] && [ ! -e /usr/share/containers/seccomp.json ]; then
  mkdir -p /usr/share/containers && cp "$here/seccomp.json" /usr/share/containers/
fi
printf 'import os\nprint(os.getuid(), os.uname().nodename, os.getpid())\n' >"$here/smoke.py"
echo "== smoke: $(build/sandboxrun --trust untrusted "$here/smoke.py" 2>&1) (rc $?)"
case "$mode" in
  tests)
    failed=0
    tests=("$@")
    [ ${#tests[@]} -gt 0 ] || tests=(build/tests/unit_* build/tests/integration_*)
    # Run cgroups (named RUN_ID@PID.START) are listed after each binary, so that one left behind
    # names the test binary that left it.
    run_cgroups() { find /sys/fs/cgroup -maxdepth 3 -path '*sandboxrun*/*@*' -type d 2>/dev/null | sort; }
    run_cgroups >"$here/cgroups.before"
    for t in "${tests[@]}"; do
      echo "== $t"
      timeout 600 "$t" --gtest_brief=1 || failed=$((failed + 1))
      run_cgroups >"$here/cgroups.after"
      comm -13 "$here/cgroups.before" "$here/cgroups.after" | sed "s|^|   left by $(basename "$t"): |"
      mv "$here/cgroups.after" "$here/cgroups.before"
    done
    echo "== leftovers: $(run_cgroups | wc -l) run cgroups"
    echo "== $failed test binaries failed"
    [ $failed -eq 0 ] ;;
  bench)
    sections=("$@")
    [ ${#sections[@]} -gt 0 ] || sections=(startup parallel cgroup)
    scripts/bench.sh "${sections[@]}" ;;
  *) echo "usage: $0 tests [TEST-BINARY...] | bench [SECTION...]" >&2; exit 2 ;;
esac
