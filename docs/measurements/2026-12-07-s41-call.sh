#!/bin/bash
# Session 41's next device call: on an H200, the scripted run on a fresh cache (performance.sh
# all 3) and then as much of the request list as the call's time leaves; elsewhere the request
# list alone. Outputs in $OUT (perf.tgz, requests-bench.txt, gpu.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."
requests=docs/measurements/2026-12-07-s41-requests-4.txt
s=$SECONDS
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash docs/measurements/2026-12-07-s38.sh perf all 3
fi
# Each request's output goes straight to $OUT/requests-bench.txt, so that a call cut off by its
# limit still returns the lines done.
timeout "$((${LIMIT:-560} - (SECONDS - s)))" bash docs/measurements/2026-12-07-s38.sh requests "$requests"
