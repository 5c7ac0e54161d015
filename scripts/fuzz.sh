#!/usr/bin/env bash
# Builds the libFuzzer target of the manifest parser (clang, ASan + UBSan) and fuzzes it.
#
#   scripts/fuzz.sh [SECONDS]     default 60 (CI); run for hours by hand
#
# New interesting inputs go to a scratch directory, not to the committed corpus. An input that
# crashes the parser is written as crash-<sha1> under build/fuzz/artifacts/ and the script fails:
# copy it into fuzz/regressions/manifest_parser/, fix the parser, and commit both; every test run
# replays that directory (CTest test manifest_parser_fuzz_regressions).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
seconds="${1:-60}"

bash scripts/setup.sh fuzz

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p build/fuzz/artifacts
echo "[fuzz] manifest_parser_fuzzer for ${seconds} s"
# -max_len: libFuzzer would otherwise stay below the largest seed (about 20 KB), where inputs
# nested deeply enough to exhaust a stack, or near the size limit, are never tried.
build/fuzz/fuzz/manifest_parser_fuzzer -max_total_time="$seconds" -max_len=1048576 \
  -dict=fuzz/manifest.dict \
  -artifact_prefix=build/fuzz/artifacts/ -print_final_stats=1 \
  "$scratch" fuzz/corpus/manifest_parser fuzz/regressions/manifest_parser
