#!/bin/bash
# H200 session 29: the main job on a fresh cache with its trace, alternating this session's build
# (.stage/release) with the build before it (.stage/base, in its BUILD_COMMIT) in one call, so that
# their walls and phases compare on one machine state (ORDER: a space-separated list of "release"
# and "base", one main job each); then, on the last release run's cache (every main entry tuned),
# the star query at 2^28 fact rows (STAR=1) and the lines of .stage/requests.txt (wgsl-forge
# argument lists, global options first where given; ORDER="" runs only those). One tarball: the device tool returns few files.
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CALL=${CALL:-call}
R=results; mkdir -p "$R"
trap 'tar czf "$OUT/s29-$CALL.tgz" "$R"' EXIT
for build in release base; do
  [ -d ".stage/$build" ] && echo "$build: build $(cat .stage/$build/BUILD_COMMIT)" >> "$R/commit.txt"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$R/commit.txt" 2>&1
wall() { python3 -c "import sys; print('%s wall %.1f s' % (sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }
run=0
for build in ${ORDER-release}; do
  run=$((run + 1))
  cache="build/gpu-cache-$build"
  rm -rf "$cache"
  s=$(date +%s.%N)
  timeout 240 ".stage/$build/src/wgsl-forge" --cache "$cache" auto-tune-all --budget 3 --sizes main \
    --trace --json > "$R/tune-$run-$build.json" 2> "$R/trace-$run-$build.txt"
  echo "rc=$?" >> "$R/trace-$run-$build.txt"
  wall "auto-tune-all --budget 3 --sizes main (run $run, $build)" "$s" "$(date +%s.%N)" >> "$R/walls.txt"
done
F=".stage/release/src/wgsl-forge --cache build/gpu-cache-release"
case " ${ORDER-release} " in
  *" release "*) $F auto-tune-all --budget 3 --sizes main > "$R/tune-table.txt" 2>&1 ;;
esac
if [ "${STAR:-0}" = 1 ]; then
  for seed in 5 6; do
    timeout 120 .stage/release/examples/star_query --cache build/gpu-cache-release \
      --rows 268435456 --seed "$seed" >> "$R/star-query.txt" 2>&1
    echo "rc=$?" >> "$R/star-query.txt"
  done
fi
B="$R/bench.txt"
while IFS= read -r line; do
  [ -z "$line" ] && continue
  case "$line" in \#*) continue ;; esac
  if [ "$SECONDS" -gt 500 ]; then echo "== skipped (time): $line" >> "$B"; continue; fi
  t=$(date +%s.%N)
  echo "== $line" >> "$B"
  eval "timeout 45 $F $line" >> "$B" 2>&1
  echo "rc=$? $(wall x "$t" "$(date +%s.%N)")" >> "$B"
done < <(cat .stage/requests.txt 2>/dev/null)
cat "$R/walls.txt" 2>/dev/null
