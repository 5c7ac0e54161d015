#!/usr/bin/env bash
# H200, session 21, call 2: a database's start-up before (build/before: f3e41f6, pipelines one by
# one) and after (build/release: pipelines requested at once), alternating, with the NVIDIA
# driver's shader cache emptied before each "cold" run; then the typed calls' host cost.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu-machine/vulkan-env.sh
export WGSL_FORGE_WEBGPU_LIB="$PWD/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so"
cp -r build/s21/gpu-cache build/gpu-cache
out="$OUT"
echo "before: $(cat build/before/BUILD_COMMIT)  after: $(cat build/release/BUILD_COMMIT)" | tee "$out/startup-ab.txt"
for round in 1 2 3; do
  for which in before after; do
    if [ $which = before ]; then bin=build/before/database_startup; else bin=build/release/examples/database_startup; fi
    rm -rf "$HOME/.cache/nvidia"
    echo "round $round $which cold: $($bin --cache build/gpu-cache --rows 1048576 2>&1 | grep -E 'loaded|wrong|error' | head -2)" | tee -a "$out/startup-ab.txt"
    echo "round $round $which warm: $($bin --cache build/gpu-cache --rows 1048576 2>&1 | grep -E 'loaded|wrong|error' | head -2)" | tee -a "$out/startup-ab.txt"
  done
done
build/release/bench/primitives_bench --cache build/gpu-cache --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true 2>&1 | tee "$out/primitives-bench.txt" | grep -E "median|ERROR|error" 
