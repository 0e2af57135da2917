#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine (run as root): packages, build, default image.
# Idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1msetup:\033[0m %s\n' "$*" >&2; }

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libseccomp-dev libcap-dev libyaml-cpp-dev libssl-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libarchive-dev
  libzstd-dev zlib1g-dev liblzma-dev libbz2-dev nettle-dev libxml2-dev
  mmdebstrap zstd gzip iproute2 python3 python3-pytest clang libclang-rt-14-dev
  bubblewrap crun umoci bandit golang-github-containers-common hyperfine
)

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (it installs Debian packages and builds the image)" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

log "building build/sandboxrun"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# The command, its MCP-over-HTTP helper and the library archive (what `cmake --install build`
# installs); the tests and
# benchmarks are built by scripts/test.sh.
cmake --build build -j"$(nproc)" --target sandboxrun sandboxrun-mcp-http sandboxrun_archive

log "default image (rootfs/default)"
SANDBOXRUN="$PWD/build/sandboxrun" scripts/build-image.sh
log "ready: build/sandboxrun"
