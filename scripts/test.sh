#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine (run as root): sets everything up, runs
# the unit and integration tests, then the unit tests again under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the suite writes: about 5.5 GB in the checkout (build/ 0.7, build-asan/ 2.2, build-fuzz/
# 0.3, rootfs/ with the science image 1.4, images/ 0.4, npm modules 0.2) and 2-3 GB of Debian
# packages and podman's copy of the container image. A full disk fails some step half-way with
# ENOSPC, so say it first.
need_gb=8
avail_gb=$(($(df -Pk . | awk 'NR == 2 {print $4}') / 1024 / 1024))
if ((avail_gb < need_gb)); then
  echo "test.sh: warning: ${avail_gb} GB free on the checkout's filesystem ($(df -P . | awk 'NR == 2 {print $6}')); the" \
    "suite needs about ${need_gb} GB (builds, images, packages). Free space, or clone onto a larger disk." >&2
fi

scripts/setup.sh

echo "== host capabilities (the cgroup line names the backend the resource tests exercise)"
build/sandboxrun doctor || echo "(doctor found something missing; the tests below will say what breaks)"

# The science image (numpy, pandas, matplotlib, scipy) takes ~9 minutes and ~1.5 GB to build the
# first time (later runs reuse it), too long for every local run: CI builds it, since its test
# fails rather than skips there; elsewhere SANDBOXRUN_TEST_SCIENCE=1 asks for it.
if [[ ${CI:-} == true || ${SANDBOXRUN_TEST_SCIENCE:-} == 1 ]]; then
  echo "== science image (rootfs/science)"
  SANDBOXRUN="$PWD/build/sandboxrun" scripts/build-image.sh science
fi

# The official MCP SDK and MCP Inspector, as clients of `sandboxrun mcp` (tests/mcp and
# tests/mcp/inspector; versions pinned by their lock files). Node comes from Debian where the
# machine has none.
echo "== MCP SDK client (tests/mcp, tests/mcp/inspector: npm ci)"
command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
npm ci --prefix tests/mcp --no-audit --no-fund --loglevel=error
npm ci --prefix tests/mcp/inspector --ignore-scripts --no-audit --no-fund --loglevel=error

# sandboxrun inside a container as a pod runs it (tests/integration/podman_test.cpp): podman with
# runc (crun refuses a hybrid cgroup host) and catatonit (a pod's infra container), a
# subordinate id range for podman's user namespaces (hostUsers: false in deploy/kubernetes/;
# far above the id slots), and the image deploy/build-image.sh writes (about a minute).
echo "== containers: podman, runc, catatonit and the sandboxrun image (deploy/build-image.sh)"
container_missing=()
for p in podman runc catatonit; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || container_missing+=("$p")
done
if ((${#container_missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${container_missing[@]}" >/dev/null
fi
for f in /etc/subuid /etc/subgid; do
  grep -q '^containers:' "$f" 2>/dev/null || echo 'containers:2147483647:2147483648' >>"$f"
done
deploy/build-image.sh

# A test removes what it puts in /tmp. The suite runs with a TMPDIR of its own, which must be
# empty after each stage; in /tmp itself only this suite's own names count (what a test or the
# launcher makes there: sandboxrun-*, unit-test.*, deps-cache-test-*, pytest-sandboxrun-*), so
# a compiler or a service writing to /tmp beside the suite is shown, never a failure.
tmp_before=$(ls -A /tmp | sort)
suite_tmp=$(mktemp -d /tmp/sandboxrun-suite.XXXXXX)
chmod 1777 "$suite_tmp"  # as /tmp: tests that drop to uid 1000 make their directories here too
export TMPDIR=$suite_tmp
trap 'rm -rf "$suite_tmp"' EXIT
suite_names='^(sandboxrun|unit-test\.|deps-cache-test-|pytest-sandboxrun)'
check_tmp() {
  local new ours left
  new=$(comm -13 <(printf '%s\n' "$tmp_before") <(ls -A /tmp | sort) | grep -vx "$(basename "$suite_tmp")" || true)
  ours=$(grep -E "$suite_names" <<<"$new" || true)
  left=$(ls -A "$suite_tmp")
  if [[ -n $new && $new != "$ours" ]]; then
    echo "== (new in /tmp during the suite, not the suite's: $(grep -cvE "$suite_names" <<<"$new") entries, not counted)"
  fi
  [[ -z $ours && -z $left ]] && return 0
  echo "== the tests left these behind (each test must remove its own):"
  [[ -n $ours ]] && sed 's|^|  /tmp/|' <<<"$ours"
  [[ -n $left ]] && sed "s|^|  $suite_tmp/|" <<<"$left"
  return 1
}

echo "== building the tests (build/)"
cmake --build build -j"$(nproc)"

echo "== unit + integration tests (build/)"
ctest --test-dir build --output-on-failure --timeout 600 -j2
check_tmp

echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANDBOXRUN_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
ctest --test-dir build-asan --output-on-failure --timeout 600 -j2 -L unit
check_tmp

# The fuzz targets, built with clang and libFuzzer (ASan+UBSan), each run for a bounded time from
# its seed corpus: what the replay tests above cannot find. New inputs and any crash artifact stay
# in build-fuzz/; a crash fails the run with libFuzzer's report.
fuzz_seconds=${SANDBOXRUN_FUZZ_SECONDS:-30}
echo "== fuzz targets (build-fuzz/, clang): ${fuzz_seconds} s each from the seed corpora"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANDBOXRUN_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fuzzers=()
for src in tests/fuzz/*_fuzz.cpp; do fuzzers+=("$(basename "$src" .cpp)"); done
cmake --build build-fuzz -j"$(nproc)" --target "${fuzzers[@]/#/fuzz_}"
mkdir -p build-fuzz/fuzz-tmp build-fuzz/fuzz-artifacts
for f in "${fuzzers[@]}"; do
  corpus=${f%_fuzz}
  extra=()
  # Layers are larger than the other inputs: past the seeds' sizes, tar headers and gzip
  # members come in numbers.
  [[ $corpus == image_layer ]] && extra=(-max_len=262144)
  mkdir -p "build-fuzz/fuzz-corpus/$corpus"
  echo "-- $f"
  rc=0
  TMPDIR="$PWD/build-fuzz/fuzz-tmp" "build-fuzz/tests/fuzz_$f" -max_total_time="$fuzz_seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build-fuzz/fuzz-artifacts/$f-" "${extra[@]}" \
    "build-fuzz/fuzz-corpus/$corpus" "tests/fuzz/corpus/$corpus" >"build-fuzz/fuzz-$f.log" 2>&1 || rc=$?
  grep -E '^(Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb)' "build-fuzz/fuzz-$f.log" || true
  if [[ $rc -ne 0 ]]; then
    tail -n 60 "build-fuzz/fuzz-$f.log"
    echo "fuzz target $f failed (exit $rc; its input is in build-fuzz/fuzz-artifacts/)"
    exit 1
  fi
done
check_tmp

# The cgroup v2 leg: whatever cgroups this machine has (this project's VM: the v1 hybrid), the
# tests that matter for cgroups run again on a cgroup v2 host, Debian 12's own kernel booted
# under QEMU on this machine's files (scripts/v2-guest.sh; ~6 minutes under TCG; the kernel is
# cached in build/v2-guest/). SANDBOXRUN_TEST_V2=0 leaves it out, saying so.
if [[ ${SANDBOXRUN_TEST_V2:-1} == 0 ]]; then
  echo "== cgroup v2 guest: left out (SANDBOXRUN_TEST_V2=0)"
else
  scripts/v2-guest.sh
  check_tmp
fi
