#!/bin/bash
# H200 session 28, every call (build in BUILD_COMMIT; CALL names the call): the main job on a
# fresh cache with its trace (issue 23; TUNE=0 skips it, MAIN_JOBS=N runs it N times, each on a
# fresh cache), then the helpers' schedules (one `wgsl-forge` argument list per line of
# .stage/requests.txt; a line that starts with ! runs as written, another program of the build),
# then CUB's peers of the same operations (CUB_PEERS, one cub_peers argument list per ';'), then
# PyTorch's query peers if QUERY_PEERS=1. One tarball: the device tool returns few files.
set -u
cd "$(dirname "$0")/../.."
mkdir -p build && ln -sfn ../.stage/release build/release
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CALL=${CALL:-call}
R=results; mkdir -p "$R"
trap 'tar czf "$OUT/s28-$CALL.tgz" "$R"' EXIT
echo "build $(cat build/release/BUILD_COMMIT)" > "$R/commit.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$R/commit.txt" 2>&1
wall() { python3 -c "import sys; print('%s wall %.1f s' % (sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }
LIMIT=${LIMIT:-560}
F="build/release/src/wgsl-forge --cache build/gpu-cache"
if [ "${TUNE:-1}" = 1 ]; then
  for run in $(seq 1 "${MAIN_JOBS:-1}"); do
    rm -rf build/gpu-cache
    s=$(date +%s.%N)
    timeout 240 $F auto-tune-all --budget 3 --sizes main --trace --json > "$R/tune-$run.json" 2> "$R/trace-$run.txt"
    echo "rc=$?" >> "$R/trace-$run.txt"
    wall "auto-tune-all --budget 3 --sizes main (run $run)" "$s" "$(date +%s.%N)" >> "$R/walls.txt"
  done
  timeout 20 $F auto-tune-all --budget 3 --sizes main > "$R/tune-table.txt" 2>&1
fi
B="$R/bench.txt"
while IFS= read -r line; do
  [ -z "$line" ] && continue
  case "$line" in \#*) continue ;; esac
  if [ "$SECONDS" -gt $((LIMIT - 90)) ]; then echo "== skipped (time): $line" >> "$B"; continue; fi
  t=$(date +%s.%N)
  echo "== $line" >> "$B"
  case "$line" in
    !*) eval "timeout 60 ${line#!}" >> "$B" 2>&1 ;;
    *) eval "timeout 45 $F $line" >> "$B" 2>&1 ;;
  esac
  echo "rc=$? $(wall x "$t" "$(date +%s.%N)")" >> "$B"
done < .stage/requests.txt
C=build/release/bench/cub_peers
IFS=';' read -ra peers <<< "${CUB_PEERS:-}"
for args in "${peers[@]}"; do
  if [ "$SECONDS" -gt $((LIMIT - 25)) ]; then echo "== skipped (time): cub $args" >> "$R/cub.txt"; continue; fi
  echo "== cub_peers --repeats 10 $args" >> "$R/cub.txt"
  eval "timeout 40 $C --repeats 10 $args" >> "$R/cub.txt" 2>&1
  echo "rc=$?" >> "$R/cub.txt"
done
if [ "${QUERY_PEERS:-0}" = 1 ]; then
  t=$(date +%s.%N)
  (cd bench && timeout $((585 - SECONDS > 5 ? 585 - SECONDS : 5)) python3 query_peers.py --repeats 5 > "../$R/query-peers.json" 2> "../$R/query-peers.err")
  echo "rc=$?" >> "$R/query-peers.err"
  wall "query_peers" "$t" "$(date +%s.%N)" >> "$R/walls.txt"
fi
cat "$R/walls.txt" 2>/dev/null
