#!/usr/bin/env bash
# Builds the libFuzzer targets of the manifest parser and the bundle parser (clang, ASan + UBSan)
# and fuzzes them: the manifest parser for SECONDS, the bundle parser (which reaches the manifest
# parsers through its entries) for half as long.
#
#   scripts/fuzz.sh [SECONDS]     default 60 (CI); run for hours by hand
#
# New interesting inputs go to a scratch directory, not to the committed corpus. An input that
# crashes the parser is written as crash-<sha1> under build/fuzz/artifacts/ and the script fails:
# copy it into fuzz/regressions/manifest_parser/ (a bundle's into fuzz/corpus/bundle_parser/),
# fix the parser, and commit both; every test run replays those directories (CTest tests
# manifest_parser_fuzz_regressions and bundle_parser_fuzz_regressions).
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

bundle_seconds=$(((seconds + 1) / 2))
bundle_scratch="$(mktemp -d)"
trap 'rm -rf "$scratch" "$bundle_scratch"' EXIT
echo "[fuzz] bundle_parser_fuzzer for ${bundle_seconds} s"
build/fuzz/fuzz/bundle_parser_fuzzer -max_total_time="$bundle_seconds" -max_len=1048576 \
  -dict=fuzz/bundle.dict \
  -artifact_prefix=build/fuzz/artifacts/ -print_final_stats=1 \
  "$bundle_scratch" fuzz/corpus/bundle_parser
