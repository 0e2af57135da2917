#!/usr/bin/env bash
# sandboxrun as a container image, for pods (README: "Containers and Kubernetes"): Debian bookworm with
# the .deb installed (made here from build/ with cpack), the default sandbox image at
# /var/lib/sandboxrun/rootfs/default, cgroup.mode enclosing in /etc/sandboxrun/sandbox.yaml (a
# worker pool's settings in /etc/sandboxrun-worker: deploy/kubernetes/worker.yaml), and
# an account `sandboxrun` (uid/gid 1000) to run as, /var/log/sandboxrun sticky and open to both
# (as /tmp). Written with umoci as an OCI image layout,
# tag `latest`, that `podman pull oci:DIR:latest` or `skopeo copy oci:DIR:latest docker://...`
# take: no registry and no Dockerfile are needed.
#   deploy/build-image.sh [OUT]     (OUT: build/container-image; run as root, after setup.sh)
# Only Debian's package repository is contacted. Re-running rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=${1:-$repo/build/container-image}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
die() { echo "deploy/build-image.sh: $*" >&2; exit 1; }
step() { echo "deploy/build-image.sh: [$1/4, ${SECONDS}s] $2" >&2; }
[[ $(id -u) == 0 ]] || die "run as root (mmdebstrap keeps the image's file ownership)"
for tool in mmdebstrap umoci cpack; do
  command -v "$tool" >/dev/null || die "'$tool' is missing: apt-get install -y mmdebstrap umoci cmake"
done
[[ -x build/sandboxrun ]] || die "build/sandboxrun is missing: run scripts/setup.sh first"
[[ -f rootfs/.default.digest ]] || die "the default sandbox image is missing: run scripts/setup.sh first"

step 1 "the .deb (cpack, stripped)"
(cd build && cpack -G DEB >/dev/null)
deb=$(ls -t build/sandboxrun_*.deb | head -n1)

work=$(mktemp -d /var/tmp/sandboxrun-container.XXXXXX)
trap 'rm -rf "$work"' EXIT
step 2 "Debian $suite with $(basename "$deb") (mmdebstrap)"
# The package's dependencies come from the mirror, the package itself by dpkg in the chroot
# (apt cannot hand dpkg a file from outside it). Its conffiles get the settings a pod needs: a
# copy for workers first (/etc/sandboxrun-worker: per_run cgroups, id slots inside a pod's 65,536
# ids), each checkpoint of the audit log sent to the cluster's log pipeline (a run's on stderr,
# since its stdout is the program's; the worker's on stdout, which it leaves free), and one run
# per pod in /etc/sandboxrun; the build fails if one of those lines ever moves.
depends=$(dpkg-deb -f "$deb" Depends | sed 's/([^)]*)//g; s/[[:space:]]//g')
mmdebstrap --quiet --variant=minbase --include="$depends" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --customize-hook="copy-in $repo/$deb /tmp" \
  --customize-hook="chroot \"\$1\" dpkg -i /tmp/$(basename "$deb") && rm \"\$1/tmp/$(basename "$deb")\"" \
  --customize-hook='cp -a "$1/etc/sandboxrun" "$1/etc/sandboxrun-worker"' \
  --customize-hook='sed -i "s/^  base: 100000000$/  base: 61440/" "$1/etc/sandboxrun-worker/sandbox.yaml"' \
  --customize-hook='grep -q "^  base: 61440$" "$1/etc/sandboxrun-worker/sandbox.yaml"' \
  --customize-hook='for d in sandboxrun:stderr sandboxrun-worker:stdout; do f="$1/etc/${d%:*}/audit.yaml"; sed -i "s/^  every: 64 /  every: 1  /; s/^  stream: none  /  stream: ${d#*:}/" "$f" && grep -q "^  every: 1 " "$f" && grep -q "^  stream: ${d#*:} " "$f" || exit 1; done' \
  --customize-hook='sed -i "s/^  mode: per_run /  mode: enclosing/" "$1/etc/sandboxrun/sandbox.yaml"' \
  --customize-hook='grep -q "^  mode: enclosing " "$1/etc/sandboxrun/sandbox.yaml"' \
  --customize-hook='chroot "$1" useradd --uid 1000 --user-group --create-home --shell /bin/sh sandboxrun' \
  --customize-hook='mkdir -p "$1/var/lib/sandboxrun/rootfs/default" "$1/var/log/sandboxrun" && chmod 1777 "$1/var/log/sandboxrun"' \
  --customize-hook="sync-in $repo/rootfs/default /var/lib/sandboxrun/rootfs/default" \
  --customize-hook="copy-in $repo/rootfs/.default.digest /var/lib/sandboxrun/rootfs" \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  "$suite" "$work/rootfs" "deb $mirror $suite main"

step 3 "the OCI layout (umoci) at $out"
rm -rf "$out"
umoci init --layout "$out"
umoci new --image "$out:latest"
umoci unpack --image "$out:latest" "$work/bundle" >/dev/null
rm -rf "$work/bundle/rootfs"
mv "$work/rootfs" "$work/bundle/rootfs"
umoci repack --image "$out:latest" "$work/bundle"
umoci config --image "$out:latest" --config.user 1000:1000 --config.workingdir /home/sandboxrun \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --config.env LANG=C.UTF-8 \
  --config.entrypoint sandboxrun --config.cmd doctor \
  --config.label "org.opencontainers.image.title=sandboxrun" \
  --history.created_by "deploy/build-image.sh: mmdebstrap $suite + $(basename "$deb")"
umoci gc --layout "$out"

step 4 "done: $(du -sh "$out" | cut -f1) (podman pull oci:$out:latest)"
