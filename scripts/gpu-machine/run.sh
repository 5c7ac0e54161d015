#!/usr/bin/env bash
# Run on the GPU machine, in a copy of the repository that carries build/release, node_modules
# and .gl (see prepare.sh). Installs the Vulkan loader from .gl, points it at the NVIDIA driver,
# then prints the adapter and times one kernel. Output also goes to $OUT when that is set.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

source scripts/gpu-machine/vulkan-env.sh

out="${OUT:-$repo_root/build/gpu-machine}"
mkdir -p "$out"
forge=build/release/src/wgsl-forge
{
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -n)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$forge" --version
  "$forge" adapters
  "$forge" adapters --json > "$out/adapter.json"
  build/release/bench/runtime_probe "$@"
} 2>&1 | tee "$out/gpu-machine.log"
