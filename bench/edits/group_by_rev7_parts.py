#!/usr/bin/env python3
"""Timing edits of group_by_sum_f32's generated WGSL of revision 7 or 8 (workgroup tables, for
example group_by_sum_f32_rev7_1024x4_2048slots.wgsl here) that split its aggregate pass,
session 39: `group_by_rev7_parts.py MODE IN OUT`.

- no_add: rows are loaded, tested and converted but never added (wrong sums: timing only);
- no_probe: a row adds to its key's home slot without searching the table (wrong sums);
- no_convert: a row adds its value's bits instead of its fixed-point integer (wrong sums; carries
  then come every few rows, so it times the carry path, not the conversion);
- preload: correct; an invocation loads the first probe window of each of its rows before it adds
  any (slower on an H100: 3.68 against 3.06 ms at 1024 groups).
"""
import sys
mode, source, target = sys.argv[1:4]
w = open(source).read()
def rep(old, new):
    global w
    if w.count(old) != 1: sys.exit(f"expected one copy of {old!r}: {w.count(old)}")
    w = w.replace(old, new)
if mode == "no_add":
    rep("} else if (!add_local(row_keys[r], sum)) {", "} else if (sum == 0xffffffffu && !add_local(row_keys[r], sum)) {")
elif mode == "no_probe":
    rep("fn add_local(key: u32, sum: u32) -> bool {", "fn add_local(key: u32, sum: u32) -> bool {\n  add_to_local_slot(hash(key) & (LOCAL_SLOTS - 1u), key, sum);\n  return true;\n}\nfn add_local_probing(key: u32, sum: u32) -> bool {")
elif mode == "no_convert":
    rep("let sum = fixed_point(row_values[r], top);", "let sum = row_values[r];")
elif mode == "preload":
    # Each invocation loads the first probe window of all its rows before it adds any (their
    # loads in flight together); a stale window only costs a second step (the claim checks).
    rep("fn add_local(key: u32, sum: u32) -> bool {", """fn first_window(key: u32) -> array<u32, PROBE_WINDOW> {
  let first = hash(key) & (LOCAL_SLOTS - 1u);
  var found = array<u32, PROBE_WINDOW>();
  for (var i = 0u; i < PROBE_WINDOW; i++) {
    found[i] = atomicLoad(&local_table[local_key_word((first + i) & (LOCAL_SLOTS - 1u))]);
  }
  return found;
}
fn add_local(key: u32, sum: u32, preloaded: array<u32, PROBE_WINDOW>) -> bool {""")
    rep("""    var found = array<u32, PROBE_WINDOW>();
    for (var i = 0u; i < PROBE_WINDOW; i++) {
      found[i] = atomicLoad(&local_table[local_key_word((first + i) & mask)]);
    }""", """    var found = preloaded;
    if (step != 0u) {
      for (var i = 0u; i < PROBE_WINDOW; i++) {
        found[i] = atomicLoad(&local_table[local_key_word((first + i) & mask)]);
      }
    }""")
    rep("""    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n && in_this_key_part(row_keys[r])) {""", """    var windows = array<array<u32, PROBE_WINDOW>, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n) { windows[r] = first_window(row_keys[r]); }
    }
    for (var r = 0u; r < ROWS; r++) {
      if (tile * TILE + r * WG + local < params.n && in_this_key_part(row_keys[r])) {""")
    rep("} else if (!add_local(row_keys[r], sum)) {", "} else if (!add_local(row_keys[r], sum, windows[r])) {")
else: sys.exit("mode")
open(target, "w").write(w)
