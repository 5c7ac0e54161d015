#!/usr/bin/env python3
"""A timing edit of a one-sweep radix sort's generated WGSL (issue 25, session 33): the scatter
publishes its digit counts but does not look back (finish_tile becomes a barrier), so each tile
writes as if no earlier tile held its digits. The output is wrong; only its time means anything:
the generated kernel's time minus this one's is what the look-back costs.

usage: one_sweep_no_look_back.py < generated.wgsl > edited.wgsl
"""
import sys

CALL = "  finish_tile(tile, local, digit_total);\n"
text = sys.stdin.read()
if text.count(CALL) != 1:
    sys.exit("edit: expected one call of finish_tile, found %d" % text.count(CALL))
sys.stdout.write(text.replace(CALL, "  workgroupBarrier();\n"))
