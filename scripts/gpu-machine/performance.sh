#!/usr/bin/env bash
# Run on the GPU machine (see docs/gpu-machine.md): auto-tune-all at full size, then the bench
# and the peers (PyTorch, and CUB with cuBLAS: bench/cub_peers.cu, built here with nvcc) in the
# same session, joined into one table (docs/performance.md's source). Results go to $OUT (or build/gpu-machine); the cache persists in build/gpu-cache.
#
#   performance.sh tune [BUDGET] [SECONDS]   certify and tune each kernel in turn (default budget
#                                            8), printing each row as it is done; stops starting
#                                            new kernels after SECONDS (default: no limit)
#   performance.sh bench                     bench + peers (PyTorch, CUB) + table
#   performance.sh all [BUDGET] [SECONDS]    tune, then bench
#   performance.sh kernels BUDGET KERNEL...  tune only these kernels (every candidate's timing
#                                            or failure in trace.txt), then bench them (with
#                                            each pass's time) against the peers
#   performance.sh sweep                     bandwidth against buffer size: the same copy-like
#                                            kernel over N floats in buffers of N and of more
#                                            floats, and bench's copy ceiling per size
#   performance.sh given KERNEL SCHEDULE...  bench each schedule as given (k=v,...), with each
#                                            pass's time, into given.txt: no search
#   performance.sh startup                   the typed primitives' host cost and a database's
#                                            start-up on build/gpu-cache (startup.txt)
#   performance.sh joins [BUDGET]            tune hash_join_u32 and group_by_sum_f32 (default
#                                            budget 8), bench the probe of 2^28 keys against a
#                                            table in L2 (2^20 build rows) and one in HBM (2^26)
#                                            and the group-by of 2^28 rows at 1024, 4096 and 2^20
#                                            groups, then examples/star_query at 2^28 fact rows
#                                            (joins.txt)
#   performance.sh certify COUNT KERNEL SCHEDULE...
#                                            certify each schedule COUNT times with fresh seeds;
#                                            one line per schedule in certify.txt, and the first
#                                            line of each failure in certify-failures.txt
# Outputs begin with the build's commit (build/release/BUILD_COMMIT, written by prepare.sh).
# WGSL_FORGE_SIZES: the size buckets `tune` and `all` tune (tune --sizes: main, all, or labels
# such as 2^20,2^28; default main), with the buckets of issue 26's targets (kernel_sizes).
# WGSL_FORGE_OPTIONS: global options given to every wgsl-forge command, for example
# --no-bounds-checks (kernels tuned and benched without Dawn's bounds clamps, cached apart).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
source scripts/gpu-machine/vulkan-env.sh
out="${OUT:-$repo_root/build/gpu-machine}"
mkdir -p "$out"
forge="build/release/src/wgsl-forge --cache build/gpu-cache ${WGSL_FORGE_OPTIONS:-}"
build="build $(cat build/release/BUILD_COMMIT 2>/dev/null || echo unknown)"
sizes="${WGSL_FORGE_SIZES:-main}"
# The size buckets tuned for KERNEL: $sizes, and where issue 26 sets targets away from a kernel's
# main bucket (segments of 32 and of 1024 values, group-by at 2^20 groups) those buckets too, so
# that bench's rows there time tuned schedules.
kernel_sizes() {
  case "$1" in
    segmented_reduce_sum_f32) echo "$sizes,2^28x32,2^28x1024" ;;
    group_by_sum_f32) echo "$sizes,2^28g2^20" ;;
    *) echo "$sizes" ;;
  esac
}
tune_all() {
  local budget="${1:-8}" limit="${2:-0}" start=$SECONDS kernel
  for kernel in $(build/release/src/wgsl-forge kernels --json | python3 -c \
      'import json, sys; print(" ".join(k["id"] for k in json.load(sys.stdin)))'); do
    if [ "$limit" -gt 0 ] && [ $((SECONDS - start)) -gt "$limit" ]; then
      echo "not tuned (time limit): $kernel"
      continue
    fi
    $forge tune "$kernel" --budget "$budget" --sizes "$(kernel_sizes "$kernel")" 2>&1 | tail -n +3
  done 2>&1 | tee "$out/tune.txt"
}
tune_some() {
  local budget="$1" kernel
  shift
  for kernel in "$@"; do
    $forge tune "$kernel" --budget "$budget" --trace 2>>"$out/trace.txt" | tail -1
  done 2>&1 | tee "$out/tune.txt"
}
# The CUB and cuBLAS peer, built for Hopper with this machine's nvcc (prepare.sh may have built
# it already where nvcc is; a binary that does not start here is built again).
cub_peers=build/release/bench/cub_peers
build_cub_peers() {
  if ! "$cub_peers" --help > /dev/null 2>&1; then
    "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O3 -std=c++17 -arch=sm_90 \
      -o "$cub_peers" bench/cub_peers.cu -lcublas
  fi
}
bench() {
  build_cub_peers
  $forge bench "$@" --json > "$out/forge-bench.json"
  python3 bench/peers.py > "$out/peers.json"
  "$cub_peers" > "$out/cub-peers.json"
  python3 bench/compare.py "$out/forge-bench.json" "$out/peers.json" "$out/cub-peers.json" |
    tee "$out/performance-table.md"
  # The second histogram target is at 4096 bins (with the schedule tuned at 256).
  if [ $# -eq 0 ] || [[ " $* " == *" histogram_u32 "* ]]; then
    $forge bench histogram_u32 --bins 4096 --json > "$out/forge-bench-4096-bins.json"
    python3 bench/peers.py --bins 4096 histogram_u32 > "$out/peers-4096-bins.json"
    "$cub_peers" --bins 4096 histogram_u32 > "$out/cub-peers-4096-bins.json"
    python3 bench/compare.py "$out/forge-bench-4096-bins.json" "$out/peers-4096-bins.json" \
      "$out/cub-peers-4096-bins.json" | tee "$out/performance-table-4096-bins.md"
  fi
  # segmented_reduce_sum_f32's targets are at segments of 32 and of 1024 values (tuned at 256).
  if [ $# -eq 0 ] || [[ " $* " == *" segmented_reduce_sum_f32 "* ]]; then
    for length in 32 1024; do
      $forge bench segmented_reduce_sum_f32 --segment "$length" --passes |
        tee "$out/forge-bench-segment-$length.txt"
    done
  fi
}
sweep() {
  local probe=build/release/bench/runtime_probe n b
  {
    for n in 16777216 33554432 67108864 134217728 268435456; do
      $probe --elements "$n" --samples 10 | tail -3
    done
    for b in 67108864 134217728 268435456 536870912; do
      $probe --elements 33554432 --buffer-elements "$b" --samples 10 | tail -3
    done
    for n in 33554432 67108864 134217728 268435456; do
      $forge bench affine_f32 --size "$n" --samples 10 | tail -2
    done
  } 2>&1 | tee "$out/sweep.txt"
}
given() {
  local kernel="$1" schedule
  shift
  {
    echo "$build"
    for schedule in "$@"; do
      echo "== $kernel $schedule"
      $forge bench "$kernel" --schedule "$schedule" --passes --samples 20 || echo "exit $?"
    done
  } 2>&1 | tee -a "$out/given.txt"
}
certify_seeds() {
  local count="$1" kernel="$2" schedule result failed i
  shift 2
  echo "$build" | tee -a "$out/certify.txt"
  for schedule in "$@"; do
    failed=0
    for ((i = 0; i < count; i++)); do
      if ! result=$($forge certify "$kernel" --schedule "$schedule" 2>&1); then
        failed=$((failed + 1))
        echo "$kernel $schedule: $(grep -m1 -E 'mismatch|failed|error' <<<"$result")" \
          >>"$out/certify-failures.txt"
      fi
    done
    echo "$kernel $schedule: $failed of $count certifications failed" | tee -a "$out/certify.txt"
  done
}
# The typed primitives on the tuned cache: the host cost of one recorded call, of the first call
# and of loading all 12 kernels (bench/primitives_bench), then the example start-up and query.
startup() {
  {
    echo "$build"
    build/release/bench/primitives_bench --cache build/gpu-cache --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true
    build/release/examples/database_startup --cache build/gpu-cache --rows 16777216
  } 2>&1 | tee "$out/startup.txt"
}

joins() {
  local budget="${1:-8}" n=268435456 build_rows groups
  {
    echo "$build"
    tune_some "$budget" hash_join_u32 group_by_sum_f32
    for build_rows in 1048576 67108864; do
      $forge bench hash_join_u32 --size "$n" --build-size "$build_rows" --passes
    done
    for groups in 1024 4096 1048576; do
      $forge bench group_by_sum_f32 --size "$n" --groups "$groups" --passes
    done
    build/release/examples/star_query --cache build/gpu-cache --rows "$n"
  } 2>&1 | tee "$out/joins.txt"
}

case "${1:-bench}" in
  tune) tune_all "${2:-8}" "${3:-0}" ;;
  bench) bench ;;
  all) tune_all "${2:-8}" "${3:-0}" && bench ;;
  kernels) tune_some "$2" "${@:3}" && bench --passes "${@:3}" ;;
  sweep) sweep ;;
  given) given "${@:2}" ;;
  certify) certify_seeds "$2" "${@:3}" ;;
  startup) startup ;;
  joins) joins "${2:-8}" ;;
esac
