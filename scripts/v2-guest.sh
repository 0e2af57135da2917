#!/usr/bin/env bash
# The cgroup v2 leg (CI runs it after the suite): Debian 12's own kernel booted under QEMU
# (TCG: no KVM is needed), on this machine's root shared read-only over 9p with a tmpfs over it,
# cgroup2 alone mounted with its controllers enabled. There it runs scripts/v2-guest-checks.sh:
# the cgroup, resource, lifecycle, id-slot, executor, Landlock and enclosing-cgroup test
# binaries of build/ and a check list of the CLI. The guest sees the same files as this machine
# (binaries, libraries, images), so it tests exactly what was built here. Exit status: the
# checks' (1 when the guest did not report).
#   scripts/v2-guest.sh [--smp N] [--mem MiB]
# The kernel and the initramfs are cached in build/v2-guest/ (about 75 MB; made once, ~20 s).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
smp=2 mem=4096
while [ $# -gt 0 ]; do
  case $1 in
    --smp) smp=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    *) echo "usage: $0 [--smp N] [--mem MiB]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "v2-guest: run as root (the guest's root is this machine's, shared as root)" >&2; exit 2; }
[ -x build/sandboxrun ] || { echo "v2-guest: build first (scripts/setup.sh)" >&2; exit 2; }

if ! command -v qemu-system-x86_64 >/dev/null || ! command -v busybox >/dev/null; then
  echo "== v2 guest: installing qemu-system-x86 and busybox-static"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    qemu-system-x86 busybox-static >/dev/null
fi

cache=$repo/build/v2-guest
mkdir -p "$cache"
# The kernel: the package linux-image-amd64 points at, from the Debian mirror, unpacked here.
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$kpkg" ] || { echo "v2-guest: apt knows no linux-image-amd64 (apt-get update?)" >&2; exit 1; }
kver=${kpkg#linux-image-}
if [ ! -f "$cache/$kver/vmlinuz" ] || [ ! -f "$cache/$kver/initrd.gz" ]; then
  echo "== v2 guest: kernel $kver and initramfs into $cache/$kver"
  rm -rf "$cache/$kver" && mkdir -p "$cache/$kver/deb" "$cache/$kver/initrd/bin"
  (cd "$cache/$kver" && apt-get download "$kpkg" 2>/dev/null && dpkg-deb -x ./*.deb deb)
  cp "$cache/$kver/deb/boot/vmlinuz-$kver" "$cache/$kver/vmlinuz"
  ird=$cache/$kver/initrd
  cp "$(command -v busybox)" "$ird/bin/busybox"
  for a in sh mount umount mkdir modprobe switch_root; do ln -s busybox "$ird/bin/$a"; done
  # The modules the root needs (virtio PCI, 9p, overlay) and theirs, found by modprobe.
  mods="drivers/virtio/virtio drivers/virtio/virtio_ring drivers/virtio/virtio_pci_modern_dev
        drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci net/9p/9pnet net/9p/9pnet_virtio
        fs/fscache/fscache fs/netfs/netfs fs/9p/9p fs/overlayfs/overlay"
  for m in $mods; do
    mkdir -p "$ird/lib/modules/$kver/kernel/${m%/*}"
    cp "$cache/$kver/deb/lib/modules/$kver/kernel/$m.ko" "$ird/lib/modules/$kver/kernel/$m.ko"
  done
  busybox depmod -b "$ird" "$kver"
  # The guest's pid 1 until it switches root: this machine's / (9p, read-only) under a tmpfs
  # (overlayfs), so that tests may write anywhere and nothing reaches this machine but out/.
  {
    echo '#!/bin/sh'
    echo 'mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev'
    echo 'modprobe virtio_pci && modprobe 9pnet_virtio && modprobe 9p && modprobe overlay'
    cat <<'INIT'
mkdir -p /lower /upper /root
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower || { echo "no host root"; exec sh; }
mount -t tmpfs -o size=75% tmpfs /upper && mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w overlay /root
mkdir -p /root/mnt/v2-out && mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /root/mnt/v2-out
read -r cmdline </proc/cmdline
checks=${cmdline##*v2checks=}
checks=${checks%% *}
umount /proc /sys /dev  # mounted again by the checks, over what the shared root shows there
exec switch_root /root /bin/bash "$checks"
INIT
  } >"$ird/init"
  mkdir -p "$ird/proc" "$ird/sys" "$ird/dev"
  chmod 755 "$ird/init"
  (cd "$ird" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$cache/$kver/initrd.gz")
  rm -rf "$cache/$kver/deb" "$cache/$kver"/*.deb "$ird"
fi

out=$(mktemp -d "$cache/out.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "== v2 guest: Linux $kver under QEMU (TCG, $smp vCPUs, $mem MiB), cgroup2 only; checks from $repo"
start=$(date +%s)
# The guest powers off when its checks end; 40 minutes bound a guest that hangs.
timeout 2400 qemu-system-x86_64 -machine q35 -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
  -nographic -no-reboot -serial mon:stdio -display none \
  -kernel "$cache/$kver/vmlinuz" -initrd "$cache/$kver/initrd.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 v2checks=$repo/scripts/v2-guest-checks.sh" \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap" \
  -virtfs "local,path=$out,mount_tag=out,security_model=passthrough" </dev/null || true
rc=$(cat "$out/rc" 2>/dev/null || echo 1)
echo "== v2 guest: checks ended with $rc after $(( $(date +%s) - start )) s"
exit "$rc"
