#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), builds with warnings as errors, checks the formatting and
# runs the whole test suite. This is what CI runs.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

bash scripts/setup.sh ci

echo "[test] clang-format check"
git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run --Werror

echo "[test] ctest"
ctest --preset ci --timeout 600
