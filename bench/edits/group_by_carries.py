#!/usr/bin/env python3
"""Edits of group_by_sum_f32's generated WGSL of revision 6 (with workgroup tables, for example
group_by_sum_f32_rev6_1024x4_2048slots.wgsl here, or `generate` of a build before 5630e23) that
locate the aggregate pass's time, session 38: `group_by_carries.py MODE IN OUT`.

- no_carry: the local low word's atomicAdd without its returned value and without the carry,
  so that no row leaves the workgroup (wrong sums: timing only);
- no_add: rows are loaded, tested and converted but never added (timing only);
- packed: correct; a carry out of a local low word is counted in the top 8 bits of the slot's
  count word (rows in the low 24) instead of being added at once to the key's global high word,
  which first searches the global table for the key (global_slot: loads from L2 that the whole
  subgroup waits for, about one row in 256); the count word's add follows the low word's, and
  only a carry that wraps the 8 bits (every 256 carries of a key in a workgroup) goes global.
  The flush adds the slot's carries with its count and low word. Revision 7 (commit 5630e23)
  builds this in, but waits for the count word's old value only after a carry.
"""
import sys

mode, source, target = sys.argv[1:4]
wgsl = open(source).read()


def replace(old, new):
    global wgsl
    if wgsl.count(old) != 1:
        sys.exit(f"expected one copy of: {old!r} (found {wgsl.count(old)})")
    wgsl = wgsl.replace(old, new)


adds = """      atomicAdd(&local_table[local_count_word(slot)], 1u);
      let old = atomicAdd(&local_table[local_low_word(slot)], sum);
      if (old + sum < old) { add_global_carries(key, 1u); }
"""
if mode == "no_carry":
    replace(adds, """      atomicAdd(&local_table[local_count_word(slot)], 1u);
      atomicAdd(&local_table[local_low_word(slot)], sum);
""")
elif mode == "no_add":
    replace("} else if (!add_local(row_keys[r], sum)) {",
            "} else if (sum == 0xffffffffu && !add_local(row_keys[r], sum)) {")
elif mode == "packed":
    replace(adds, """      let old = atomicAdd(&local_table[local_low_word(slot)], sum);
      let carry = select(0u, 1u, old + sum < old);
      let old_counts = atomicAdd(&local_table[local_count_word(slot)], 1u + (carry << 24u));
      if (carry != 0u && (old_counts >> 24u) == 255u) { add_global_carries(key, 256u); }
""")
    replace("""    let count = atomicLoad(&local_table[local_count_word(slot)]);
    if (count != 0u) {
      add_global(atomicLoad(&local_table[local_key_word(slot)]), count,
                 atomicLoad(&local_table[local_low_word(slot)]));
    }
""", """    let counts = atomicLoad(&local_table[local_count_word(slot)]);
    if (counts != 0u) {
      let key = atomicLoad(&local_table[local_key_word(slot)]);
      add_global(key, counts & 0xffffffu, atomicLoad(&local_table[local_low_word(slot)]));
      if ((counts >> 24u) != 0u) { add_global_carries(key, counts >> 24u); }
    }
""")
else:
    sys.exit(f"unknown mode {mode}")
open(target, "w").write(wgsl)
