#!/usr/bin/env python3
"""Edits of a generated radix sort scatter with subgroups (radix_sort_u32 or radix_sort_pairs_u32,
five passes or one sweep; issue 25, session 40), to find what the scatter's workgroup memory and
its accesses cost:

  plain     the tile's keys (and values) are staged in `staged`, a plain array<u32, WG * KPI> of
            its own, with plain loads and stores, instead of in `ranked`, the atomic array that
            holds the subgroups' digit counters first (room for subgroups of 8 lanes): workgroup
            memory grows by WG * KPI words
  narrow    plain, and `ranked` sized for subgroups of 32 lanes only (WG / 32 * WORDS words), so
            that workgroup memory grows by a quarter of the tile instead; correct only where every
            subgroup has at least 32 lanes (an NVIDIA GPU: certify it there)
  clear     (revision 11) the counters cleared at the scatter's start, all the room for subgroups
            of 8 lanes, then a barrier, as revision 10 did: revision 10's scatter
  regstart  (revision 11, five passes, DIGITS == WG) each digit's first output place for the tile
            held in a register of invocation `digit` instead of the workgroup array tile_start
            (DIGITS words less workgroup memory); generated since revision 12
  sweepstart (revision 12, one sweep) the same for the one sweep, whose invocation d < DIGITS
            alone writes and reads tile_start[d]: a private scalar instead of the workgroup array
  tilestart (revision 12, five passes) the tile starts back in the workgroup array tile_start:
            revision 11's scatter (for 1e4d00f's keys WGSL, byte for byte but the header)

The output is the same (certify it). plain and narrow apply to revisions 10 to 12, clear to
revisions 11 and 12, regstart to revision 11, sweepstart and tilestart to revision 12.

usage: plain_staging.py plain|narrow|clear|regstart|sweepstart|tilestart < generated.wgsl > edited.wgsl
"""
import re
import sys

MODES = ("plain", "narrow", "clear", "regstart", "sweepstart", "tilestart")


def fail(why):
    sys.exit("edit: " + why)


def replace_once(wgsl, old, new):
    if wgsl.count(old) != 1:
        fail("expected one of: " + old.strip())
    return wgsl.replace(old, new)


def plain(wgsl):
    declaration = "var<workgroup> ranked: array<atomic<u32>, RANKED_WORDS>;\n"
    wgsl = replace_once(
        wgsl, declaration,
        declaration + "var<workgroup> staged: array<u32, WG * KPI>;  // the ranked tile\n")
    wgsl, store_count = re.subn(r"atomicStore\(&ranked\[places\[j\]\], (.*)\);\n",
                                r"staged[places[j]] = \1;\n", wgsl)
    wgsl, load_count = re.subn(r"atomicLoad\(&ranked\[p\]\)", "staged[p]", wgsl)
    if store_count == 0 or load_count == 0:
        fail("found %d stagings and %d loads of the ranked tile" % (store_count, load_count))
    if "&ranked[places" in wgsl or "&ranked[p]" in wgsl:
        fail("an access to the ranked tile was left atomic")
    return wgsl


def narrow(wgsl):
    wgsl = plain(wgsl)
    wgsl, count = re.subn(r"const RANKED_WORDS: u32 = \d+u;",
                          "const RANKED_WORDS: u32 = WG / 32u * WORDS;", wgsl)
    if count != 1:
        fail("no single RANKED_WORDS")
    # Revision 10 clears COUNTER_WORDS at the start: as many as the narrowed array holds.
    wgsl = re.sub(r"const COUNTER_WORDS: u32 = \d+u;", "const COUNTER_WORDS: u32 = RANKED_WORDS;",
                  wgsl)
    return wgsl


def clear(wgsl):
    if "COUNTER_WORDS" in wgsl:
        fail("this WGSL clears its counters already (revision 10)")
    head = "  let subgroup = local / sg;\n"
    return replace_once(
        wgsl, head, head + "  for (var w = local; w < WG / MIN_SUBGROUP * WORDS; w += WG) "
        "{ atomicStore(&ranked[w], 0u); }\n  workgroupBarrier();\n")


def constant(wgsl, name):
    found = re.search(r"const %s: u32 = (\d+)u;" % name, wgsl)
    if not found:
        fail("no constant " + name)
    return int(found.group(1))


def regstart(wgsl):
    if constant(wgsl, "WG") != constant(wgsl, "DIGITS"):
        fail("regstart needs DIGITS == WG")
    wgsl = replace_once(
        wgsl, "var<workgroup> tile_start: array<u32, DIGITS>;  "
        "// the tile's first output place per digit\n", "")
    wgsl = replace_once(
        wgsl, "  for (var d = local; d < DIGITS; d += WG) "
        "{ tile_start[d] = counts[d * params.tiles + tile]; }\n",
        "  let own_start = counts[min(local, DIGITS - 1u) * params.tiles + tile];  // DIGITS == WG\n")
    return replace_once(
        wgsl, "  for (var d = local; d < DIGITS; d += WG) {\n"
        "    digit_base[d] = tile_start[d] - digit_base[d];\n  }\n",
        "  digit_base[local] = own_start - digit_base[local];\n")


def sweepstart(wgsl):
    wgsl = replace_once(
        wgsl, "var<workgroup> tile_start: array<u32, DIGITS>;  "
        "// the tile's first output place per digit\n",
        "var<private> own_start: u32;  // invocation d < DIGITS: the tile's first place of digit d\n")
    wgsl = replace_once(wgsl, "    tile_start[local] = start;\n", "    own_start = start;\n")
    wgsl = replace_once(wgsl, "    tile_start[local] += prefix;\n", "    own_start += prefix;\n")
    wgsl = replace_once(
        wgsl, "  for (var d = local; d < DIGITS; d += WG) {\n"
        "    digit_base[d] = tile_start[d] - digit_base[d];\n  }\n",
        "  if (local < DIGITS) { digit_base[local] = own_start - digit_base[local]; }\n")
    if "tile_start[" in re.sub(r"//.*", "", wgsl):
        fail("an access to tile_start is left")
    return wgsl


def tilestart(wgsl):
    sums = ("var<workgroup> digit_group_sums: array<u32, WG / MIN_SUBGROUP>;  "
            "// the digits' sums per subgroup\n")
    wgsl = replace_once(
        wgsl, sums,
        sums + "var<workgroup> tile_start: array<u32, DIGITS>;  "
        "// the tile's first output place per digit\n")
    wgsl = replace_once(
        wgsl, "  // The tile's output starts are read now, so that their latency passes during the "
        "ranking.\n  var own_starts = array<u32, PER>();\n  for (var q = 0u; q < PER; q++) {\n"
        "    own_starts[q] = counts[min(local * PER + q, DIGITS - 1u) * params.tiles + tile];\n  }\n",
        "  // The tile's output bases are read now, so that their latency passes during the "
        "ranking.\n  for (var d = local; d < DIGITS; d += WG) "
        "{ tile_start[d] = counts[d * params.tiles + tile]; }\n")
    return replace_once(
        wgsl, "  for (var q = 0u; q < PER; q++) {\n    let d = local * PER + q;\n"
        "    if (d < DIGITS) { digit_base[d] = own_starts[q] - digit_base[d]; }\n  }\n",
        "  for (var d = local; d < DIGITS; d += WG) {\n"
        "    digit_base[d] = tile_start[d] - digit_base[d];\n  }\n")


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        fail("usage: plain_staging.py %s < generated.wgsl > edited.wgsl" % "|".join(MODES))
    edit = {"plain": plain, "narrow": narrow, "clear": clear, "regstart": regstart,
            "sweepstart": sweepstart, "tilestart": tilestart}[sys.argv[1]]
    sys.stdout.write(edit(sys.stdin.read()))


if __name__ == "__main__":
    main()
