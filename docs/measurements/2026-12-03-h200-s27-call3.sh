#!/bin/bash
# H200 session 27 call 3 (build in BUILD_COMMIT): the main job on a fresh cache with its trace
# (issue 23), then the helpers' schedules (one `wgsl-forge` argument list per line of
# .stage/requests.txt), then CUB's u64 pair sort and segmented sums (issue 26's peers). One
# tarball: the device tool returns few files. A line that starts with ! runs as written (another
# program of the build). CUB=0 leaves the CUB peers out. Then PyTorch's query peers.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build && ln -sfn ../.stage/release build/release
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
F="build/release/src/wgsl-forge --cache build/gpu-cache"
R=results; mkdir -p "$R"
trap 'tar czf "$OUT/s27-call3.tgz" "$R"' EXIT
echo "build $(cat build/release/BUILD_COMMIT)" > "$R/commit.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$R/commit.txt" 2>&1
wall() { python3 -c "import sys; print('%s wall %.1f s' % (sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }
LIMIT=${LIMIT:-560}
if [ "${TUNE:-1}" = 1 ]; then
  s=$(date +%s.%N)
  timeout 240 $F auto-tune-all --budget 3 --sizes main --trace --json > "$R/tune.json" 2> "$R/trace.txt"
  echo "rc=$?" >> "$R/trace.txt"
  wall "auto-tune-all --budget 3 --sizes main" "$s" "$(date +%s.%N)" >> "$R/walls.txt"
  timeout 20 $F auto-tune-all --budget 3 --sizes main > "$R/tune-table.txt" 2>&1
fi
B="$R/bench.txt"
while IFS= read -r line; do
  [ -z "$line" ] && continue
  case "$line" in \#*) continue ;; esac
  if [ "$SECONDS" -gt $((LIMIT - 110)) ]; then echo "== skipped (time): $line" >> "$B"; continue; fi
  t=$(date +%s.%N)
  echo "== $line" >> "$B"
  case "$line" in
    !*) eval "timeout 60 ${line#!}" >> "$B" 2>&1 ;;  # another program of the build, as written
    *) eval "timeout 45 $F $line" >> "$B" 2>&1 ;;
  esac
  echo "rc=$? $(wall x "$t" "$(date +%s.%N)")" >> "$B"
done < .stage/requests.txt
C=build/release/bench/cub_peers
[ "${CUB:-1}" = 1 ] && for args in "radix_sort_pairs_u64" "--segment 32 segmented_reduce_sum_f32" \
            "--segment 256 segmented_reduce_sum_f32" "--segment 1024 segmented_reduce_sum_f32"; do
  if [ "$SECONDS" -gt $((LIMIT - 25)) ]; then echo "== skipped (time): cub $args" >> "$R/cub.txt"; continue; fi
  echo "== cub_peers --repeats 10 $args" >> "$R/cub.txt"
  timeout 40 $C --repeats 10 $args >> "$R/cub.txt" 2>&1
  echo "rc=$?" >> "$R/cub.txt"
done
# PyTorch's query operators (bench/query_peers.py) in the same call, with what time is left.
t=$(date +%s.%N)
(cd bench && timeout $((585 - SECONDS > 5 ? 585 - SECONDS : 5)) python3 query_peers.py --repeats 5 > "../$R/query-peers.json" 2> "../$R/query-peers.err")
echo "rc=$?" >> "$R/query-peers.err"
wall "query_peers" "$t" "$(date +%s.%N)" >> "$R/walls.txt"
cat "$R/walls.txt" 2>/dev/null
