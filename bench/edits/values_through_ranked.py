#!/usr/bin/env python3
"""An edit of a generated radix_sort_pairs_u32 scatter (five passes or one sweep, with subgroups;
issue 25, session 36): the values are staged in `ranked`, where the keys were, after the keys
have left, instead of in a workgroup array of their own (`ranked_values`, 4 bytes per key of the
tile: 16 KiB at 256 x 16, 18 KiB at 384 x 12). Each invocation keeps the output place of each of
its staged keys (KPI registers) across one more barrier, so that its values leave for the same
places. Less workgroup memory per workgroup lets more of them reside on a multiprocessor, which
session 34's ballast edit showed matters a great deal. The output is the same (certify it).

It applies to radix sort revision 8 and earlier: revision 9 builds it into the generator
(kPairKeyOutSlotWgsl and what follows in src/kernels/radix_sort.cpp).

usage: values_through_ranked.py < generated.wgsl > edited.wgsl
"""
import re
import sys

OWN_ARRAY = """var<workgroup> ranked_values: array<u32, WG * KPI>;
fn stage_value(place: u32, value: u32) { ranked_values[place] = value; }
fn staged_value(place: u32) -> u32 { return ranked_values[place]; }
"""
SHARED = """fn stage_value(place: u32, value: u32) { atomicStore(&ranked[place], value); }
fn staged_value(place: u32) -> u32 { return atomicLoad(&ranked[place]); }
"""
STAGE = "    stage_value(places[j], values[j]);\n"
TAIL = """  for (var p = local; p < valid; p += WG) {
    let key = atomicLoad(&ranked[p]);
    keys_out[digit_base[digit(key)] + p] = key;
    store_value(digit_base[digit(key)] + p, staged_value(p));
  }
}
"""


def block(index, body, name="s"):
    return "  {\n    const %s = %du;\n%s  }\n" % (name, index, body)


def tail(kpi):
    keys = "".join(block(s, "    let p = local + s * WG;\n"
                            "    let key = atomicLoad(&ranked[p]);\n"
                            "    targets[s] = digit_base[digit(key)] + p;\n"
                            "    if (p < valid) { keys_out[targets[s]] = key; }\n")
                   for s in range(kpi))
    stage = "".join(block(j, STAGE, "j") for j in range(kpi))
    values = "".join(block(s, "    let p = local + s * WG;\n"
                              "    if (p < valid) { store_value(targets[s], staged_value(p)); }\n")
                     for s in range(kpi))
    return ("  var targets = array<u32, KPI>();  // the output place of staged key local + s WG\n" +
            keys + "  workgroupBarrier();  // every key has left `ranked`\n" + stage +
            "  workgroupBarrier();\n" + values + "}\n")


def main():
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    text = sys.stdin.read()
    kpi = re.search(r"^const KPI: u32 = (\d+)u;", text, re.M)
    if not kpi or text.count(OWN_ARRAY) != 1 or text.count(TAIL) != 1 or STAGE not in text:
        sys.exit("edit: expected a pairs scatter with subgroups staging values in ranked_values")
    text = text.replace(OWN_ARRAY, SHARED).replace(STAGE, "")
    sys.stdout.write(text.replace(TAIL, tail(int(kpi.group(1)))))


main()
