#!/bin/bash
# Session 38 on the GPU machine (an H100 or H200), on the staged build: .stage/release
# (stripped wgsl-forge and star_query, libhiredis, BUILD_COMMIT) and .stage/cub/cub_peers
# (bench/cub_peers.cu built on the build machine with nvcc 13.0 for sm_90), laid out where
# scripts/gpu-machine/performance.sh looks.
#   s38.sh perf ARGS...       performance.sh ARGS (issue 25's scripted run: `all 3` tunes every
#                             kernel at budget 3 on build/gpu-cache, then the forge's bench,
#                             PyTorch and CUB in one table), output in $OUT/perf.tgz
#   s38.sh requests FILE      each line of FILE on build/gpu-cache (a wgsl-forge argument list,
#                             or after '! ' a shell command), output in $OUT/requests-bench.txt
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-build/gpu-machine}"
mkdir -p "$out" build/release/src build/release/bench build/release/examples
cp .stage/release/src/wgsl-forge build/release/src/
cp .stage/release/examples/star_query build/release/examples/
cp .stage/cub/cub_peers build/release/bench/
cp .stage/release/BUILD_COMMIT build/release/
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv \
  >> "$out/gpu.txt" 2>&1
s=$SECONDS
case "$1" in
  perf)
    # performance.sh writes a dozen files; the device tool returns only a few, so they come back
    # as one tarball (call 1 lost its table, tuning log and PyTorch JSON without it).
    shift
    mkdir -p build/gpu-machine/perf
    OUT=build/gpu-machine/perf bash scripts/gpu-machine/performance.sh "$@"
    echo "performance.sh $* rc=$? wall $((SECONDS - s)) s" | tee -a build/gpu-machine/perf/walls.txt
    tar czf "$out/perf.tgz" -C build/gpu-machine perf ;;
  requests)
    source scripts/gpu-machine/vulkan-env.sh
    F="build/release/src/wgsl-forge --cache build/gpu-cache"
    B="$out/requests-bench.txt"
    echo "build $(cat build/release/BUILD_COMMIT)" >> "$B"
    while IFS= read -r line; do
      case "$line" in '' | \#*) continue ;; esac
      t=$SECONDS
      echo "== $line" >> "$B"
      case "$line" in
        '! '*) eval "${line#! }" >> "$B" 2>&1 ;;
        *) eval "timeout 120 $F $line" >> "$B" 2>&1 ;;
      esac
      echo "rc=$? wall $((SECONDS - t)) s" >> "$B"
    done < "$2" ;;
esac
