#!/bin/bash
set -u
cd "$(dirname "$0")/.."
mkdir -p build && ln -sfn ../.stage/release build/release
source scripts/gpu-machine/vulkan-env.sh
export LD_LIBRARY_PATH="$PWD/.stage/release/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
F="build/release/src/wgsl-forge --cache build/gpu-cache"
R="$OUT/results.txt"
echo "build $(cat build/release/BUILD_COMMIT)" > "$R"
echo "== tune table (cached)" >> "$R"; timeout 20 $F auto-tune-all --budget 3 --sizes main >> "$R" 2>&1
for spec in "reduce_sum_f32" "hash_join_u32 --build-size 1048576" "segmented_reduce_sum_f32 --segment 32" "segmented_reduce_sum_f32 --segment 1024"; do
  echo "== bench $spec" >> "$R"; timeout 35 $F bench $spec --json >> "$R" 2>&1; echo "rc=$?" >> "$R"
done
echo "== star_query --rows 268435456 --seed 5" >> "$R"
timeout 70 build/release/examples/star_query --cache build/gpu-cache --rows 268435456 --seed 5 >> "$R" 2>&1; echo "rc=$?" >> "$R"
