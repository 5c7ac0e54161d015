#!/bin/bash
# H200 call 2: the main job on a fresh cache with the 16-kernel catalog (reductions revision 2),
# then the query operators at their issue-26 sizes, the star query at 2^28 fact rows, and the
# PyTorch peers of the query operators.
set -u
cd "$(dirname "$0")/.."
mkdir -p build && ln -sfn ../.stage/release build/release
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
F="build/release/src/wgsl-forge --cache build/gpu-cache"
echo "build $(cat build/release/BUILD_COMMIT)" | tee "$OUT/commit.txt"
wall() { python3 -c "import sys; print('%s wall %.1f s' % (sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }
s=$(date +%s.%N)
timeout 300 $F auto-tune-all --budget 3 --sizes main --trace --json > "$OUT/tune.json" 2> "$OUT/trace.txt"
echo "rc=$?" >> "$OUT/trace.txt"
wall "auto-tune-all --budget 3 --sizes main" "$s" "$(date +%s.%N)" | tee "$OUT/walls.txt"
timeout 30 $F auto-tune-all --budget 3 --sizes main > "$OUT/tune-table.txt" 2>&1
run_bench() {  # NAME, then bench arguments; skipped once 480 s have gone
  local name="$1"; shift
  if [ "$SECONDS" -gt 480 ]; then echo "bench $name skipped (time)" >> "$OUT/walls.txt"; return; fi
  local t=$(date +%s.%N)
  timeout 60 $F bench "$@" --json > "$OUT/bench-$name.json" 2> "$OUT/bench-$name.err"
  echo "rc=$?" >> "$OUT/bench-$name.err"
  wall "bench $name" "$t" "$(date +%s.%N)" >> "$OUT/walls.txt"
}
run_bench reduce_sum reduce_sum_f32
run_bench probe_l2 hash_join_u32 --build-size 1048576
run_bench probe_hbm hash_join_u32 --build-size 67108864
run_bench groups_1024 group_by_sum_f32 --groups 1024
run_bench groups_4096 group_by_sum_f32 --groups 4096
run_bench groups_1m group_by_sum_f32 --groups 1048576
run_bench segments_32 segmented_reduce_sum_f32 --segment 32
run_bench segments_1024 segmented_reduce_sum_f32 --segment 1024
run_bench pairs_u64 radix_sort_pairs_u64
t=$(date +%s.%N)
timeout $((560 - SECONDS > 10 ? (560 - SECONDS) / 2 : 10)) build/release/examples/star_query --cache build/gpu-cache --rows 268435456 > "$OUT/star-query.txt" 2>&1
echo "rc=$?" >> "$OUT/star-query.txt"
wall "star_query 2^28" "$t" "$(date +%s.%N)" >> "$OUT/walls.txt"
t=$(date +%s.%N)
(cd bench && timeout $((575 - SECONDS > 5 ? 575 - SECONDS : 5)) python3 query_peers.py > "$OUT/query-peers.json" 2> "$OUT/query-peers.err")
wall "query_peers" "$t" "$(date +%s.%N)" >> "$OUT/walls.txt"
tar czf "$OUT/gpu-cache.tgz" -C build gpu-cache
cat "$OUT/walls.txt"
