#!/usr/bin/env bash
# Builds a sandbox image variant as an OCI image layout in STORE/images/NAME/, then unpacks it
# into STORE/rootfs/NAME with `sandboxrun image unpack`,
# so the project's own image goes through the same path as images users bring. STORE is the
# checkout (for a build tree) or, for an installed product, its image store (/var/lib/sandboxrun;
# `sandboxrun image build-default` runs this script with SANDBOXRUN_IMAGE_STORE set).
#
# Variants (NAME, default `default`):
#   default   Debian bookworm + python3, pip and tzdata
#   science   default + Debian's python3-numpy, -pandas, -matplotlib, -scipy (~1.1 GiB unpacked)
# `--image NAME` (or `image: NAME` in sandbox.yaml) selects one by name.
#
# Only Debian's package repository is contacted. Run as root (mmdebstrap keeps ownership).
# Re-running is fast: nothing is rebuilt when the layout exists, and nothing is unpacked when
# rootfs/.NAME.digest names the layout's manifest. --rebuild forces a fresh image.
#
# Environment: SANDBOXRUN (binary, default build/sandboxrun), SANDBOXRUN_IMAGE_STORE (default: the
# checkout this script is in), MIRROR, SUITE.
set -euo pipefail

usage() { echo "usage: $0 [--rebuild] [default|science]" >&2; exit 2; }
rebuild=0
name=default
for arg in "$@"; do
  case "$arg" in
    --rebuild) rebuild=1 ;;
    -h|--help) usage ;;
    default|science) name=$arg ;;
    *) echo "build-image.sh: unknown argument '$arg'" >&2; usage ;;
  esac
done

cd "$(dirname "$0")/.."
store=${SANDBOXRUN_IMAGE_STORE:-$PWD}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
sandboxrun=${SANDBOXRUN:-build/sandboxrun}
layout=$store/images/$name
rootfs=$store/rootfs/$name
stamp=$store/rootfs/.$name.digest
# What each variant must be able to import once unpacked (a broken image is never stamped).
# tzdata: zoneinfo's time zones, as in Docker's python images (without it ZoneInfo("Europe/Paris")
# fails and TZ= silently means UTC).
check='import json, csv, sqlite3, decimal, ssl, multiprocessing, asyncio, zoneinfo; zoneinfo.ZoneInfo("Europe/Paris")'
case "$name" in
  default) packages=python3,python3-pip,tzdata ;;
  science)
    packages=python3,python3-pip,tzdata,python3-numpy,python3-pandas,python3-matplotlib,python3-scipy
    check="$check; import numpy, pandas, scipy, matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot" ;;
esac
# Bumped whenever the recipe changes, so that existing layouts are rebuilt (stored in .packages).
recipe="$packages mountpoints-1"

die() { echo "build-image.sh: $*" >&2; exit 1; }
# One line per step, with the time since the start: the first takes minutes and prints nothing.
step() { echo "build-image.sh: [$1/4, ${SECONDS}s] $2" >&2; }
[[ $(id -u) == 0 ]] || die "must run as root (mmdebstrap keeps the image's file ownership); try: sudo $0"
for tool in mmdebstrap sha256sum gzip tar stat; do
  command -v "$tool" >/dev/null || die "'$tool' is missing; install it with: apt-get install -y mmdebstrap coreutils gzip tar"
done

# The manifest digest the layout's index.json points at (the only manifest we write).
manifest_digest() {
  grep -o '"digest":"sha256:[0-9a-f]\{64\}"' "$layout/index.json" | head -n1 | cut -d'"' -f4
}

# Writes stdin to blobs/sha256/<digest> of the layout being built; prints "sha256:<hex> <size>".
add_blob() {
  local dir=$1 tmp hex size
  tmp=$(mktemp "$dir/blobs/sha256/.new.XXXXXX")
  cat >"$tmp"
  hex=$(sha256sum "$tmp" | cut -d' ' -f1)
  size=$(stat -c %s "$tmp")
  mv -f "$tmp" "$dir/blobs/sha256/$hex"
  chmod 0644 "$dir/blobs/sha256/$hex"
  echo "sha256:$hex $size"
}

build_layout() {
  local work arch goarch
  work=$(mktemp -d "$store/images/.$name.build.XXXXXX")
  # shellcheck disable=SC2064  # expand $work now: the trap must remove this very directory
  trap "rm -rf '$work'" EXIT
  mkdir -p "$work/layout/blobs/sha256"

  step 1 "installing Debian $suite packages with mmdebstrap: $packages (the longest step: ~1 min here)"
  # Docs, man pages and translations are not needed to run Python; copyright files stay.
  # /dev is emptied (the launcher builds its own minimal /dev; the directory stays as a
  # mountpoint); /run, /tmp and /proc come from base-files. /work and empty /etc/hosts,
  # /etc/hostname and /etc/resolv.conf are mount points for the per-run working directory and
  # files (the image is read-only at run time, so they cannot be made then).
  mmdebstrap --quiet --variant=essential --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='mkdir -p "$1/work" && touch "$1/etc/hosts" "$1/etc/hostname" "$1/etc/resolv.conf"' \
    "$suite" - "deb $mirror $suite main" \
    | tar --delete --wildcards './dev/?*' >"$work/rootfs.tar"
  for dir in ./dev/ ./proc/ ./tmp/ ./run/ ./work/ ./etc/hosts ./usr/bin/python3; do
    tar -tf "$work/rootfs.tar" "$dir" >/dev/null 2>&1 || die "the rootfs tar lacks $dir"
  done

  arch=$(dpkg --print-architecture)
  case "$arch" in
    armhf) goarch=arm ;; i386) goarch=386 ;; *) goarch=$arch ;;
  esac

  local diff_id layer layer_digest layer_size config config_digest config_size manifest \
        manifest_digest manifest_size created
  step 2 "writing the OCI layout (compressing a $(( $(stat -c %s "$work/rootfs.tar") / 1048576 )) MiB layer)"
  diff_id=sha256:$(sha256sum "$work/rootfs.tar" | cut -d' ' -f1)
  layer=$(gzip -n -6 <"$work/rootfs.tar" | add_blob "$work/layout")
  rm -f "$work/rootfs.tar"
  layer_digest=${layer% *}; layer_size=${layer#* }
  created=$(date -u +%Y-%m-%dT%H:%M:%SZ)

  config=$(printf '{"created":"%s","architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"],"Cmd":["python3"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created":"%s","created_by":"scripts/build-image.sh: mmdebstrap --variant=essential --include=%s %s"}]}' \
    "$created" "$goarch" "$diff_id" "$created" "$packages" "$suite" | add_blob "$work/layout")
  config_digest=${config% *}; config_size=${config#* }

  manifest=$(printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' \
    "$config_digest" "$config_size" "$layer_digest" "$layer_size" | add_blob "$work/layout")
  manifest_digest=${manifest% *}; manifest_size=${manifest#* }

  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"latest"},"platform":{"architecture":"%s","os":"linux"}}]}' \
    "$manifest_digest" "$manifest_size" "$goarch" >"$work/layout/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"

  rm -rf "$layout"
  mv "$work/layout" "$layout"
  rm -rf "$work"
  trap - EXIT
  echo "build-image.sh: wrote $layout ($manifest_digest, layer $(( layer_size / 1048576 )) MiB)" >&2
}

mkdir -p "$store/images" "$store/rootfs"
# The recipe is part of the image: a layout built from another one is rebuilt.
if (( rebuild )) || [[ ! -f $layout/index.json ]] || [[ "$(cat "$layout/.packages" 2>/dev/null)" != "$recipe" ]]; then
  build_layout
  echo "$recipe" >"$layout/.packages"
fi

digest=$(manifest_digest)
[[ -n $digest ]] || die "$layout/index.json names no manifest; rerun with --rebuild"
if [[ -d $rootfs && -f $stamp && $(cat "$stamp") == "$digest" ]]; then
  echo "build-image.sh: $rootfs is up to date ($digest)" >&2
  exit 0
fi

[[ -x $sandboxrun ]] || die "$sandboxrun not found; build it first (cmake --build build) or set SANDBOXRUN"
rm -f "$stamp"
rm -rf "$rootfs"
step 3 "unpacking it into $rootfs"
"$sandboxrun" image unpack "$layout:latest" "$rootfs"
step 4 "checking that python3 there imports what the $name image promises"
chroot "$rootfs" /usr/bin/python3 -c "$check" \
  || die "python3 in $rootfs cannot import what the $name image promises ($check)"
echo "$digest" >"$stamp"
echo "build-image.sh: unpacked $digest into $rootfs (${SECONDS}s)" >&2
