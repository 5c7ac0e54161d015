#!/usr/bin/env python3
"""An edit of a five-pass radix sort's generated WGSL (8-bit digits, the atomic digit_count; issue
25, session 35): each digit_count workgroup whose tile is a multiple of GROUP counts GROUP
consecutive tiles and stores each digit's GROUP counts to consecutive words (one 32-byte sector for
GROUP 8), where the generated pass stores each tile's counts one word per digit, `tiles` words
apart; the other workgroups return at once, so the plan's dispatch is unchanged. The output is the
same (certify it): the edit times what grouping tiles in the counting pass would gain.

It applies to radix sort revision 7 and earlier: revision 8 builds GROUP 4 into the generator
(kCountGroup, kGroupedDigitCountWgsl in src/kernels/radix_sort.cpp).

usage: digit_count_tile_groups.py GROUP < generated.wgsl > edited.wgsl
"""
import sys

START = "@compute @workgroup_size(COUNT_WG)\nfn digit_count("
END = "  store_tile_counts(tile, local);\n}\n"
GROUPED = """var<workgroup> group_counts: array<atomic<u32>, DIGITS * GROUP>;

@compute @workgroup_size(COUNT_WG)
fn digit_count(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
               @builtin(local_invocation_index) local: u32) {
  let tile = linear_workgroup(group, groups);
  if (tile % GROUP != 0u) { return; }
  for (var w = local; w < DIGITS * GROUP; w += COUNT_WG) { atomicStore(&group_counts[w], 0u); }
  workgroupBarrier();
  for (var t = 0u; t < GROUP; t++) {
    let first = (tile + t) * (WG * KPI) + local;
    for (var chunk = 0u; chunk < COUNT_KEYS; chunk += COUNT_CHUNK) {
      let keys = load_count_chunk(first + chunk * COUNT_WG);
      for (var item = 0u; item < COUNT_CHUNK; item++) {
        if (first + (chunk + item) * COUNT_WG < params.n) {
          atomicAdd(&group_counts[digit(keys[item]) * GROUP + t], 1u);
        }
      }
    }
  }
  workgroupBarrier();
  for (var w = local; w < DIGITS * GROUP; w += COUNT_WG) {
    let t = w % GROUP;
    if (tile + t < params.tiles) { counts[(w / GROUP) * params.tiles + tile + t] = atomicLoad(&group_counts[w]); }
  }
}
"""


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    group = int(sys.argv[1])
    text = sys.stdin.read()
    start = text.find(START)
    end = text.find(END, start)
    if start < 0 or end < 0 or text.count(START) != 1:
        sys.exit("edit: expected one digit_count entry point ending in store_tile_counts")
    grouped = "const GROUP: u32 = %du;  // tiles per digit_count workgroup\n\n" % group + GROUPED
    sys.stdout.write(text[:start] + grouped + text[end + len(END):])


main()
