#!/usr/bin/env bash
# Installs everything wgsl-forge needs on Debian 12 (bookworm), then builds one CMake preset.
# Idempotent: it installs only what is missing, so a second run takes seconds.
#
#   scripts/setup.sh [PRESET]     PRESET: release (default), ci, dev, asan, tsan, fuzz
#
# Needs root (or sudo) the first time, for apt. What it installs:
#   - the toolchain and libraries: g++, cmake, ninja, GoogleTest, Google Benchmark,
#     nlohmann-json3-dev, libcli11-dev, librust-blake3-dev (BLAKE3's official C sources), clang-format,
#     libhiredis-dev (the Redis client of the remote store); redis-server for the test presets;
#   - for the ci preset, chromium (the report's test renders its page in it, headless);
#   - Vulkan on the CPU: Mesa lavapipe (mesa-vulkan-drivers) and libvulkan1 from bookworm-backports
#     (Dawn refuses the Mesa 22.3 of plain bookworm);
#   - Dawn (WebGPU): `npm ci` of the pinned bun-webgpu-linux-x64 package (package-lock.json),
#     whose libwebgpu_wrapper.so is a whole Dawn build.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
preset="${1:-release}"

log() { printf '[setup] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else log "need root (or sudo) to run: $*"; exit 1
  fi
}

packages=(g++ cmake ninja-build pkg-config git ca-certificates libgtest-dev libgmock-dev
          libbenchmark-dev nlohmann-json3-dev libcli11-dev librust-blake3-dev clang-format
          vulkan-tools python3 libhiredis-dev)
# The tests of the remote store start their own Redis server.
case "$preset" in ci | asan | tsan | dev) packages+=(redis-server) ;; esac
# The report's test renders its page in headless Chromium.
[ "$preset" = ci ] && packages+=(chromium)
# libFuzzer comes with clang's runtime libraries.
[ "$preset" = fuzz ] && packages+=(clang libclang-rt-14-dev)
backports_packages=(mesa-vulkan-drivers libvulkan1)
minimum_mesa_major=25

missing_packages() {
  local package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
      printf '%s\n' "$package"
  done
}

mesa_is_recent() {
  local version
  version="$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)"
  [ -n "$version" ] && [ "${version%%.*}" -ge "$minimum_mesa_major" ] 2>/dev/null
}

ensure_backports_source() {
  if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then return; fi
  log "adding the bookworm-backports apt source (for Mesa >= $minimum_mesa_major)"
  as_root tee /etc/apt/sources.list.d/wgsl-forge-bookworm-backports.sources >/dev/null <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  apt_updated=no
}

apt_updated=no
apt_update_once() {
  if [ "$apt_updated" = no ]; then
    as_root apt-get update -q
    apt_updated=yes
  fi
}

install_debian_packages() {
  local -a missing
  mapfile -t missing < <(missing_packages "${packages[@]}")
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing: ${missing[*]}"
    apt_update_once
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${missing[@]}"
  fi
  if ! mesa_is_recent || [ -n "$(missing_packages "${backports_packages[@]}")" ]; then
    ensure_backports_source
    log "installing ${backports_packages[*]} from bookworm-backports"
    apt_update_once
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      -t bookworm-backports "${backports_packages[@]}"
  fi
}

install_dawn() {
  local library="$repo_root/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so"
  local stamp="$repo_root/node_modules/.wgsl-forge-lock-installed"
  if [ -f "$library" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$repo_root/package-lock.json"; then
    return
  fi
  log "installing Dawn with npm ci (bun-webgpu-linux-x64, pinned in package-lock.json)"
  (cd "$repo_root" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  cp "$repo_root/package-lock.json" "$stamp"
}

build() {
  log "building preset '$preset'"
  (cd "$repo_root" && cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset")
}

install_debian_packages
install_dawn
build
