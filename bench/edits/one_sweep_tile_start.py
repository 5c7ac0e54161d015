#!/usr/bin/env python3
"""Timing edits of a one-sweep radix sort's generated WGSL (issue 25, session 33).

usage: one_sweep_tile_start.py by-id|by-id-late-start < generated.wgsl > edited.wgsl

by-id             the scatter takes its tile from its workgroup id instead of claiming it from the
                  round's counter (a predecessor that has not started is counted from the input by
                  the look-back's fallback, so the result stays correct without forward progress);
by-id-late-start  also: the round's digit totals are scanned by subgroup operations and one barrier
                  (not a workgroup scan of 2 log2(WG) + 2 barriers), after the tile's keys are
                  loaded instead of before, so that the loads' latency passes during the scan.
Each replacement must match exactly once, or the script fails.
"""
import sys

CLAIM = "  let tile = claim_tile(local);\n"
BY_ID = "  let tile = linear_workgroup(group, groups);\n"

OLD_START = """fn start_tile(tile: u32, local: u32) {
  let d = min(local, DIGITS - 1u);
  let total = select(0u, atomicLoad(&counts[ROUNDS + params.round * DIGITS + d]), local < DIGITS);
  let start = workgroup_exclusive_scan(total, local).x;
"""
NEW_START = """fn start_tile(tile: u32, local: u32, lane: u32, sg: u32) {
  let d = min(local, DIGITS - 1u);
  let total = select(0u, atomicLoad(&counts[ROUNDS + params.round * DIGITS + d]), local < DIGITS);
  let group_total = subgroupAdd(total);
  var start = subgroupExclusiveAdd(total);
  if (lane == 0u) { digit_group_sums[local / sg] = group_total; }
  workgroupBarrier();
  for (var w = 0u; w < local / sg; w++) { start += digit_group_sums[w]; }
"""
OLD_CALL = "  start_tile(tile, local);\n"
PLACES = "  var places = array<u32, KPI>();"


def replace_once(text, old, new):
    if text.count(old) != 1:
        sys.exit("edit: expected one match of %r, found %d" % (old[:60], text.count(old)))
    return text.replace(old, new)


def main():
    mode = sys.argv[1]
    text = sys.stdin.read()
    text = replace_once(text, CLAIM, BY_ID)
    if mode == "by-id-late-start":
        text = replace_once(text, OLD_START, NEW_START)
        text = replace_once(text, OLD_CALL, "")
        text = replace_once(text, PLACES, "  start_tile(tile, local, lane, sg);\n" + PLACES)
    elif mode != "by-id":
        sys.exit("edit: unknown mode " + mode)
    sys.stdout.write(text)


main()
