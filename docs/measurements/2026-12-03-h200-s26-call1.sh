#!/bin/bash
# H200 session 26 call 1 (build 178fc6f = d24eb99's binaries): the main job on a fresh cache with
# the per-kernel trace (issue 23's breakdown for the 16-kernel catalog), the probe against a table
# in HBM, and the PyTorch peers of the query operators (issue 26). Everything goes into one
# tarball: the device tool returns only 8 files.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build && ln -sfn ../.stage/release build/release
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
F="build/release/src/wgsl-forge --cache build/gpu-cache"
R=results; mkdir -p "$R"
trap 'tar czf "$OUT/s26-call1.tgz" "$R"' EXIT
echo "build $(cat build/release/BUILD_COMMIT)" > "$R/commit.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$R/commit.txt" 2>&1
wall() { python3 -c "import sys; print('%s wall %.1f s' % (sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }
s=$(date +%s.%N)
timeout 330 $F auto-tune-all --budget 3 --sizes main --trace --json > "$R/tune.json" 2> "$R/trace.txt"
echo "rc=$?" >> "$R/trace.txt"
wall "auto-tune-all --budget 3 --sizes main" "$s" "$(date +%s.%N)" >> "$R/walls.txt"
timeout 30 $F auto-tune-all --budget 3 --sizes main > "$R/tune-table.txt" 2>&1
t=$(date +%s.%N)
timeout 60 $F bench hash_join_u32 --build-size 67108864 --json > "$R/bench-probe_hbm.json" 2> "$R/bench-probe_hbm.err"
echo "rc=$?" >> "$R/bench-probe_hbm.err"
wall "bench probe_hbm" "$t" "$(date +%s.%N)" >> "$R/walls.txt"
t=$(date +%s.%N)
(cd bench && timeout $((570 - SECONDS > 5 ? 570 - SECONDS : 5)) python3 query_peers.py > "../$R/query-peers.json" 2> "../$R/query-peers.err")
echo "rc=$?" >> "$R/query-peers.err"
wall "query_peers" "$t" "$(date +%s.%N)" >> "$R/walls.txt"
cat "$R/walls.txt"
