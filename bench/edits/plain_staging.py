#!/usr/bin/env python3
"""Edits of a generated radix sort scatter with subgroups (radix_sort_u32 or radix_sort_pairs_u32,
five passes or one sweep; issue 25, session 40), to find whether staging the ranked tile in
`ranked`, an array of atomic<u32> shared with the subgroups' digit counters, costs the scatter
time: WGSL atomics are relaxed, but a driver may still compile an atomic load or store of
workgroup memory into an atomic instruction rather than a plain one.

  plain   the tile's keys (and values) are staged in `staged`, a plain array<u32, WG * KPI> of
          its own, with plain loads and stores; `ranked` keeps the counters alone, sized as
          generated (room for subgroups of 8: workgroup memory grows by WG * KPI words)
  narrow  plain, and `ranked` sized for subgroups of 32 lanes only (WG / 32 * WORDS words), so
          that workgroup memory grows by a quarter of the tile instead; correct only where every
          subgroup has at least 32 lanes (an NVIDIA GPU: certify it there)

The output is the same (certify it). It applies to the WGSL of radix sort revision 10.

usage: plain_staging.py plain|narrow < generated.wgsl > edited.wgsl
"""
import re
import sys


def fail(why):
    sys.exit("edit: " + why)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("plain", "narrow"):
        fail("usage: plain_staging.py plain|narrow < generated.wgsl > edited.wgsl")
    wgsl = sys.stdin.read()
    declaration = "var<workgroup> ranked: array<atomic<u32>, RANKED_WORDS>;\n"
    if wgsl.count(declaration) != 1:
        fail("no single declaration of `ranked`")
    wgsl = wgsl.replace(
        declaration,
        declaration + "var<workgroup> staged: array<u32, WG * KPI>;  // the ranked tile\n")
    stores = re.subn(r"atomicStore\(&ranked\[places\[j\]\], (.*)\);\n",
                     r"staged[places[j]] = \1;\n", wgsl)
    wgsl, store_count = stores
    loads = re.subn(r"atomicLoad\(&ranked\[p\]\)", "staged[p]", wgsl)
    wgsl, load_count = loads
    if store_count == 0 or load_count == 0:
        fail("found %d stagings and %d loads of the ranked tile" % (store_count, load_count))
    if "&ranked[places" in wgsl or "&ranked[p]" in wgsl:
        fail("an access to the ranked tile was left atomic")
    if sys.argv[1] == "narrow":
        sizes = 0
        for name in ("COUNTER_WORDS", "RANKED_WORDS"):
            wgsl, count = re.subn(r"const %s: u32 = \d+u;" % name,
                                  "const %s: u32 = WG / 32u * WORDS;" % name, wgsl)
            sizes += count
        if sizes != 2:
            fail("found %d of the two counter sizes" % sizes)
    sys.stdout.write(wgsl)


if __name__ == "__main__":
    main()
