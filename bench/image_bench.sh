#!/usr/bin/env bash
# Unpack time of the default image layout (images/default, from scripts/build-image.sh):
# `sandboxrun image unpack` vs `umoci unpack`, alternating, median of RUNS (default 3) each.
# Both verify blob digests; umoci also writes an mtree manifest of the tree, which is part of
# what its users pay. Dirty pages are flushed before every run so one tool's writeback does not
# land on the other's clock.
#
# Environment: SANDBOXRUN (default build/sandboxrun), RUNS, LAYOUT (default images/default:latest).
set -euo pipefail

cd "$(dirname "$0")/.."
bin=${SANDBOXRUN:-build/sandboxrun}
runs=${RUNS:-3}
ref=${LAYOUT:-images/default:latest}
layout=${ref%:*}

die() { echo "image_bench.sh: $*" >&2; exit 1; }
[[ -x $bin ]] || die "$bin not found; build it first or set SANDBOXRUN"
[[ -f $layout/index.json ]] || die "$layout is not an image layout; run scripts/build-image.sh first"
command -v umoci >/dev/null || die "umoci is missing: apt-get install -y umoci"

umoci_flags=()
[[ $(id -u) == 0 ]] || umoci_flags=(--rootless)
work=$(mktemp -d "${TMPDIR:-/tmp}/sandboxrun-image-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# "wall_ms cpu_ms" of the command (cpu = user + sys, which load on a shared machine disturbs
# less than wall time); its output goes to $work/last.log.
measure() {
  local TIMEFORMAT='%R %U %S' t
  sync
  t=$( { time "$@" >"$work/last.log" 2>&1; } 2>&1 ) || { cat "$work/last.log" >&2; die "failed: $*"; }
  awk '{ printf "%d %d\n", $1 * 1000, ($2 + $3) * 1000 }' <<<"$t"
}
median() { tr ' ' '\n' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

ours_wall=() ours_cpu=() umoci_wall=() umoci_cpu=()
for (( i = 0; i < runs; i++ )); do
  rm -rf "$work/ours" "$work/umoci"
  read -r w c < <(measure "$bin" image unpack "$ref" "$work/ours")
  ours_wall+=("$w"); ours_cpu+=("$c")
  read -r w c < <(measure umoci unpack "${umoci_flags[@]}" --image "$ref" "$work/umoci")
  umoci_wall+=("$w"); umoci_cpu+=("$c")
done

entries=$(find "$work/ours" -xdev | wc -l)
size=$(du -sm "$work/ours" | cut -f1)
ow=$(echo "${ours_wall[*]}" | median) oc=$(echo "${ours_cpu[*]}" | median)
uw=$(echo "${umoci_wall[*]}" | median) uc=$(echo "${umoci_cpu[*]}" | median)
printf 'image unpack: %s (%s entries, %s MiB), median of %s, load average %s\n' \
  "$ref" "$entries" "$size" "$runs" "$(cut -d' ' -f1 /proc/loadavg)"
printf '  %-24s %8s %8s   %s\n' "" "wall ms" "cpu ms" "wall runs"
printf '  %-24s %8s %8s   %s\n' "sandboxrun image unpack" "$ow" "$oc" "${ours_wall[*]}"
printf '  %-24s %8s %8s   %s\n' "umoci unpack" "$uw" "$uc" "${umoci_wall[*]}"
awk -v a="$ow" -v b="$uw" -v c="$oc" -v d="$uc" \
  'BEGIN { printf "  %-24s %7.2fx %7.2fx\n", "sandboxrun / umoci", (b ? a / b : 0), (d ? c / d : 0) }'
