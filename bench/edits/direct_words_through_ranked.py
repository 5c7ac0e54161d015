#!/usr/bin/env python3
"""An edit of a generated radix_sort_pairs_u64 scatter with direct rounds (five passes or one
sweep; issue 26, session 36): the words that do not hold the digit, then the values, are staged
in `ranked` after the digit words have been read from it, instead of in `ranked_values` (4 bytes
per key of the tile more per workgroup). Each invocation keeps the digit word and output place of
each of its staged keys. This is what revision 9 did for the 32-bit pairs (18.36 -> 12.05 ms of
scatter for 2^28 pairs at 256 x 16 on an H100). The output is the same (certify it).

usage: direct_words_through_ranked.py < generated.wgsl > edited.wgsl
"""
import re
import sys

RANKED_VALUES = "var<workgroup> ranked_values: array<u32, WG * KPI>;\n"
STAGE_OTHER = "    ranked_values[places[j]] = others[j];\n"
TAIL_START = "  var targets = array<u32, KPI>();"


def blocks(name, kpi, body):
    return "".join("  {\n    const %s = %du;\n%s  }\n" % (name, i, body) for i in range(kpi))


def tail(kpi):
    return (
        "  var targets = array<u32, KPI>();  // the output place of the staged key local + s WG\n"
        "  var words = array<u32, KPI>();  // its digit word\n" +
        blocks("s", kpi, "    let p = local + s * WG;\n"
                         "    words[s] = atomicLoad(&ranked[p]);\n"
                         "    targets[s] = digit_base[digit(words[s])] + p;\n") +
        "  workgroupBarrier();  // every digit word has been read: the other words take its place\n" +
        blocks("j", kpi, "    atomicStore(&ranked[places[j]], others[j]);\n") +
        "  workgroupBarrier();\n" +
        blocks("s", kpi, "    let p = local + s * WG;\n"
                         "    if (p < valid) {\n"
                         "      store_pair(targets[s], join_words(words[s], atomicLoad(&ranked[p])));\n"
                         "    }\n") +
        "  workgroupBarrier();  // the values take their place\n" +
        blocks("j", kpi, "    atomicStore(&ranked[places[j]], values[j]);\n") +
        "  workgroupBarrier();\n" +
        blocks("s", kpi, "    let p = local + s * WG;\n"
                         "    if (p < valid) { store_value(targets[s], atomicLoad(&ranked[p])); }\n") +
        "}\n")


def main():
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    text = sys.stdin.read()
    kpi = re.search(r"^const KPI: u32 = (\d+)u;", text, re.M)
    start = text.rfind(TAIL_START)
    if (not kpi or text.count(RANKED_VALUES) != 1 or STAGE_OTHER not in text or start < 0 or
            "fn split_keys" in text):
        sys.exit("edit: expected a u64 scatter with direct rounds staging in ranked_values")
    text = text.replace(RANKED_VALUES, "").replace(STAGE_OTHER, "")
    sys.stdout.write(text[:text.rfind(TAIL_START)] + tail(int(kpi.group(1))))


main()
