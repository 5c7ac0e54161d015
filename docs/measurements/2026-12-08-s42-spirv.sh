#!/bin/bash
# Session 42: the SPIR-V that Dawn hands the Vulkan driver for the schedules of issue 25's missed
# rows, dumped by Mesa (MESA_SPIRV_DUMP_PATH) while `wgsl-forge certify` runs each on lavapipe,
# one folder per schedule under $1 (default .stage/spv): spirv-N.spirv, one per pass, in the
# order the plan creates its pipelines. bench/pipeline_stats then reads the driver's statistics
# of each on the GPU machine. Run from the repository root after `scripts/setup.sh release`.
set -euo pipefail
out=${1:-.stage/spv}
forge=build/release/src/wgsl-forge
edits=/tmp/spv-edits
source scripts/gpu-machine/vulkan-env.sh >/dev/null
rm -rf "$out" "$edits"
mkdir -p "$out" "$edits"
sort8="digit_bits=8,keys_per_invocation=16,use_subgroups=1,workgroup_size=256"
# name | kernel | schedule | extra certify arguments (GEMM's tuned tiles and group-by's
# 4096-slot tables need 48 KiB of workgroup memory, more than lavapipe's 32 KiB: not here)
runs=(
  "keys-os0|radix_sort_u32|$sort8,one_sweep=0|"
  "keys-os0-nobounds|radix_sort_u32|$sort8,one_sweep=0|--no-bounds-checks"
  "keys-os0-rev11|radix_sort_u32|$sort8,one_sweep=0|--source $edits/keys-os0-rev11.wgsl"
  "keys-os1|radix_sort_u32|$sort8,one_sweep=1|"
  "keys-os1-sweepstart|radix_sort_u32|$sort8,one_sweep=1|--source $edits/keys-os1-sweepstart.wgsl"
  "pairs-os0|radix_sort_pairs_u32|$sort8,one_sweep=0|"
  "pairs-os0-rev11|radix_sort_pairs_u32|$sort8,one_sweep=0|--source $edits/pairs-os0-rev11.wgsl"
  "pairs-os1|radix_sort_pairs_u32|$sort8,one_sweep=1|"
  "u64-os1|radix_sort_pairs_u64|$sort8,one_sweep=1,direct_rounds=1|"
  "scan|scan_exclusive_u32|bounds_per_tile=0,claim_tiles=1,look_back_publishes=0,look_back_rows=1,look_back_window=32,passes=1,use_subgroups=1,vectors_per_invocation=4,workgroup_size=1024|"
  "compact|compact_f32|bounds_per_tile=0,claim_tiles=0,look_back_publishes=0,look_back_rows=1,look_back_window=32,passes=1,stage_kept=0,use_subgroups=1,vectors_per_invocation=4,workgroup_size=512|"
)
$forge generate radix_sort_u32 --schedule "$sort8,one_sweep=0" | python3 bench/edits/plain_staging.py tilestart > "$edits/keys-os0-rev11.wgsl"
$forge generate radix_sort_pairs_u32 --schedule "$sort8,one_sweep=0" | python3 bench/edits/plain_staging.py tilestart > "$edits/pairs-os0-rev11.wgsl"
$forge generate radix_sort_u32 --schedule "$sort8,one_sweep=1" | python3 bench/edits/plain_staging.py sweepstart > "$edits/keys-os1-sweepstart.wgsl"
for run in "${runs[@]}"; do
  IFS='|' read -r name kernel schedule extra <<< "$run"
  mkdir -p "$out/$name"
  # shellcheck disable=SC2086  # extra holds whole arguments
  MESA_SPIRV_DUMP_PATH="$out/$name" $forge --cache "$edits/cache" certify "$kernel" \
    --schedule "$schedule" --seed 4201 $extra > "$out/$name/certify.txt" 2>&1 \
    || { echo "$name: certify failed"; tail -3 "$out/$name/certify.txt"; exit 1; }
  echo "$name: $(ls "$out/$name" | grep -c spirv) modules; $(tail -2 "$out/$name/certify.txt" | head -1 | cut -c1-100)"
done
