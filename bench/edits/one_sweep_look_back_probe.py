#!/usr/bin/env python3
"""Edits of a one-sweep radix sort's generated WGSL (look_back_window=1, subgroup ranking) that
split what its look-back costs (issue 25, session 34). MODE is one of:

  spins=N           SPINS becomes N: how much the input fallback costs (right output).
  predecessor-only  each digit waits for its predecessor's word, adds it and stops: the wait
                    for the predecessor without the walk behind it (wrong output, time only).
  single-read       each digit reads its predecessor's word once and stops, published or not:
                    one round trip, no wait (wrong output, time only).
  early-read        the predecessor's word is read right after the tile publishes its counts
                    and used as the walk's first poll, so that its round trip passes during the
                    digit scan, the places and the staging (right output).
  late-read         the same read issued just before the staging instead (right output).
  ballast=N         the scatter holds N more words of workgroup memory (touched only when n is
                    2^32 - 1, which never happens): fewer resident workgroups per multiprocessor
                    where workgroup memory, not registers, bounds them (right output).

usage: one_sweep_look_back_probe.py MODE < generated.wgsl > edited.wgsl
"""
import sys

LOAD = "      let word = atomicLoad(&block_sums[chain_word(params.round, next - 1u, local)]);\n"
WAIT = "        spins += 1u;\n        continue;\n"
DONE = "      done = (word & FLAG_MASK) == FLAG_PREFIX || next == 0u;\n"
PUBLISH = "  publish_aggregate(tile, local, digit_total);\n"
STAGE = "  workgroupBarrier();\n  {\n    const j = 0u;\n    atomicStore(&ranked[places[j]], keys[j]);\n"
FINISH_CALL = "  finish_tile(tile, local, digit_total);\n"
FINISH_DEF = ("fn finish_tile(tile: u32, local: u32, total: u32) {\n"
              "  let prefix = look_back(tile, local);\n")
LOOK_BACK_DEF = "fn look_back(tile: u32, local: u32) -> u32 {\n"
SCATTER = "@compute @workgroup_size(WG)\nfn scatter("
TILE = "  let tile = linear_workgroup(group, groups);\n"
FIRST_READ = ("  let first_word = atomicLoad(&block_sums[chain_word(params.round, max(tile, 1u) - 1u,"
              " min(local, DIGITS - 1u))]);\n")


def replace_once(text, old, new):
    if text.count(old) != 1:
        sys.exit("edit: expected one %r, found %d" % (old.strip()[:60], text.count(old)))
    return text.replace(old, new)


def early_read(text, before):
    text = replace_once(text, before, FIRST_READ + before if before is STAGE else before + FIRST_READ)
    text = replace_once(text, FINISH_CALL, "  finish_tile(tile, local, digit_total, first_word);\n")
    text = replace_once(text, FINISH_DEF,
                        "fn finish_tile(tile: u32, local: u32, total: u32, first: u32) {\n"
                        "  let prefix = look_back(tile, local, first);\n")
    text = replace_once(text, LOOK_BACK_DEF,
                        "fn look_back(tile: u32, local: u32, first: u32) -> u32 {\n"
                        "  var early = first;  // tile - 1's word, read before the look-back\n")
    return replace_once(text, LOAD,
                        "      var word = early;\n      early = 0u;\n"
                        "      if ((word & FLAG_MASK) == 0u) {\n  "
                        + LOAD.replace("let word", "word") + "      }\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    mode = sys.argv[1]
    text = sys.stdin.read()
    if mode.startswith("spins="):
        text = replace_once(text, "const SPINS: u32 = 128u;", "const SPINS: u32 = %su;" % int(mode[6:]))
    elif mode.startswith("ballast="):
        words = int(mode[8:])
        text = replace_once(text, SCATTER, "var<workgroup> ballast: array<u32, %d>;\n\n" % words + SCATTER)
        text = replace_once(text, TILE, TILE + "  if (params.n == 0xffffffffu) { ballast[local] = tile; }\n")
    elif mode == "predecessor-only":
        text = replace_once(text, DONE, "      done = true;\n")
    elif mode == "single-read":
        text = replace_once(text, WAIT, "        done = true;\n        continue;\n")
        text = replace_once(text, DONE, "      done = true;\n")
    elif mode == "early-read":
        text = early_read(text, PUBLISH)
    elif mode == "late-read":
        text = early_read(text, STAGE)
    else:
        sys.exit("edit: unknown mode %r\n%s" % (mode, __doc__))
    sys.stdout.write(text)


main()
