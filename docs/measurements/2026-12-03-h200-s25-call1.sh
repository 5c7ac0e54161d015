#!/bin/bash
# H200 call 1 (issue 23): the main job on a fresh cache, timed, then bench of every kernel.
set -u
cd "$(dirname "$0")/.."
mkdir -p build && ln -sfn ../.stage/release build/release
source scripts/gpu-machine/vulkan-env.sh
F="build/release/src/wgsl-forge --cache build/gpu-cache"
echo "build $(cat build/release/BUILD_COMMIT)" | tee "$OUT/commit.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/nvidia-smi.txt" 2>&1
$F adapters > "$OUT/adapters.txt" 2>&1
s=$(date +%s.%N)
timeout 330 $F auto-tune-all --budget 3 --sizes main --trace --json > "$OUT/tune.json" 2> "$OUT/trace.txt"
echo "rc=$?" >> "$OUT/trace.txt"
e=$(date +%s.%N)
python3 -c "print('auto-tune-all --budget 3 --sizes main wall %.1f s' % ($e - $s))" | tee "$OUT/tune-wall.txt"
$F auto-tune-all --budget 3 --sizes main > "$OUT/tune-table.txt" 2>&1
tar czf "$OUT/gpu-cache.tgz" -C build gpu-cache
s=$(date +%s.%N)
timeout 200 $F bench --json > "$OUT/forge-bench.json" 2> "$OUT/bench-err.txt"
echo "rc=$?" >> "$OUT/bench-err.txt"
e=$(date +%s.%N)
python3 -c "print('bench wall %.1f s' % ($e - $s))" | tee -a "$OUT/tune-wall.txt"
