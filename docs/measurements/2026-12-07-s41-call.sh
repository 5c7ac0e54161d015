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
left=$((560 - (SECONDS - s)))
mkdir -p /tmp/r41
OUT=/tmp/r41 timeout "$left" bash docs/measurements/2026-12-07-s38.sh requests "$requests"
cp -r /tmp/r41/. "$OUT/"
