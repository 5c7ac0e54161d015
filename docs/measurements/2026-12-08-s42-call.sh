#!/bin/bash
# Session 42's device call: first the driver's statistics (registers, shared memory) of the
# SPIR-V that docs/measurements/2026-12-08-s42-spirv.sh dumped into .stage/spv, with and without
# robustBufferAccess (bench/pipeline_stats, built here into .stage/pipeline_stats); then session
# 41's call (docs/measurements/2026-12-07-s41-call.sh: on an H200 the scripted run, then the
# request list). Outputs in $OUT: pipeline-stats.txt, perf.tgz, requests-bench.txt, gpu.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
s=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt"
# The Vulkan loader is not installed there: vulkan-env.sh unpacks the one carried in .gl.
source scripts/gpu-machine/vulkan-env.sh
{
  for robust in "" --no-robust-access; do
    echo "== pipeline_stats ${robust:-(robustBufferAccess on)}"
    for dir in .stage/spv/*/; do
      .stage/pipeline_stats --device NVIDIA $robust "$dir"spirv-*.spirv
    done
  done
} > "$OUT/pipeline-stats.txt" 2>&1
echo "pipeline stats: $((SECONDS - s)) s, $(wc -l < "$OUT/pipeline-stats.txt") lines"
LIMIT=$((${LIMIT:-560} - (SECONDS - s))) bash docs/measurements/2026-12-07-s41-call.sh
