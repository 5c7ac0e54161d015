#!/usr/bin/env bash
# Run on the build machine (Debian 12): builds the release preset and downloads the Vulkan loader
# packages that the GPU machine lacks into .gl/, so that build/release, node_modules and .gl can
# be copied to a machine with an NVIDIA GPU and run there by scripts/gpu-machine/run.sh.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

bash scripts/setup.sh release
# Which code the GPU machine runs, for the first line of its outputs ("+": uncommitted changes).
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || commit+="+"
echo "$commit" > build/release/BUILD_COMMIT
# Google Benchmark is a shared library on Debian; primitives_bench finds it beside itself.
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian build/release/bench/
# The CUB and cuBLAS peer, where this machine has nvcc (performance.sh builds it on the GPU
# machine when it is missing or does not start there).
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
if [ -x "$nvcc" ]; then
  "$nvcc" -O3 -std=c++17 -arch=sm_90 -o build/release/bench/cub_peers bench/cub_peers.cu -lcublas
fi

mkdir -p .gl /tmp/wgsl-forge-amd64-lists/partial
apt_options=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64
             -oDir::State::Lists=/tmp/wgsl-forge-amd64-lists)
if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
  apt-get "${apt_options[@]}" update -q
  (cd .gl && apt-get "${apt_options[@]}" download \
    libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
echo "ready: copy build/release, node_modules and .gl with the repository, then run"
echo "  bash scripts/gpu-machine/run.sh"
