#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine (run as root): sets everything up, runs
# the unit and integration tests, then the unit tests again under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."

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

# A test removes what it puts in /tmp: anything new there after a suite fails the run, by name
# against this list (services' systemd-private-* directories aside).
tmp_before=$(ls -A /tmp | sort)
check_tmp() {
  local new
  new=$(comm -13 <(printf '%s\n' "$tmp_before") <(ls -A /tmp | sort) | grep -v '^systemd-private-' || true)
  [[ -z $new ]] && return 0
  echo "== the tests left these in /tmp (each test must remove its own):"
  sed 's|^|  /tmp/|' <<<"$new"
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
