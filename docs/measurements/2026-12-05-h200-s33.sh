#!/bin/bash
# H200 session 33: as the session 31 script (TUNE=KERNELS tunes them first on a fresh cache with
# its trace), then the lines of .stage/requests.txt: wgsl-forge argument lists (global options
# first where given), or, after '! ', a shell command run as is, with $F (the wgsl-forge command
# line) and $E (results/edits, for WGSL edits generated on the GPU machine, whose limits the
# schedules need). One tarball: the device tool returns few files.
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CALL=${CALL:-call}
R=results; mkdir -p "$R"
E="$R/edits"; mkdir -p "$E"
trap 'tar czf "$OUT/s33-$CALL.tgz" "$R"' EXIT
echo "release: build $(cat .stage/release/BUILD_COMMIT)" >> "$R/commit.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$R/commit.txt" 2>&1
wall() { python3 -c "import sys; print('%s wall %.1f s' % (sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }
cache=build/gpu-cache-release
F=".stage/release/src/wgsl-forge --cache $cache"
if [ -n "${TUNE:-}" ]; then
  rm -rf "$cache"
  s=$(date +%s.%N)
  timeout 300 $F auto-tune-all $TUNE --budget 3 --trace > "$R/tune-table.txt" 2> "$R/trace.txt"
  echo "rc=$?" >> "$R/trace.txt"
  wall "auto-tune-all $TUNE --budget 3" "$s" "$(date +%s.%N)" >> "$R/walls.txt"
fi
B="$R/bench.txt"
while IFS= read -r line; do
  [ -z "$line" ] && continue
  case "$line" in \#*) continue ;; esac
  if [ "$SECONDS" -gt 500 ]; then echo "== skipped (time): $line" >> "$B"; continue; fi
  t=$(date +%s.%N)
  echo "== $line" >> "$B"
  case "$line" in
    '! '*) eval "${line#! }" >> "$B" 2>&1 ;;
    *) eval "timeout 120 $F $line" >> "$B" 2>&1 ;;
  esac
  echo "rc=$? $(wall x "$t" "$(date +%s.%N)")" >> "$B"
done < <(cat .stage/requests.txt 2>/dev/null)
cat "$R/walls.txt" 2>/dev/null
