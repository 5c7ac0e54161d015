#!/usr/bin/env bash
# Device call: radix sort look_back schedules, given, with pass times; then the peer.
set -uo pipefail
source scripts/gpu-machine/vulkan-env.sh
f="build/release/src/wgsl-forge --cache $OUT/cache"
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv > $OUT/r/gpu.txt 2>&1
for s in \
 "digit_bits=4,keys_per_invocation=8,use_subgroups=1,workgroup_size=128,look_back=0" \
 "digit_bits=4,keys_per_invocation=8,use_subgroups=1,workgroup_size=128,look_back=1" \
 "digit_bits=4,keys_per_invocation=8,use_subgroups=1,workgroup_size=256,look_back=1" \
 "digit_bits=4,keys_per_invocation=8,use_subgroups=1,workgroup_size=512,look_back=1" \
 "digit_bits=4,keys_per_invocation=4,use_subgroups=1,workgroup_size=256,look_back=1" \
 "digit_bits=4,keys_per_invocation=4,use_subgroups=1,workgroup_size=512,look_back=1" \
 "digit_bits=4,keys_per_invocation=16,use_subgroups=1,workgroup_size=128,look_back=1" \
 "digit_bits=4,keys_per_invocation=16,use_subgroups=1,workgroup_size=256,look_back=1" \
 "digit_bits=8,keys_per_invocation=16,use_subgroups=1,workgroup_size=256,look_back=1" \
 "digit_bits=8,keys_per_invocation=8,use_subgroups=1,workgroup_size=512,look_back=1" \
 "digit_bits=8,keys_per_invocation=8,use_subgroups=1,workgroup_size=256,look_back=1" ; do
  echo "== $s" | tee -a $OUT/r/given.txt
  timeout 60 $f bench radix_sort_u32 --schedule "$s" --passes --samples 10 2>&1 | tail -16 | tee -a $OUT/r/given.txt
done
tar czf $OUT/results.tgz -C $OUT r
