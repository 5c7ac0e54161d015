#!/bin/bash
# H200 session 26 call 2 (build in BUILD_COMMIT): after the tuning-time changes (issue 23), the
# group-by fixed grid, the segmented sum by segment length (issue 26) and the sorts' narrowed
# spine width (issue 29): the main job on a fresh cache with its trace, then the query operators
# with their tuned winners and the helpers' proposed schedules, then the PyTorch peers. One
# tarball: the device tool returns only 8 files.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build && ln -sfn ../.stage/release build/release
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
F="build/release/src/wgsl-forge --cache build/gpu-cache"
R=results; mkdir -p "$R"
trap 'tar czf "$OUT/s26-call2.tgz" "$R"' EXIT
echo "build $(cat build/release/BUILD_COMMIT)" > "$R/commit.txt"
wall() { python3 -c "import sys; print('%s wall %.1f s' % (sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }
s=$(date +%s.%N)
timeout 240 $F auto-tune-all --budget 3 --sizes main --trace --json > "$R/tune.json" 2> "$R/trace.txt"
echo "rc=$?" >> "$R/trace.txt"
wall "auto-tune-all --budget 3 --sizes main" "$s" "$(date +%s.%N)" >> "$R/walls.txt"
timeout 20 $F auto-tune-all --budget 3 --sizes main > "$R/tune-table.txt" 2>&1
B="$R/bench.txt"
bench() {  # bench arguments; skipped once the call's time is nearly spent
  if [ "$SECONDS" -gt 470 ]; then echo "== skipped (time): $*" >> "$B"; return; fi
  local t=$(date +%s.%N)
  echo "== bench $*" >> "$B"
  timeout 40 $F bench "$@" --samples 10 --json >> "$B" 2>&1
  echo "rc=$? $(wall x "$t" "$(date +%s.%N)")" >> "$B"
}
G4='workgroup_size=256,rows_per_invocation=4,local_slots=4096,persistent_workgroups=512'
G1='workgroup_size=512,rows_per_invocation=1,local_slots=4096,persistent_workgroups=512'
G16='workgroup_size=256,rows_per_invocation=16,local_slots=4096,persistent_workgroups=512'
for g in 1024 4096; do
  bench group_by_sum_f32 --groups $g
  bench group_by_sum_f32 --groups $g --schedule "$G4"
  bench group_by_sum_f32 --groups $g --schedule "$G1"
  bench group_by_sum_f32 --groups $g --schedule "$G16"
done
bench group_by_sum_f32 --groups 1048576 --schedule 'local_slots=0,rows_per_invocation=4'
bench group_by_sum_f32 --groups 1048576 --schedule 'local_slots=0,rows_per_invocation=16,persistent_workgroups=2048'
bench segmented_reduce_sum_f32 --segment 32 --schedule 'team_lanes=8,team_items=4,team_segments=4,use_subgroups=1,block_segments=256'
bench segmented_reduce_sum_f32 --segment 32 --schedule 'team_lanes=8,team_items=4,team_segments=8,use_subgroups=1,block_segments=256'
bench segmented_reduce_sum_f32 --segment 1024 --schedule 'team_lanes=32,team_items=32,use_subgroups=1,block_segments=256'
bench segmented_reduce_sum_f32 --segment 1024 --schedule 'team_lanes=32,team_items=32,team_segments=2,use_subgroups=1,block_segments=256'
bench hash_join_u32 --build-size 1048576
bench hash_join_u32 --build-size 67108864
t=$(date +%s.%N)
(cd bench && timeout $((575 - SECONDS > 5 ? 575 - SECONDS : 5)) python3 query_peers.py --repeats 5 > "../$R/query-peers.json" 2> "../$R/query-peers.err")
echo "rc=$?" >> "$R/query-peers.err"
wall "query_peers" "$t" "$(date +%s.%N)" >> "$R/walls.txt"
cat "$R/walls.txt"
