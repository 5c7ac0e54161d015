#!/usr/bin/env python3
"""Edits of a generated radix sort scatter with subgroups that carries more than its digit word
(radix_sort_pairs_u32, or radix_sort_pairs_u64 with direct rounds; issue 26, session 37), to find
what holds the u64 direct rounds' scatter at 7 ms a round on an H100 where the 32-bit pairs'
takes 3 ms:

  late     a key's other word and its value are loaded again from the round's input just before
           they are staged in `ranked`, instead of being held in registers through the ranking
           (KPI fewer registers each; the reload is likely an L2 hit: the tile was read moments
           before)
  hoisted  (u64 direct rounds) the tile's loads branch once on the round's source, instead of
           in each load_pair and load_value of each key slot
  both     late and hoisted

The output is the same (certify it). It applies to the WGSL of radix sort revision 9 (u64
revision 7): revision 10 (u64 revision 8) generates `late` for the 32-bit pairs and the u64 direct
rounds' loads and stores branching once per tile.

usage: scatter_late_loads.py late|hoisted|both < generated.wgsl > edited.wgsl
"""
import re
import sys

LOAD_OTHER = "    others[j] = other_word(pair);\n"
LOAD_VALUE = "    values[j] = load_value(min(i, last));\n"
STAGE_OTHER = "    atomicStore(&ranked[places[j]], others[j]);\n"
STAGE_VALUE = "    atomicStore(&ranked[places[j]], values[j]);\n"
LATE_OTHER = "    atomicStore(&ranked[places[j]], other_word(load_pair(min(run + j * sg + lane, last))));\n"
LATE_VALUE = "    atomicStore(&ranked[places[j]], load_value(min(run + j * sg + lane, last)));\n"
VALUES_DECL = "  var values = array<u32, KPI>();\n"
OTHERS_DECL = "  var others = array<u32, KPI>();  // each key's other word\n"
# (pair load, value load) by the round's source, as kWideRoutesWgsl's load_pair and load_value.
SOURCES = [("keys64[min(i, last)]", "values_in[min(i, last)]"),
           ("keys_out[min(i, last)]", "keys_out[params.n + min(i, last) / 2u][min(i, last) & 1u]"),
           ("sorted64[min(i, last)]", "values_out[min(i, last)]")]


def fail(why):
    sys.exit("edit: " + why)


def late(scatter):
    if STAGE_VALUE not in scatter or LOAD_VALUE not in scatter:
        fail("expected a pairs scatter staging its values in ranked")
    scatter = scatter.replace(LOAD_VALUE, "").replace(STAGE_VALUE, LATE_VALUE)
    scatter = scatter.replace(VALUES_DECL, "", 1)
    if LOAD_OTHER in scatter:
        scatter = scatter.replace(LOAD_OTHER, "").replace(STAGE_OTHER, LATE_OTHER)
        scatter = scatter.replace(OTHERS_DECL, "", 1)
    if "values[j]" in scatter or "others[j]" in scatter:
        fail("a value or other word is still held in a register")
    return scatter


def hoisted(scatter):
    slot = re.compile(r"  \{\n    const j = \d+u;\n    let i = run \+ j \* sg \+ lane;\n"
                      r"    let pair = load_pair\(min\(i, last\)\);\n(?:    .*\n)*?  \}\n")
    slots = list(slot.finditer(scatter))
    if not slots:
        fail("expected a u64 direct-rounds scatter")
    start, end = slots[0].start(), slots[-1].end()
    loads = scatter[start:end]
    if len(slots) != loads.count("const j = "):
        fail("the key slots' loads are not consecutive")

    def from_source(pair, value):
        text = loads.replace("load_pair(min(i, last))", pair)
        text = text.replace("load_value(min(i, last))", value)
        return "\n".join("  " + line if line else line for line in text.split("\n"))

    branches = ["if (load_source == %du) {\n%s  }" % (s, from_source(*SOURCES[s])) for s in (0, 1)]
    hoist = ("  let load_source = round_route() & 3u;  // uniform: one branch for the tile's loads\n"
             "  " + " else ".join(branches) + " else {\n" + from_source(*SOURCES[2]) + "  }\n")
    return scatter[:start] + hoist + scatter[end:]


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("late", "hoisted", "both"):
        sys.exit(__doc__)
    mode = sys.argv[1]
    text = sys.stdin.read()
    at = text.find("fn scatter(")
    if at < 0:
        fail("no scatter entry point")
    head, scatter = text[:at], text[at:]
    if mode in ("late", "both"):
        scatter = late(scatter)
    if mode in ("hoisted", "both"):
        scatter = hoisted(scatter)
    sys.stdout.write(head + scatter)


main()
