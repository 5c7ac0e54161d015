#!/usr/bin/env python3
"""Edits of group_by_sum_f32 revision 7's aggregate pass (rows_per_invocation 4; for example
group_by_sum_f32_rev7_1024x4_2048slots.wgsl here), session 39: `group_by_rev7_loads.py MODES IN
OUT`, MODES a comma list of
- vec4: an invocation's 4 rows are consecutive and loaded as one vec4 of keys and one of values
  (keys and values bound as array<vec4u>; rows past the last whole vec4 read wrongly: time at n
  a multiple of 4 only);
- prefetch: correct; the next tile's rows are loaded before this tile's rows are added
  (revision 8 generates this);
- no_add: rows loaded and converted, never added (wrong sums);
- plain (any other word): the loads moved into load_rows, nothing else."""
import sys
modes, source, target = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
w = open(source).read()
def rep(old, new):
    global w
    if w.count(old) != 1: sys.exit(f"expected one copy of {old!r}: {w.count(old)}")
    w = w.replace(old, new)
load_loop = """    var row_keys = array<u32, ROWS>();
    var row_values = array<u32, ROWS>();
    for (var r = 0u; r < ROWS; r++) {
      let row = tile * TILE + r * WG + local;
      if (row < params.n) {
        row_keys[r] = keys[row];
        row_values[r] = values[row];
      }
    }
"""
valid = "tile * TILE + r * WG + local < params.n"
if "vec4" in modes:
    rep("var<storage, read> keys: array<u32>;", "var<storage, read> keys: array<vec4u>;")
    rep("var<storage, read> values: array<u32>;", "var<storage, read> values: array<vec4u>;")
    rep("let magnitude = values[row] & 0x7fffffffu;", "let magnitude = values[row / 4u][row % 4u] & 0x7fffffffu;")
    rep("@compute @workgroup_size(WG)\nfn aggregate(", """fn load_rows(tile: u32, local: u32, row_keys: ptr<function, array<u32, ROWS>>,
             row_values: ptr<function, array<u32, ROWS>>) {
  let base = tile * TILE + ROWS * local;
  if (base + 3u < params.n) {
    let k = keys[base / 4u];
    let v = values[base / 4u];
    *row_keys = array<u32, ROWS>(k.x, k.y, k.z, k.w);
    *row_values = array<u32, ROWS>(v.x, v.y, v.z, v.w);
  } else {
    for (var r = 0u; r < ROWS; r++) {
      let row = base + r;
      if (row < params.n) {
        (*row_keys)[r] = keys[row / 4u][row % 4u];
        (*row_values)[r] = values[row / 4u][row % 4u];
      }
    }
  }
}

@compute @workgroup_size(WG)
fn aggregate(""")
    new_valid = "tile * TILE + ROWS * local + r < params.n"
else:
    rep("@compute @workgroup_size(WG)\nfn aggregate(", """fn load_rows(tile: u32, local: u32, row_keys: ptr<function, array<u32, ROWS>>,
             row_values: ptr<function, array<u32, ROWS>>) {
  for (var r = 0u; r < ROWS; r++) {
    let row = tile * TILE + r * WG + local;
    if (row < params.n) {
      (*row_keys)[r] = keys[row];
      (*row_values)[r] = values[row];
    }
  }
}

@compute @workgroup_size(WG)
fn aggregate(""")
    new_valid = valid
if "prefetch" in modes:
    rep("""  for (var tile = workgroup; tile < tiles; tile += stride) {
""" + "    // The tile's rows are loaded before any is added, so that their loads are in flight together\n    // (loops of ROWS steps: unrolled, the arrays stay in registers).\n" + load_loop,
"""  var next_keys = array<u32, ROWS>();
  var next_values = array<u32, ROWS>();
  if (workgroup < tiles) { load_rows(workgroup, local, &next_keys, &next_values); }
  for (var tile = workgroup; tile < tiles; tile += stride) {
    let row_keys = next_keys;
    let row_values = next_values;
    if (tile + stride < tiles) { load_rows(tile + stride, local, &next_keys, &next_values); }
""")
else:
    rep(load_loop, """    var row_keys = array<u32, ROWS>();
    var row_values = array<u32, ROWS>();
    load_rows(tile, local, &row_keys, &row_values);
""")
rep(valid, new_valid)
if "no_add" in modes:
    rep("} else if (!add_local(row_keys[r], sum)) {", "} else if (sum == 0xffffffffu && !add_local(row_keys[r], sum)) {")
open(target, "w").write(w)
