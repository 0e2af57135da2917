#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine (run as root): sets everything up, runs
# the unit and integration tests, then the unit tests again under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== host capabilities (the cgroup line names the backend the resource tests exercise)"
build/sandboxrun doctor || echo "(doctor found something missing; the tests below will say what breaks)"

echo "== building the tests (build/)"
cmake --build build -j"$(nproc)"

echo "== unit + integration tests (build/)"
ctest --test-dir build --output-on-failure --timeout 600 -j2

echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANDBOXRUN_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
ctest --test-dir build-asan --output-on-failure --timeout 600 -j2 -L unit
