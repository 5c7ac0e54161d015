#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), builds the release preset and runs the main job:
# auto-tune-all on the default adapter (lavapipe on a machine without a GPU), which certifies and
# tunes every builtin kernel not yet tuned for this hardware and stores the evidence in the cache.
# A second run finds everything in the cache and finishes in seconds.
#
#   scripts/main-job.sh [auto-tune-all options]     default: --budget 3 (a few minutes on lavapipe)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

bash scripts/setup.sh release

forge="$repo_root/build/release/src/wgsl-forge"
"$forge" --version
"$forge" info
if [ "$#" -eq 0 ]; then set -- --budget 3; fi
"$forge" auto-tune-all "$@"
