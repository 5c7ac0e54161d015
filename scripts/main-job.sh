#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), builds the release preset and runs the main job.
# For now the main job reports the tool's version and where its manifest cache lives;
# auto-tune-all takes its place once the kernel catalog and the tuner exist.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

bash scripts/setup.sh release

forge="$repo_root/build/release/src/wgsl-forge"
"$forge" --version
"$forge" info "$@"
