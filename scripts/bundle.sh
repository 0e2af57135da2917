#!/usr/bin/env bash
# Packs what the tests and the benchmark need into DIR, to run them on another x86-64 Linux host
# that has no compiler and no packages (a full cgroup v2 host, say, where the v2 code runs for
# real): the built binaries and tests (stripped; they link libc, libm and libstdc++ only), the
# default rootfs, Docker's seccomp.json, and the peers that are installed here (bwrap, crun,
# hyperfine) with the libraries they link, found through an RPATH. Run as root after
# scripts/test.sh (which builds the tests and the image):
#   scripts/bundle.sh DIR
# The test binaries look for the checkout at the path they were built in, and the peers for
# their libraries in DIR, so on the other host put the checkout's tracked files and DIR at these
# same paths, then, as root:
#   DIR/run.sh tests [TEST-BINARY...]     # the unit and integration tests (default: all)
#   DIR/run.sh bench [SECTION...]         # scripts/bench.sh (default: startup parallel cgroup)
# DIR/run.sh unpacks into the checkout (build/, rootfs/default); the peers stay in DIR/peers.
# Not carried, so their tests fail there: Bandit, `cmake --install`, the image's OCI layout.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
cd "$(dirname "$0")/.."
src=$PWD
out=$(mkdir -p "$1" && cd "$1" && pwd)
[ -x build/sandboxrun ] && [ -d build/tests ] && [ -d rootfs/default ] ||
  { echo "bundle: run scripts/test.sh first (it builds the tests and the default image)" >&2; exit 1; }
command -v xz >/dev/null || { echo "bundle: needs xz (apt-get install xz-utils)" >&2; exit 1; }
stage=$(mktemp -d /tmp/sandboxrun-bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT

# The binaries, at their paths in the build tree.
files=(build/sandboxrun build/src/core/sandboxrun_executor_bench build/src/cgroup/sandboxrun_cgroup_bench)
for t in build/tests/unit_* build/tests/integration_*; do
  [ -f "$t" ] && [ -x "$t" ] && files+=("$t")
done
for f in "${files[@]}"; do
  mkdir -p "$stage/tree/$(dirname "$f")"
  strip -o "$stage/tree/$f" "$f"
done
tar -C "$stage/tree" -cf - build | xz -T0 -6 >"$out/build.tar.xz"
tar -C rootfs -cf - default | xz -T0 -6 >"$out/rootfs.tar.xz"

# The peers, each with the libraries it links besides libc (the other host may lack them).
rm -rf "$out/peers" && mkdir -p "$out/peers/bin" "$out/peers/lib"
for p in bwrap crun hyperfine; do
  bin=$(command -v "$p" || true)
  [ -n "$bin" ] || { echo "bundle: $p is not installed here; the bench skips it there"; continue; }
  cp "$bin" "$out/peers/bin/"
  # glibc's own libraries must match the other host's libc: those are not carried.
  ldd "$bin" | awk '/=> \// { print $3 }' | grep -Ev '/(libc|libm|libdl|libpthread|librt)\.so' |
    xargs -r -I{} cp -L {} "$out/peers/lib/"
done
if command -v patchelf >/dev/null; then
  # DT_RPATH, unlike RUNPATH, also serves the libraries' own dependencies (libselinux's pcre2).
  # An absolute path, not $ORIGIN: crun runs itself again from a memfd, where $ORIGIN is "/".
  for b in "$out"/peers/bin/*; do patchelf --force-rpath --set-rpath "$out/peers/lib" "$b"; done
else
  echo "bundle: no patchelf (apt-get install patchelf); the peers use the other host's libraries"
fi
[ -f /usr/share/containers/seccomp.json ] && cp /usr/share/containers/seccomp.json "$out/"
echo "$src" >"$out/source_dir"
cp scripts/bundle-run.sh "$out/run.sh"
echo "bundle: $(du -sh "$out" | cut -f1) in $out; on the other host put the checkout at $src and run $out/run.sh"
