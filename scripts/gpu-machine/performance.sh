#!/usr/bin/env bash
# Run on the GPU machine (see docs/gpu-machine.md): auto-tune-all at full size, then the bench
# and the PyTorch peers in the same session, joined into one table (docs/performance.md's
# source). Results go to $OUT (or build/gpu-machine); the cache persists in build/gpu-cache.
#
#   performance.sh tune [BUDGET]      certify and tune every kernel (default budget 8)
#   performance.sh bench              bench + peers + table
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
if ! ldconfig -p | grep -q 'libvulkan.so.1'; then
  for package in .gl/*.deb; do dpkg -x "$package" /; done
  ldconfig
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES="$nvidia_icd"; fi
out="${OUT:-$repo_root/build/gpu-machine}"
mkdir -p "$out"
forge="build/release/src/wgsl-forge --cache build/gpu-cache"
case "${1:-bench}" in
  tune)
    $forge auto-tune-all --budget "${2:-8}" 2>&1 | tee "$out/auto-tune-all.txt"
    ;;
  bench)
    $forge bench --json > "$out/forge-bench.json"
    python3 bench/peers.py > "$out/peers.json"
    python3 bench/compare.py "$out/forge-bench.json" "$out/peers.json" | tee "$out/performance-table.md"
    ;;
esac
